package quota

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/quota/internal/access"
)

// tenantsKey returns the key of the tenants of a window, beside its meta.
func tenantsKey(meta string) string {
	return strings.TrimSuffix(meta, ":meta") + ":tenants"
}

// tenants reads the tenants of a window with shares (ops.Tenants): what
// each spent in the window holding now, and in later ones, and how many
// of its calls wait in the bucket's room, in one script (tenants.lua).
func (l *Limiter) tenants(ctx context.Context, scope, bucket string, limit Limit, now time.Time) ([]access.Tenant, error) {
	if err := l.check(scope); err != nil {
		return nil, err
	}
	if !limit.Calendar && (!limit.Fixed || limit.Ends.IsZero()) {
		return nil, nil // shares apply to days and fixed windows alone
	}
	w := l.window(scope, bucket, limit)
	key := tenantsKey(w.meta)
	_, clockArg := l.clockArg()
	reply, err := tenantsScript.Run(ctx, l.client, []string{key, l.fairRoomKeys(scope, bucket)[1]}, clockArg).Slice()
	if err != nil {
		return nil, redisError(ctx, "tenants", err)
	}
	v, found, waiters, ok := tenantsReply(reply)
	if !ok {
		return nil, &RedisError{Op: "tenants", Err: errReply(reply)}
	}
	if !found {
		return nil, nil // no shares, or no tenant left in the window
	}
	start := windowStart(limit, now).UnixMicro()
	ts, err := parseTenants(v)
	if err != nil {
		return nil, &formatError{msg: key + " holds " + err.Error() + " of a Redis format this tollgate cannot read"}
	}
	out := make([]access.Tenant, 0, len(ts))
	at := make(map[string]int, len(ts))
	for _, t := range ts {
		a := access.Tenant{Name: t.name, Seen: time.UnixMicro(t.seen)}
		for _, sp := range t.spent {
			switch {
			case sp[0] == start:
				a.Units += sp[1]
			case sp[0] > start:
				a.Held += sp[1]
			}
		}
		at[t.name] = len(out)
		out = append(out, a)
	}
	for _, m := range waiters {
		tenant, ok := waiterTenant(m)
		if !ok {
			continue // not a waiter of this version's naming
		}
		i, seen := at[tenant]
		if !seen {
			i = len(out)
			at[tenant] = i
			out = append(out, access.Tenant{Name: tenant})
		}
		out[i].Waiting++
	}
	slices.SortFunc(out, func(a, b access.Tenant) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// tenantsReply splits tenants.lua's reply: the tenants key's value, and
// whether it has one, and the room's waiters.
func tenantsReply(reply []any) (v string, found bool, waiters []any, ok bool) {
	if len(reply) != 2 {
		return "", false, nil, false
	}
	v, found = reply[0].(string)
	waiters, ok = reply[1].([]any)
	return v, found, waiters, ok && (found || reply[0] == nil)
}

// waiterTenant returns the tenant of a waiter of a bucket's room,
// "<id>:<i|b><tenant>" (fairroom.lua).
func waiterTenant(m any) (string, bool) {
	s, _ := m.(string)
	_, rest, ok := strings.Cut(s, ":")
	if !ok || rest == "" || rest[0] != 'i' && rest[0] != 'b' {
		return "", false
	}
	return rest[1:], true
}

// windowStart returns the start of the calendar day or fixed window
// holding now.
func windowStart(limit Limit, now time.Time) time.Time {
	if limit.Calendar {
		y, m, d := now.In(limit.Location).Date()
		return time.Date(y, m, d, 0, 0, 0, 0, limit.Location)
	}
	end, w := limit.Ends.UnixMicro(), limit.Window.Microseconds()
	t := now.UnixMicro()
	k := (t - end) / w
	if t < end+k*w {
		k--
	}
	return time.UnixMicro(end + k*w)
}

// storedTenant is one tenant of a tenants key (fair.lua's tenants_parse).
type storedTenant struct {
	name  string
	seen  int64
	spent [][2]int64 // window start, units
}

// parseTenants reads a tenants key's value: "T1", then per tenant
// "\n<length>:<name><seen>" and ";<start>:<units>" per window.
func parseTenants(v string) ([]storedTenant, error) {
	rest, ok := strings.CutPrefix(v, "T1")
	if !ok {
		return nil, fmt.Errorf("tenants of an unknown format")
	}
	var out []storedTenant
	for rest != "" {
		head, after, ok := strings.Cut(rest, ":")
		n, err := strconv.Atoi(strings.TrimPrefix(head, "\n"))
		if !ok || !strings.HasPrefix(head, "\n") || err != nil || n < 0 || n > len(after) {
			return nil, fmt.Errorf("a tenant's name")
		}
		t := storedTenant{name: after[:n]}
		rest = after[n:]
		end := strings.IndexByte(rest, '\n')
		if end < 0 {
			end = len(rest)
		}
		fields := strings.Split(rest[:end], ";")
		if t.seen, err = strconv.ParseInt(fields[0], 10, 64); err != nil {
			return nil, fmt.Errorf("a tenant's last request")
		}
		for _, f := range fields[1:] {
			s, u, ok := strings.Cut(f, ":")
			start, err1 := strconv.ParseInt(s, 10, 64)
			units, err2 := strconv.ParseInt(u, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("a tenant's units")
			}
			t.spent = append(t.spent, [2]int64{start, units})
		}
		out = append(out, t)
		rest = rest[end:]
	}
	return out, nil
}
