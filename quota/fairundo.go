package quota

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// fairUndo returns the script that cancels (settle false) or settles a
// reservation, and appends to keys and args what fairundo.lua needs to
// charge the change to the tenant: deltas gives each charge's change in
// units (0: none).
func (r *Reservation) fairUndo(script *redis.Script, keys []string, args []any, now *time.Time, deltas func(i int) int64) (*redis.Script, []string, []any) {
	var undo *redis.Script
	switch script {
	case cancelScript:
		undo = fairCancelScript
	case settleScript:
		undo = fairSettleScript
	}
	if undo == nil || !hasShares(r.charges) {
		return script, keys, args
	}
	k := 0
	for i, c := range r.charges {
		d := deltas(i)
		if c.Shares == nil || d == 0 {
			continue
		}
		for _, lim := range c.Limits {
			if !lim.Calendar && (!lim.Fixed || lim.Ends.IsZero()) {
				continue // no tenants: shares apply to days and fixed windows
			}
			w := r.lim.window(r.scope, c.Bucket, lim)
			keys = append(keys, tenantsKey(w.meta))
			args = append(args, r.lim.span(w, lim, now), d)
			k++
		}
	}
	if k == 0 {
		return script, keys, args
	}
	return undo, keys, append(args, tenantOf(r.charges), k)
}

// hasShares reports whether a charge has shares.
func hasShares(charges []Demand) bool {
	for _, c := range charges {
		if c.Shares != nil {
			return true
		}
	}
	return false
}
