package windowcheck

import (
	"testing"
	"time"
)

func TestMost(t *testing.T) {
	t0 := time.Unix(1000, 0)
	calls := []Call{ // unsorted on purpose
		{t0.Add(2 * time.Second), 4}, {t0, 5}, {t0.Add(2500 * time.Millisecond), 1}, {t0.Add(time.Second), 3},
	}
	if got, end := Most(calls, 2*time.Second); got != 8 || !end.Equal(t0.Add(time.Second)) && !end.Equal(t0.Add(2500*time.Millisecond)) {
		t.Errorf("most over 2s windows = %d ending %v, want 8 ((+0.5s,+2.5s] or (-1s,+1s])", got, end.Sub(t0))
	}
	if got, _ := Most(calls, 2*time.Second+time.Nanosecond); got != 12 {
		t.Errorf("most over 2s+1ns windows = %d, want 12", got)
	}
	if got, _ := Most(nil, time.Second); got != 0 {
		t.Errorf("most of nothing = %d", got)
	}
}
