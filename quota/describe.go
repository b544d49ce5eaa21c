package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// Descriptions. The windows' keys say what is spent, not what may be: a
// log and a meta do not know their limit. A process that decides on a
// bucket may leave a Description of it in Redis, so that a tool reading
// Redis without the program's configuration (cmd/tollgate status) can tell
// used from limit. A Description holds names and numbers only: nothing
// secret, by the same rule that keeps credentials out of scope names.

// A Description says how one bucket of a scope is limited, for tools that
// read Redis without the program's configuration.
type Description struct {
	// Scope and Bucket name the bucket, e.g. "project-a" and "pool".
	Scope, Bucket string
	// Limits are the limits decisions on the bucket use, e.g.
	// 9500/day@America/Los_Angeles. When Announced is set, the first may
	// have 0 units: not known until the upstream announces it.
	Limits []Limit
	// Quotas are the upstream's units behind each of Limits before a
	// reserve was kept below them, e.g. 10000 for a limit of 9500; empty
	// when not told.
	Quotas []int64
	// InFlight is the bucket's cap on calls in flight (see TakeSlot), e.g.
	// 100; 0 for none.
	InFlight int
	// Announced names the upstream announcement the first limit follows
	// (see Announce), e.g. "github/core"; empty when none. The first
	// limit's units are then the newest announced limit less the reserve
	// (ReserveUnits, and ReservePercent of it rounded up), its window the
	// announced window lengthened by Transit, and a fixed window ends at
	// the announced reset: see Enforced.
	Announced string
	// ReserveUnits is kept below every limit, e.g. 500.
	ReserveUnits int64
	// ReservePercent is kept below every limit as a share of it, e.g. 5.
	ReservePercent float64
	// Transit is what sliding and fixed windows were lengthened by, e.g.
	// 50ms.
	Transit time.Duration
	// Pace and Shares are the bucket's (Demand.Pace, Demand.Shares); nil
	// when it has none.
	Pace   *Pace
	Shares *Shares
}

// describedFor is how long a description outlives its last writing, at
// least: writers rewrite theirs more often than that.
const describedFor = time.Hour

// Describe writes descriptions of buckets, each kept for an hour, or for
// twice its longest window when that is longer, after which a bucket no
// process describes again vanishes from them. Several are written in one
// round trip.
func (l *Limiter) Describe(ctx context.Context, ds ...Description) error {
	if len(ds) == 0 {
		return nil
	}
	type entry struct {
		key string
		val []byte
		ttl time.Duration
	}
	entries := make([]entry, 0, len(ds))
	for _, d := range ds {
		if err := d.validate(); err != nil {
			return err
		}
		val, err := json.Marshal(d.stored())
		if err != nil {
			return invalid("description of bucket "+d.Bucket, err.Error())
		}
		entries = append(entries, entry{l.descriptionKey(d.Scope, d.Bucket), val, d.lifetime()})
	}
	_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range entries {
			p.Set(ctx, e.key, e.val, e.ttl)
		}
		return nil
	})
	if err != nil {
		return redisError(ctx, "describe", err)
	}
	return nil
}

// description is ops.Operator.Description: it reads the description of
// bucket in scope, and false when there is none.
func (l *Limiter) description(ctx context.Context, scope, bucket string) (Description, bool, error) {
	if err := l.check(scope); err != nil {
		return Description{}, false, err
	}
	key := l.descriptionKey(scope, bucket)
	v, err := l.client.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return Description{}, false, nil
	}
	if err != nil {
		return Description{}, false, redisError(ctx, "describe", err)
	}
	d, err := readDescription(key, v)
	if err != nil {
		return Description{}, false, err
	}
	return d, true, nil
}

// Enforced returns the limits decisions use given the bucket's newest
// announcement (as LastAnnouncement reads it; ok false when there is
// none): Limits, with the first one as the announcement makes it when
// Announced is set. A first limit still unknown (0 units, nothing
// announced) is left out.
func (d Description) Enforced(a Announced, ok bool) []Limit {
	limits := append([]Limit(nil), d.Limits...)
	if d.Announced == "" || len(limits) == 0 {
		return limits
	}
	first := &limits[0]
	if ok && a.Limit > 0 {
		keep := d.ReserveUnits + int64(math.Ceil(float64(a.Limit)*d.ReservePercent/100))
		first.Units = max(a.Limit-keep, 1)
	}
	if ok && a.Window > 0 && !first.Calendar && !first.refilling() {
		first.Window = a.Window + d.Transit
	}
	if first.refilling() && first.Units > 0 {
		first.Refill = first.Units // a learned bucket refills its capacity a period
	}
	if ok && first.Fixed {
		first.Ends = a.Reset
	}
	if first.Units == 0 {
		return limits[1:]
	}
	return limits
}

