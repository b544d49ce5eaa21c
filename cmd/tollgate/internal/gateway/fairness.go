package gateway

import (
	"fmt"

	"github.com/tollgate/tollgate"
)

// A SharesConfig is an upstream's tollgate.Shares.
type SharesConfig struct {
	// Weights maps a caller to its weight, e.g. {"php-cron": 2};
	// callers not listed weigh 1.
	Weights map[string]float64 `json:"weights"`
	// Lendable is the part, 0..1, of an idle caller's unspent share the
	// others may spend.
	Lendable float64 `json:"lendable"`
	// Idle is how long a caller may go without a request before it is
	// idle, a Go duration, e.g. "10m"; empty means 5 minutes.
	Idle string `json:"idle"`
}

// A PaceConfig is an upstream's tollgate.Pace.
type PaceConfig struct {
	// Burst is the share of a day that may be spent from its start, 0..1.
	Burst float64 `json:"burst"`
}

// fairness returns the upstream's shares and pace, checked; nil when
// absent.
func (u *Upstream) fairness() (*tollgate.Shares, *tollgate.Pace, error) {
	var shares *tollgate.Shares
	var pace *tollgate.Pace
	if s := u.Shares; s != nil {
		idle, err := duration("idle", s.Idle)
		if err != nil {
			return nil, nil, fmt.Errorf("shares: %v", err)
		}
		if !(s.Lendable >= 0 && s.Lendable <= 1) {
			return nil, nil, fmt.Errorf("shares: lendable %v: want 0 to 1", s.Lendable)
		}
		for caller, w := range s.Weights {
			if !(w > 0 && w <= 1e6) {
				return nil, nil, fmt.Errorf("shares: the weight of %q, %v: want a positive number", caller, w)
			}
		}
		shares = &tollgate.Shares{Weights: s.Weights, Lendable: s.Lendable, Idle: idle}
	}
	if p := u.Pace; p != nil {
		if !(p.Burst >= 0 && p.Burst <= 1) {
			return nil, nil, fmt.Errorf("pace: burst %v: want 0 to 1", p.Burst)
		}
		pace = &tollgate.Pace{Burst: p.Burst}
	}
	if (shares != nil || pace != nil) && u.Provider != "youtube" && u.Provider != "custom" {
		return nil, nil, fmt.Errorf("shares and pace are for the youtube and custom providers, not %q", u.Provider)
	}
	return shares, pace, nil
}
