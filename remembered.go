package tollgate

import (
	"context"

	"github.com/tollgate/tollgate/internal/remember"
)

// memory is the stage of what this process remembers (internal/remember):
// refusals Redis decided that hold for a while, and pauses it was told
// (notices.go) or an upstream's answer set (response.go). It refuses, with
// no round trip, free requests during a pause they know of (free), and
// requests whose policy fails fast while a refusal holds (refusal).
type memory struct {
	refusals *remember.Refusals
	redis    *decider
}

// free lets a free request through without asking Redis: it spends
// nothing. It honours the pauses this process knows of (an upstream that
// said stop means stop), unless it continues a session already paid for,
// which stopping would waste. A free request that charges a capped bucket
// goes on, to take its slots.
func (m *memory) free(_ context.Context, r *request) (bool, error) {
	if !r.endpoint.Free {
		return false, nil
	}
	r.decide(admitFree, nil)
	if !r.endpoint.Continues {
		if qe := m.check(r); qe != nil && qe.Cause.Paused() {
			r.kind = remembered
			return true, qe
		}
	}
	return !m.redis.capped(r), nil
}

// refusal refuses at once, under the Refuse policy, an interactive
// request a refusal this process remembers holds for; under Shadow, one a
// remembered pause holds for.
func (m *memory) refusal(_ context.Context, r *request) (bool, error) {
	if (r.policy.OnRefusal != Refuse && r.policy.OnRefusal != Shadow) || r.background {
		return false, nil
	}
	if qe := m.check(r); qe != nil && (r.policy.OnRefusal == Refuse || qe.Cause.Paused()) {
		r.decide(remembered, m.redis)
		return true, qe
	}
	return false, nil
}

// check returns the refusal remembered for the request at its instant, or
// nil.
func (m *memory) check(r *request) *QuotaError {
	bucket, ref, ok := m.refusals.Check(r.scope, r.endpoint, r.now)
	if !ok {
		return nil
	}
	return r.refused(r.scope, bucket, Cause(ref.Cause), ref.Until.Sub(r.now), ref.Reason)
}
