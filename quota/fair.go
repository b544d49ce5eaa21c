package quota

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota/internal/access"
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

// Shares divides a charge's calendar days and fixed windows (whose end is
// known) among tenants (Demand.Tenant). A tenant's share of a limit of U
// units is U·weight/W, W the sum of the weights of the tenants listed and
// of those not listed that asked within Idle (weighing 1 each); with a
// Pace, the share is paced as the limit is. A tenant that has spent less
// than its share in the window is admitted whenever its call fits in its
// unspent share, whatever the others did, except what Lendable let them
// borrow while it was idle; beyond its share it spends only what the
// other tenants neither hold (their unspent shares, while active) nor
// keep back while idle ((1-Lendable) of their unspent share). A tenant
// not listed has no share before its first request. Sliding windows and
// token buckets are decided as without it.
//
// Among waiters, a tenant below its share goes before one at or above
// it, and a tenant's calls go in arrival order: a waiting call below its
// share takes a hold; one at or above it (or of a tenant with a call
// waiting there already) waits its turn in the bucket's room instead,
// in arrival order across processes, and is admitted now once it is
// first there, fits now and no hold waits (Limiter.Reserve).
type Shares struct {
	// Weights maps a tenant to its weight, e.g. {"eu": 2, "us": 1};
	// tenants not listed weigh 1.
	Weights map[string]float64
	// Lendable is the part, 0..1, of an idle tenant's unspent share that
	// the others may spend. On a window that does not come back (a day),
	// what an idle tenant lends and another spends is gone for it.
	Lendable float64
	// Idle is how long a tenant may go without a request before it
	// counts as idle; 0 means 5 minutes.
	Idle time.Duration
}

// defaultIdle is the Idle of Shares that sets none.
const defaultIdle = 5 * time.Minute

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

// validate reports why the shares cannot be used.
func (s *Shares) validate(bucket string) error {
	if s == nil {
		return nil
	}
	what := fmt.Sprintf("shares of bucket %q", bucket)
	if !(s.Lendable >= 0 && s.Lendable <= 1) {
		return invalid(what, "lendable must be between 0 and 1")
	}
	if s.Idle < 0 {
		return invalid(what, "idle must be at least zero")
	}
	for name, w := range s.Weights {
		if !(w > 0) || math.IsInf(w, 0) {
			return invalid(what, fmt.Sprintf("tenant %q: a weight must be positive and finite", name))
		}
	}
	return nil
}

// idle returns Idle, or its default.
func (s *Shares) idle() time.Duration {
	if s.Idle == 0 {
		return defaultIdle
	}
	return s.Idle
}

// validateFair checks a demand's pace and shares.
func (c Demand) validateFair() error {
	if err := c.Pace.validate(c.Bucket); err != nil {
		return err
	}
	if err := c.Shares.validate(c.Bucket); err != nil {
		return err
	}
	if c.Shares != nil && c.Tenant == "" {
		return invalid(fmt.Sprintf("charge for bucket %q", c.Bucket), "shares need a tenant")
	}
	return nil
}

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

// args appends the shares as the fair scripts read them: Idle (µs),
// Lendable, how many tenants are listed, then each one's name and weight,
// by name.
func (s *Shares) args(args []any) []any {
	names := make([]string, 0, len(s.Weights))
	for name := range s.Weights {
		names = append(names, name)
	}
	slices.Sort(names)
	args = append(args, s.idle().Microseconds(), strconv.FormatFloat(s.Lendable, 'g', -1, 64), len(names))
	for _, name := range names {
		args = append(args, name, strconv.FormatFloat(s.Weights[name], 'g', -1, 64))
	}
	return args
}

// burstUnits is B of a paced limit of units.
func (p *Pace) burstUnits(units int64) int64 {
	return int64(math.Floor(p.Burst * float64(units)))
}

// isFair reports whether a charge has a pace or shares, which the fair
// scripts decide.
func isFair(charges []Demand) bool {
	for _, c := range charges {
		if c.Pace != nil || c.Shares != nil {
			return true
		}
	}
	return false
}

// checkTenants reports charges with shares that name different tenants:
// a decision is one tenant's.
func checkTenants(charges []Demand) error {
	tenant := tenantOf(charges)
	for _, c := range charges {
		if c.Shares != nil && c.Tenant != tenant {
			return invalid("charges", fmt.Sprintf("tenants %q and %q in one decision", tenant, c.Tenant))
		}
	}
	return nil
}

// tenantOf returns the tenant of charges with shares.
func tenantOf(charges []Demand) string {
	for _, c := range charges {
		if c.Shares != nil {
			return c.Tenant
		}
	}
	return ""
}

// tenantsKey returns the key of the tenants of a window, beside its meta.
func tenantsKey(meta string) string {
	return strings.TrimSuffix(meta, ":meta") + ":tenants"
}