// validate reports why the description cannot be written.
func (d Description) validate() error {
	if d.Scope == "" {
		return invalid("description", "empty scope name")
	}
	if len(d.Limits) == 0 {
		return invalid("description of bucket "+d.Bucket, "no limits")
	}
	if len(d.Quotas) != 0 && len(d.Quotas) != len(d.Limits) {
		return invalid("description of bucket "+d.Bucket, "one quota per limit, or none")
	}
	if d.InFlight < 0 || d.ReserveUnits < 0 || d.ReservePercent < 0 || d.ReservePercent >= 100 || math.IsNaN(d.ReservePercent) {
		return invalid("description of bucket "+d.Bucket, "caps and reserves must be at least zero, a reserve under 100%")
	}
	for i, lim := range d.Limits {
		if i == 0 && d.Announced != "" && lim.Units == 0 {
			lim.Units = 1 // to be learned from the announcements
		}
		if err := lim.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// lifetime is how long the description is kept.
func (d Description) lifetime() time.Duration {
	longest := time.Duration(0)
	for _, lim := range d.Limits {
		w := lim.Window
		if lim.Calendar {
			w = 25 * time.Hour // the longest day
		}
		longest = max(longest, w)
	}
	return max(describedFor, 2*longest)
}

// descriptionKey is where a bucket's description is kept.
func (l *Limiter) descriptionKey(scope, bucket string) string {
	return l.scopeKey(scope) + keyPart(bucket) + ":about"
}

// The stored form of a Description: JSON, instants and windows in µs,
// read strictly (see readDescription).
type storedDescription struct {
	Version        int               `json:"v"`
	Scope          string            `json:"scope"`
	Bucket         string            `json:"bucket"`
	Limits         []storedLimit     `json:"limits"`
	Quotas         []int64           `json:"quotas,omitempty"`
	InFlight       int               `json:"in_flight,omitempty"`
	Announced      string            `json:"announced,omitempty"`
	ReserveUnits   int64             `json:"reserve_units,omitempty"`
	ReservePercent float64           `json:"reserve_percent,omitempty"`
	Transit        int64             `json:"transit_us,omitempty"`
	Refilling      []storedRefilling `json:"refilling,omitempty"`
	// Written by versions that know pace and shares; earlier readers
	// ignore them, as JSON fields they do not know.
	Pace   *storedPace   `json:"pace,omitempty"`
	Shares *storedShares `json:"shares,omitempty"`
}

type storedPace struct {
	Burst float64 `json:"burst"`
}

type storedShares struct {
	Weights  map[string]float64 `json:"weights,omitempty"`
	Lendable float64            `json:"lendable,omitempty"`
	Idle     int64              `json:"idle_us,omitempty"`
}

type storedLimit struct {
	Units  int64  `json:"units"`
	Window int64  `json:"window_us,omitempty"`
	Zone   string `json:"zone,omitempty"` // a calendar day's
	Fixed  bool   `json:"fixed,omitempty"`
	Ends   int64  `json:"ends_us,omitempty"`
	Name   string `json:"name,omitempty"`
}

// A token bucket of a description, stored apart from the windows (in
// "refilling"), so that a reader of an earlier version, which knows no
// such field, skips it rather than reading it as a window. At is its
// place among Limits; Quota its quota (0: not told).
type storedRefilling struct {
	At     int    `json:"at"`
	Units  int64  `json:"units"`
	Window int64  `json:"window_us"`
	Refill int64  `json:"refill"`
	Name   string `json:"name,omitempty"`
	Quota  int64  `json:"quota,omitempty"`
}

// descriptionVersion numbers the stored form; a reader refuses others. A
// description whose token buckets a reader of version 1 could not skip
// (every limit a bucket, or the announced first one) is stored as version
// 2, which such a reader refuses.
const descriptionVersion = 1

// descriptionBuckets is the version of a description with token buckets
// that a reader of version 1 could not skip.
const descriptionBuckets = 2

func (d Description) stored() storedDescription {
	s := storedDescription{
		Version: descriptionVersion, Scope: d.Scope, Bucket: d.Bucket, Quotas: d.Quotas, InFlight: d.InFlight,
		Announced: d.Announced, ReserveUnits: d.ReserveUnits, ReservePercent: d.ReservePercent, Transit: d.Transit.Microseconds(),
	}
	if d.Pace != nil {
		s.Pace = &storedPace{Burst: d.Pace.Burst}
	}
	if d.Shares != nil {
		s.Shares = &storedShares{Weights: d.Shares.Weights, Lendable: d.Shares.Lendable, Idle: d.Shares.Idle.Microseconds()}
	}
	var quotas []int64
	for i, lim := range d.Limits {
		if lim.refilling() {
			sr := storedRefilling{At: i, Units: lim.Units, Window: lim.Window.Microseconds(), Refill: lim.Refill, Name: lim.Name}
			if i < len(d.Quotas) {
				sr.Quota = d.Quotas[i]
			}
			s.Refilling = append(s.Refilling, sr)
			continue
		}
		sl := storedLimit{Units: lim.Units, Window: lim.Window.Microseconds(), Fixed: lim.Fixed, Name: lim.Name}
		if lim.Calendar {
			sl.Zone = lim.Location.String()
		}
		if !lim.Ends.IsZero() {
			sl.Ends = lim.Ends.UnixMicro()
		}
		s.Limits = append(s.Limits, sl)
		if i < len(d.Quotas) {
			quotas = append(quotas, d.Quotas[i])
		}
	}
	if len(s.Refilling) > 0 {
		s.Quotas = quotas // the windows' alone, as a reader of version 1 pairs them
		if len(s.Limits) == 0 || (d.Announced != "" && s.Refilling[0].At == 0) {
			s.Version = descriptionBuckets
		}
	}
	return s
}

// readDescription reads what key holds, strictly: a description of
// another version, or one that does not describe valid limits, is an
// error matching ErrFormat.
func readDescription(key string, v []byte) (Description, error) {
	bad := func(why string) error {
		return &formatError{msg: fmt.Sprintf("%s holds a description this tollgate cannot read: %s", key, why)}
	}
	var s storedDescription
	if err := json.Unmarshal(v, &s); err != nil {
		return Description{}, bad(err.Error())
	}
	if s.Version != descriptionVersion && s.Version != descriptionBuckets {
		return Description{}, bad(fmt.Sprintf("version %d, not %d or %d", s.Version, descriptionVersion, descriptionBuckets))
	}
	d := Description{
		Scope: s.Scope, Bucket: s.Bucket, Quotas: s.Quotas, InFlight: s.InFlight, Announced: s.Announced,
		ReserveUnits: s.ReserveUnits, ReservePercent: s.ReservePercent, Transit: time.Duration(s.Transit) * time.Microsecond,
	}
	if s.Pace != nil {
		d.Pace = &Pace{Burst: s.Pace.Burst}
	}
	if s.Shares != nil {
		d.Shares = &Shares{Weights: s.Shares.Weights, Lendable: s.Shares.Lendable, Idle: time.Duration(s.Shares.Idle) * time.Microsecond}
	}
	for _, sl := range s.Limits {
		lim := Limit{Units: sl.Units, Window: time.Duration(sl.Window) * time.Microsecond, Fixed: sl.Fixed, Name: sl.Name}
		if sl.Zone != "" {
			loc, err := time.LoadLocation(sl.Zone)
			if err != nil {
				return Description{}, bad(err.Error())
			}
			lim.Calendar, lim.Location = true, loc
		}
		if sl.Ends != 0 {
			lim.Ends = time.UnixMicro(sl.Ends)
		}
		d.Limits = append(d.Limits, lim)
	}
	if len(s.Refilling) > 0 {
		// The token buckets back in their places, the quotas with them.
		if len(s.Quotas) > 0 && len(s.Quotas) != len(d.Limits) {
			return Description{}, bad("one quota per window, or none")
		}
		all := make([]Limit, 0, len(d.Limits)+len(s.Refilling))
		var quotas []int64
		w := 0
		for _, sr := range s.Refilling {
			if sr.At < len(all) || sr.At > len(all)+len(d.Limits)-w {
				return Description{}, bad(fmt.Sprintf("a token bucket at %d", sr.At))
			}
			for len(all) < sr.At {
				all = append(all, d.Limits[w])
				if len(s.Quotas) > 0 {
					quotas = append(quotas, s.Quotas[w])
				}
				w++
			}
			all = append(all, Limit{Units: sr.Units, Window: time.Duration(sr.Window) * time.Microsecond, Refill: sr.Refill, Name: sr.Name})
			quotas = append(quotas, sr.Quota)
		}
		for ; w < len(d.Limits); w++ {
			all = append(all, d.Limits[w])
			if len(s.Quotas) > 0 {
				quotas = append(quotas, s.Quotas[w])
			}
		}
		d.Limits = all
		d.Quotas = nil
		for _, q := range quotas {
			if q != 0 {
				d.Quotas = quotas
				break
			}
		}
	}
	if err := d.validate(); err != nil {
		return Description{}, bad(err.Error())
	}
	return d, nil
}
