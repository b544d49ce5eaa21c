package quota

import (
	"fmt"
	"math"
)

// Pace spreads a charge's calendar days and fixed windows (whose end is
// known) over their length. At every instant t of a window that starts at
// s and lasts len, what the window holds, counted from its start, is at
// most B + floor((U-B)·(t-s)/len) units, where U is the limit's Units and
// B = floor(Burst·U). The line is cumulative: what was not spent early may
// be spent later. A refused call's RetryAfter is the instant the line
// reaches its units; a hold is dated then, in arrival order. Sliding
// windows and token buckets are decided as without it.
type Pace struct {
	// Burst is the share of the window's limit that may be spent from
	// its start, 0..1, e.g. 0.1.
	Burst float64
}

// validate reports why the pace cannot be used.
func (p *Pace) validate(bucket string) error {
	if p == nil {
		return nil
	}
	if !(p.Burst >= 0 && p.Burst <= 1) {
		return invalid(fmt.Sprintf("pace of bucket %q", bucket), "burst must be between 0 and 1")
	}
	return nil
}

// burstUnits is B of a paced limit of units.
func (p *Pace) burstUnits(units int64) int64 {
	return int64(math.Floor(p.Burst * float64(units)))
}
