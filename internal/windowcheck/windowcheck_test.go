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

func TestFilled(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	calls := []Call{{ms(10), 5}, {ms(0), 3}, {ms(20), 2}} // unsorted on purpose
	spans := []Span{
		{ms(5), ms(25)},
		{ms(15), ms(30)}, // overlaps the first: its instants are sampled once
		{ms(40), ms(40)}, // empty
	}
	got := Filled(calls, 12*time.Millisecond, 5*time.Millisecond, spans)
	// Instants 5, 10, 15, 20, 25: windows (-7,5]=3, (-2,10]=8, (3,15]=5,
	// (8,20]=7, (13,25]=2.
	want := Fill{Instants: 5, Mean: 25.0 / 5, Least: 2, LeastAt: ms(25)}
	if got != want {
		t.Errorf("Filled = %+v, want %+v", got, want)
	}
	if got := Filled(calls, time.Millisecond, time.Millisecond, nil); got.Instants != 0 || got.Mean != 0 {
		t.Errorf("Filled over no span = %+v, want nothing sampled", got)
	}
}

func TestBefore(t *testing.T) {
	t0 := time.Unix(1000, 0)
	spans := []Span{{t0, t0.Add(time.Second)}, {t0.Add(2 * time.Second), t0.Add(3 * time.Second)}}
	got := Before(spans, t0.Add(1500*time.Millisecond))
	if len(got) != 1 || !got[0].Till.Equal(t0.Add(time.Second)) {
		t.Errorf("Before = %v, want the first span whole and nothing of the second", got)
	}
	got = Before(spans, t0.Add(500*time.Millisecond))
	if len(got) != 1 || !got[0].Till.Equal(t0.Add(500*time.Millisecond)) {
		t.Errorf("Before = %v, want the first span cut at 500ms", got)
	}
}

func TestMinus(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := func(from, till int) Span {
		return Span{t0.Add(time.Duration(from) * time.Second), t0.Add(time.Duration(till) * time.Second)}
	}
	got := Minus([]Span{s(0, 10), s(20, 30)}, []Span{s(2, 4), s(8, 22), s(25, 26), s(40, 50)})
	want := []Span{s(0, 2), s(4, 8), s(22, 25), s(26, 30)}
	if len(got) != len(want) {
		t.Fatalf("Minus = %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].From.Equal(want[i].From) || !got[i].Till.Equal(want[i].Till) {
			t.Errorf("Minus[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}
