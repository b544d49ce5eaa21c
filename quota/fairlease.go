package quota

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// fairLease returns the script that takes or ends a lease on a bucket
// with a pace or shares (fairlease.lua, wrapping lease.lua), and appends
// to lease.lua's keys and args what it needs: the tenants key per window,
// the tenant, the shares, and per window the pace's burst and whether it
// keeps shares. Other leases keep leaseScript.
func (l *Limiter) fairLease(c Demand, keys []string, args []any) (*redis.Script, []string, []any) {
	if c.Pace == nil && c.Shares == nil {
		return leaseScript, keys, args
	}
	for i := range c.Limits {
		keys = append(keys, tenantsKey(keys[i]))
	}
	fa := []any{c.Tenant}
	if c.Shares != nil {
		fa = c.Shares.args(fa)
	} else {
		fa = append(fa, 0, 0, 0)
	}
	for _, lim := range c.Limits {
		burst, shares := "", 0
		if c.Pace != nil {
			burst = strconv.FormatInt(c.Pace.burstUnits(lim.Units), 10)
		}
		if c.Shares != nil {
			shares = 1
		}
		fa = append(fa, burst, shares)
	}
	return fairLeaseScript, keys, append(append(args, fa...), len(fa))
}
