package quota

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

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