// fairRoomKeys are the keys of the waiting room of a bucket with shares
// or a pace (fairroom.lua): queue, alive, counter, who.
func (l *Limiter) fairRoomKeys(scope, bucket string) []string {
	base := l.scopeKey(scope) + keyPart(bucket) + ":fair"
	return []string{base, base + ":alive", base + ":n", base + ":who"}
}

// fairBucket returns the bucket whose room a decision on charges with a
// pace or shares waits in: the first with shares, else the first paced.
func fairBucket(charges []Demand) string {
	for _, c := range charges {
		if c.Shares != nil {
			return c.Bucket
		}
	}
	for _, c := range charges {
		if c.Pace != nil {
			return c.Bucket
		}
	}
	return charges[0].Bucket
}

// fairReserve decides charges with a pace or shares (fairreserve.lua).
// A call that may not hold (a tenant at or above its share, a background
// call) waits its turn in the bucket's room up to maxWait, as a
// background call waits in the scope's (takeTurn).
func (l *Limiter) fairReserve(ctx context.Context, scope string, maxWait int64, charges []Demand) (*Reservation, error) {
	if err := checkTenants(charges); err != nil {
		return nil, err
	}
	keys, args, seq, err := l.decision(scope, maxWait, charges, false)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, c := range charges {
		n += len(c.Limits)
	}
	for i := range n {
		keys = append(keys, tenantsKey(keys[i]))
	}
	room := l.fairRoomKeys(scope, fairBucket(charges))
	keys = append(keys, room...)
	var specs []*Shares
	for _, c := range charges {
		k := 0
		if c.Shares != nil {
			if k = slices.Index(specs, c.Shares) + 1; k == 0 {
				specs = append(specs, c.Shares)
				k = len(specs)
			}
		}
		for _, lim := range c.Limits {
			burst := ""
			if c.Pace != nil {
				burst = strconv.FormatInt(c.Pace.burstUnits(lim.Units), 10)
			}
			args = append(args, burst, k)
		}
	}
	args = append(args, tenantOf(charges), len(specs))
	for _, s := range specs {
		args = s.args(args)
	}
	// The room's: how long a place lasts ('' for a call that never waits
	// there, '0' to decide once), the waiter (fairroom.lua's name), its
	// class.
	wait, class, mark := "", "", ":i"
	if priorityOf(ctx) == Background {
		wait, class, mark = "0", "background", ":b"
	} else if len(specs) > 0 {
		wait = "0"
	}
	if wait != "" && maxWait != 0 {
		wait = strconv.FormatInt(SlotTTL.Microseconds(), 10)
	}
	id := l.entryID(seq) + mark + tenantOf(charges)
	args = append(args, wait, id, class)

	leave := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		out := slices.Clone(args)
		out[len(out)-3] = "leave"
		_, _ = l.write(cctx, fairScript, keys, out...).Result()
	}
	reply, late, err := l.runScript(ctx, fairScript, keys, args)
	if late != nil {
		// The caller gave up while the decision was on its way: give back
		// what it admits, or the place it took in the room, which would
		// keep the others waiting until it expires.
		go func() {
			<-late.done
			r, place, err := l.fairReservation(scope, charges, seq, late.reply)
			switch {
			case err != nil:
			case r.ok:
				_ = r.Cancel(context.Background())
			case place >= 0:
				leave()
			}
		}()
	}
	if err != nil {
		return nil, redisError(ctx, "reserve", err)
	}
	r, place, err := l.fairReservation(scope, charges, seq, reply)
	if err != nil || place < 0 {
		return r, err
	}
	// In the room: wait for the turn there.
	run := func(ctx context.Context) (*Reservation, int64, error) {
		_, args[0] = l.clockArg()
		reply, err := l.write(ctx, fairScript, keys, args...).Result()
		if err != nil {
			return nil, 0, redisError(ctx, "reserve", err)
		}
		return l.fairReservation(scope, charges, seq, reply)
	}
	return l.takeTurn(ctx, room[0], id, maxWait, run, leave)
}

// fairReservation reads fairreserve.lua's reply: reserve.lua's list, then
// the place in the room (-1: not in it).
func (l *Limiter) fairReservation(scope string, charges []Demand, seq uint64, reply any) (*Reservation, int64, error) {
	list, _ := reply.([]any)
	if len(list) < 6 {
		return nil, 0, &RedisError{Op: "reserve", Err: errReply(reply)}
	}
	place, ok := list[len(list)-1].(int64)
	if !ok {
		return nil, 0, &RedisError{Op: "reserve", Err: errReply(reply)}
	}
	r, err := l.reservation(scope, charges, seq, list[:len(list)-1])
	if err == nil && r.ok && r.at > r.now {
		r.decided = time.Now() // a hold: Wait sleeps from here
	}
	return r, place, err
}

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
