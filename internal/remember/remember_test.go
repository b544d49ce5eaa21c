package remember

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/costs"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func endpoint(charges ...costs.Charge) costs.Endpoint {
	return costs.Endpoint{Name: "e", Charges: charges}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name       string
		noted      map[Key]Refusal
		ep         costs.Endpoint
		at         time.Time
		wantBucket string
		wantOK     bool
	}{
		{"nothing noted", nil, endpoint(costs.Charge{Bucket: "pool", Units: 1}), t0, "", false},
		{"a refusal of as many units holds", map[Key]Refusal{{"s", "pool"}: {Units: 5, Until: t0.Add(time.Second)}},
			endpoint(costs.Charge{Bucket: "pool", Units: 5}), t0, "pool", true},
		{"fewer units may fit", map[Key]Refusal{{"s", "pool"}: {Units: 5, Until: t0.Add(time.Second)}},
			endpoint(costs.Charge{Bucket: "pool", Units: 4}), t0, "", false},
		{"ended", map[Key]Refusal{{"s", "pool"}: {Units: 1, Until: t0.Add(time.Second)}},
			endpoint(costs.Charge{Bucket: "pool", Units: 1}), t0.Add(time.Second), "", false},
		{"a pause of the scope refuses any cost", map[Key]Refusal{{"s", ""}: {Units: 9, Until: t0.Add(time.Second), Pause: true}},
			endpoint(costs.Charge{Bucket: "pool", Units: 1}), t0, "", true},
		{"another scope", map[Key]Refusal{{"other", ""}: {Until: t0.Add(time.Second), Pause: true}},
			endpoint(costs.Charge{Bucket: "pool", Units: 1}), t0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs Refusals
			for k, r := range tt.noted {
				rs.Note(k, r, t0)
			}
			bucket, _, ok := rs.Check("s", tt.ep, tt.at)
			if bucket != tt.wantBucket || ok != tt.wantOK {
				t.Errorf("Check = %q, %v; want %q, %v", bucket, ok, tt.wantBucket, tt.wantOK)
			}
		})
	}
}

// TestNoteSinceForget: a refusal decided before something was forgotten
// (a resume) is not remembered after it; Noted hears of every note.
func TestNoteSinceForget(t *testing.T) {
	var rs Refusals
	noted := 0
	rs.Noted = func() { noted++ }
	k := Key{"s", "pool"}
	epoch := rs.Mark()
	rs.Forget(func(Key) bool { return true })
	rs.NoteSince(epoch, k, Refusal{Units: 1, Until: t0.Add(time.Minute)}, t0)
	if rs.Live(t0) {
		t.Error("a refusal decided before a resume was remembered after it")
	}
	rs.NoteSince(rs.Mark(), k, Refusal{Units: 1, Until: t0.Add(time.Minute)}, t0)
	if !rs.Live(t0) {
		t.Error("a refusal decided after the resume was not remembered")
	}
	if noted != 2 {
		t.Errorf("Noted was called %d times, want 2", noted)
	}
	rs.Note(Key{"s", ""}, Refusal{Units: 7, Until: t0.Add(time.Minute), Pause: true}, t0)
	if got := rs.Pauses(t0); len(got) != 1 || got[0] != (Key{"s", ""}) {
		t.Errorf("Pauses = %v, want the scope's", got)
	}
	if p, ok := rs.Paused("s", "pool", t0); !ok || p.Units != 0 {
		t.Errorf("Paused = %+v, %v; want the scope's pause, of any units", p, ok)
	}
}
