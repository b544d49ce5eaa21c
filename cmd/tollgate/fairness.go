package main

import (
	"math"
	"math/big"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// paceLine returns what a paced calendar day or fixed window may have
// spent by now (quota.Pace): B + floor((L-B)·elapsed/length); else the
// limit and false.
func paceLine(l quota.Limit, p *quota.Pace, now time.Time) (int64, bool) {
	var start, end time.Time
	switch {
	case l.Calendar:
		y, m, d := now.In(l.Location).Date()
		start, end = time.Date(y, m, d, 0, 0, 0, 0, l.Location), time.Date(y, m, d+1, 0, 0, 0, 0, l.Location)
	case l.Fixed && !l.Ends.IsZero() && l.Window > 0:
		k := now.Sub(l.Ends) / l.Window
		start = l.Ends.Add(k * l.Window)
		if start.After(now) {
			start = start.Add(-l.Window)
		}
		end = start.Add(l.Window)
	default:
		return l.Units, false
	}
	if p == nil {
		return l.Units, false
	}
	b := int64(math.Floor(p.Burst * float64(l.Units)))
	q := new(big.Int).Mul(big.NewInt(l.Units-b), big.NewInt(now.Sub(start).Microseconds()))
	q.Quo(q, big.NewInt(end.Sub(start).Microseconds()))
	return b + q.Int64(), true
}

// shareOf fills in each tenant's share of a window that allows allowed
// units by now: allowed·weight/W, W the weights of the tenants listed and
// of those not listed seen within Idle (quota.Shares).
func shareOf(ts []tenantReport, s *quota.Shares, allowed int64, now time.Time) {
	if s == nil {
		return
	}
	idle := s.Idle
	if idle == 0 {
		idle = 5 * time.Minute
	}
	var sum float64
	for _, w := range s.Weights {
		sum += w
	}
	for _, t := range ts {
		if _, listed := s.Weights[t.Name]; !listed && t.Seen.After(now.Add(-idle)) {
			sum++
		}
	}
	for i, t := range ts {
		w, listed := s.Weights[t.Name]
		if !listed {
			w = 1
		}
		if sum > 0 {
			ts[i].Share = float64(allowed) * w / sum
		}
	}
}
