package gateway

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
)

// A Policy is an upstream's tollgate.Policy in the configuration.
type Policy struct {
	// MaxWait bounds the wait for a turn, e.g. "30s"; empty means
	// tollgate.Policy's default, a minute.
	MaxWait string `json:"max_wait"`
	// OnRefusal is "wait" (the default: wait for the turn up to MaxWait)
	// or "fail" (answer 429 at once).
	OnRefusal string `json:"on_refusal"`
	// OnOutage is "closed" (the default: answer 503 while Redis is down)
	// or "open" (send unmetered).
	OnOutage string `json:"on_outage"`
}

// policy returns the tollgate.Policy the configuration gives.
func (p *Policy) policy() (tollgate.Policy, error) {
	var out tollgate.Policy
	if p.MaxWait != "" {
		d, err := time.ParseDuration(p.MaxWait)
		if err != nil || d <= 0 {
			return out, fmt.Errorf("policy max_wait %q: want a positive Go duration, e.g. \"30s\"", p.MaxWait)
		}
		out.MaxWait = d
	}
	switch p.OnRefusal {
	case "", "wait":
	case "fail":
		out.OnRefusal = tollgate.Refuse
	default:
		return out, fmt.Errorf("policy on_refusal %q: want wait or fail", p.OnRefusal)
	}
	switch p.OnOutage {
	case "", "closed":
	case "open":
		out.OnOutage = tollgate.FailOpen
	default:
		return out, fmt.Errorf("policy on_outage %q: want closed or open", p.OnOutage)
	}
	return out, nil
}

// tollgatePolicy returns the upstream's Config.Policy; nil for the defaults.
func (u *Upstream) tollgatePolicy() func(costs.Endpoint) tollgate.Policy {
	if u.Policy == nil {
		return nil
	}
	p, _ := u.Policy.policy() // checked by Load
	return tollgate.Policies(p, nil)
}
