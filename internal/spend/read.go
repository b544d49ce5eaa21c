package spend

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/keypart"
	"github.com/tollgate/tollgate/internal/keyscan"
	"github.com/tollgate/tollgate/quota"
)

// Format is the version of the records this package writes and reads.
// Fields a later version adds do not change it (readers skip what they do
// not know); a change a reader of this version would misread does.
const Format = 1

// record is a record as stored: JSON, e.g.
//
//	{"v":1,"at":1764160000000,"ttl":15000,"span":60000,"process":"web-3/4521","scope":"default",
//	 "spent":[{"b":"pool","e":"search.list","c":"php-cron","u":1200}],
//	 "waiting":[{"b":"pool","n":3,"since":1764159990000}],
//	 "refused":[{"b":"pool","e":"search.list","why":"no-room","n":4}]}
//
// Instants are Unix ms, durations ms; e (endpoint) and c (caller) are
// left out when empty.
type record struct {
	V       int            `json:"v"`
	At      int64          `json:"at"`
	TTL     int64          `json:"ttl"`
	Span    int64          `json:"span"`
	Process string         `json:"process"`
	Scope   string         `json:"scope"`
	Spent   []spentEntry   `json:"spent,omitempty"`
	Waiting []waitEntry    `json:"waiting,omitempty"`
	Refused []refusedEntry `json:"refused,omitempty"`
}

type spentEntry struct {
	Bucket   string `json:"b"`
	Endpoint string `json:"e,omitempty"`
	Caller   string `json:"c,omitempty"`
	Units    int64  `json:"u"`
}

type waitEntry struct {
	Bucket string `json:"b"`
	Caller string `json:"c,omitempty"`
	N      int    `json:"n"`
	Since  int64  `json:"since"`
}

type refusedEntry struct {
	Bucket   string `json:"b"`
	Endpoint string `json:"e,omitempty"`
	Caller   string `json:"c,omitempty"`
	Cause    string `json:"why"`
	N        int64  `json:"n"`
}

// sort orders the entries, so that a record's text depends on its
// content alone.
func (x *record) sort() {
	slices.SortFunc(x.Spent, func(a, b spentEntry) int {
		return cmp.Or(strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.Endpoint, b.Endpoint), strings.Compare(a.Caller, b.Caller))
	})
	slices.SortFunc(x.Waiting, func(a, b waitEntry) int {
		return cmp.Or(strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.Caller, b.Caller))
	})
	slices.SortFunc(x.Refused, func(a, b refusedEntry) int {
		return cmp.Or(strings.Compare(a.Bucket, b.Bucket), strings.Compare(a.Endpoint, b.Endpoint),
			strings.Compare(a.Caller, b.Caller), strings.Compare(a.Cause, b.Cause))
	})
}

// A Report is one process's record of one scope.
type Report struct {
	// Process is the writer's name (Options.Process), e.g. "web-3/4521".
	Process string
	// Scope is the scope's name, e.g. "default" or "cred-1f0c...".
	Scope string
	// Format is the record's version. A record of a later version than
	// this package's Format gives a Report of Process, Scope (from its
	// keys: "#" and a hash for a hashed name) and Format alone.
	Format int
	// At is the record's instant, on the writer's clock, in UTC (as
	// every instant of a Report).
	At time.Time
	// Span is how far back from At the counts go, e.g. 1m0s.
	Span time.Duration
	// TTL is how long after At the record's Waiting counts, e.g. 15s;
	// the rest counts for the longer of TTL and Span.
	TTL time.Duration
	// Spent are the units spent in the span, per bucket, endpoint and
	// caller, e.g. {pool search.list php-cron 1200}.
	Spent []Spent
	// Waiting are the requests waiting at At, per bucket and caller.
	Waiting []Waiting
	// Refused are the requests refused in the span, per bucket, endpoint,
	// caller and cause.
	Refused []Refused
}

// Spent is what a process spent of one bucket for one endpoint and caller.
type Spent struct {
	Bucket, Endpoint, Caller string
	Units                    int64
}

// Waiting is what waits of one bucket for one caller.
type Waiting struct {
	Bucket, Caller string
	// Requests is how many wait, e.g. 3.
	Requests int
	// Since is when the oldest of them began to wait, on the writer's
	// clock.
	Since time.Time
}

// Refused counts refusals of one bucket ("" for a pause of the whole
// scope) for one endpoint, caller and cause.
type Refused struct {
	Bucket, Endpoint, Caller string
	Cause                    Cause
	Requests                 int64
}

// Read returns the reports of every process for scope (by its name, or
// by "#" and the hash its keys hold), ordered by process, read at now: a
// record whose span has passed by now is left out, and the waiting
// requests of one past its TTL (its writer stopped, or went idle). prefix "" means quota.DefaultPrefix.
// It returns none, and no error, when there are none.
func Read(ctx context.Context, client redis.UniversalClient, prefix, scope string, now time.Time) ([]Report, error) {
	prefix = cmp.Or(prefix, quota.DefaultPrefix)
	part := keypart.Of(scope)
	if strings.HasPrefix(scope, "#") {
		part = scope
	}
	return read(ctx, client, prefix, []string{part}, now)
}

// ReadAll returns the live reports of every process for every scope under
// prefix, found with SCAN on every node (every master of a cluster, every
// shard of a ring), ordered by scope then process.
func ReadAll(ctx context.Context, client redis.UniversalClient, prefix string, now time.Time) ([]Report, error) {
	prefix = cmp.Or(prefix, quota.DefaultPrefix)
	match := keyscan.Glob(prefix) + "{*}:spenders"
	keys, err := keyscan.All(ctx, client, match)
	if err != nil {
		return nil, fmt.Errorf("spend: scanning: %w", err)
	}
	var parts []string
	for _, k := range keys {
		if p, ok := strings.CutPrefix(k, prefix+"{"); ok {
			if p, ok := strings.CutSuffix(p, "}:spenders"); ok && p != "" && !strings.Contains(p, "}") {
				parts = append(parts, p)
			}
		}
	}
	slices.Sort(parts)
	return read(ctx, client, prefix, slices.Compact(parts), now)
}

// read reads the scopes whose key parts are given: their sorted sets in
// one pipeline, then their records, one MGET per scope, in another.
func read(ctx context.Context, client redis.UniversalClient, prefix string, parts []string, now time.Time) ([]Report, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	members := make([]*redis.StringSliceCmd, len(parts))
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, part := range parts {
			members[i] = p.ZRange(ctx, indexKey(prefix, part), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("spend: reading: %w", err)
	}
	values := make([]*redis.SliceCmd, len(parts))
	_, err = client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, part := range parts {
			ms := members[i].Val()
			if len(ms) == 0 {
				continue
			}
			keys := make([]string, len(ms))
			for j, m := range ms {
				keys[j] = recordKey(prefix, part, m)
			}
			values[i] = p.MGet(ctx, keys...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("spend: reading: %w", err)
	}
	var out []Report
	for i, part := range parts {
		if values[i] == nil {
			continue
		}
		for j, v := range values[i].Val() {
			s, ok := v.(string)
			if !ok {
				continue // gone since the sorted set was read
			}
			rep, err := parse(s, part, members[i].Val()[j])
			if err != nil {
				return nil, err
			}
			if rep.Format == Format && !now.Before(rep.At.Add(max(rep.TTL, rep.Span))) {
				continue // its counts have left the span
			}
			if rep.Format == Format && !now.Before(rep.At.Add(rep.TTL)) {
				rep.Waiting = nil // the writer stopped: nothing of it waits
			}
			out = append(out, rep)
		}
	}
	slices.SortFunc(out, func(a, b Report) int {
		return cmp.Or(strings.Compare(a.Scope, b.Scope), strings.Compare(a.Process, b.Process))
	})
	return out, nil
}

// errRecord is a record this package cannot read.
var errRecord = errors.New("spend: a record unreadable")

// parse reads one record of the scope whose key part is part, written by
// the process member.
func parse(s, part, member string) (Report, error) {
	var head struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal([]byte(s), &head); err != nil || head.V < 1 {
		return Report{}, fmt.Errorf("%w: %s's of %s", errRecord, member, part)
	}
	if head.V > Format {
		var id struct {
			Process string `json:"process"`
			Scope   string `json:"scope"`
		}
		_ = json.Unmarshal([]byte(s), &id)
		return Report{Process: cmp.Or(id.Process, member), Scope: cmp.Or(id.Scope, part), Format: head.V}, nil
	}
	var x record
	if err := json.Unmarshal([]byte(s), &x); err != nil || x.At <= 0 || x.TTL <= 0 || x.Span <= 0 {
		return Report{}, fmt.Errorf("%w: %s's of %s", errRecord, member, part)
	}
	rep := Report{
		Process: x.Process, Scope: x.Scope, Format: x.V,
		At: time.UnixMilli(x.At).UTC(), Span: time.Duration(x.Span) * time.Millisecond, TTL: time.Duration(x.TTL) * time.Millisecond,
	}
	for _, e := range x.Spent {
		rep.Spent = append(rep.Spent, Spent{e.Bucket, e.Endpoint, e.Caller, e.Units})
	}
	for _, e := range x.Waiting {
		rep.Waiting = append(rep.Waiting, Waiting{e.Bucket, e.Caller, e.N, time.UnixMilli(e.Since).UTC()})
	}
	for _, e := range x.Refused {
		rep.Refused = append(rep.Refused, Refused{e.Bucket, e.Endpoint, e.Caller, Cause(e.Cause), e.N})
	}
	return rep, nil
}

// A Summary is what the reports say of one bucket of one scope; the
// bucket "" holds the refusals by pauses of the whole scope.
type Summary struct {
	Scope, Bucket string
	// Units are the units spent over the reports' spans, e.g. 5400.
	Units int64
	// Spenders are who spent them, per process and caller, most first.
	Spenders []Spender
	// Endpoints are what they were spent on, most first.
	Endpoints []Endpoint
	// Waiting is how many requests wait, over the processes.
	Waiting int
	// Since is when the oldest of them began to wait; zero when none
	// waits.
	Since time.Time
	// Refused counts the refusals of the spans by cause, e.g.
	// {"no-room": 4}; nil when none.
	Refused map[Cause]int64
}

// A Spender is one process's spending (for one caller, "" for none
// named) of a bucket.
type Spender struct {
	Process, Caller string
	Units           int64
}

// An Endpoint is what was spent of a bucket on one endpoint.
type Endpoint struct {
	Endpoint string
	Units    int64
}

// Summarize sums reports per scope and bucket, ordered by scope then
// bucket: the top spenders, the waiting requests and the oldest wait, the
// refusals by cause. Reports of a later format count for nothing.
func Summarize(reports []Report) []Summary {
	type key struct{ scope, bucket string }
	type acc struct {
		s         Summary
		spenders  map[[2]string]int64
		endpoints map[string]int64
	}
	all := map[key]*acc{}
	get := func(scope, bucket string) *acc {
		a := all[key{scope, bucket}]
		if a == nil {
			a = &acc{s: Summary{Scope: scope, Bucket: bucket}, spenders: map[[2]string]int64{}, endpoints: map[string]int64{}}
			all[key{scope, bucket}] = a
		}
		return a
	}
	for _, rep := range reports {
		for _, e := range rep.Spent {
			a := get(rep.Scope, e.Bucket)
			a.s.Units += e.Units
			a.spenders[[2]string{rep.Process, e.Caller}] += e.Units
			a.endpoints[e.Endpoint] += e.Units
		}
		for _, e := range rep.Waiting {
			a := get(rep.Scope, e.Bucket)
			a.s.Waiting += e.Requests
			if e.Requests > 0 && (a.s.Since.IsZero() || e.Since.Before(a.s.Since)) {
				a.s.Since = e.Since
			}
		}
		for _, e := range rep.Refused {
			a := get(rep.Scope, e.Bucket)
			if a.s.Refused == nil {
				a.s.Refused = map[Cause]int64{}
			}
			a.s.Refused[e.Cause] += e.Requests
		}
	}
	out := make([]Summary, 0, len(all))
	for _, a := range all {
		for who, n := range a.spenders {
			a.s.Spenders = append(a.s.Spenders, Spender{who[0], who[1], n})
		}
		slices.SortFunc(a.s.Spenders, func(x, y Spender) int {
			return cmp.Or(cmp.Compare(y.Units, x.Units), strings.Compare(x.Process, y.Process), strings.Compare(x.Caller, y.Caller))
		})
		for e, n := range a.endpoints {
			a.s.Endpoints = append(a.s.Endpoints, Endpoint{e, n})
		}
		slices.SortFunc(a.s.Endpoints, func(x, y Endpoint) int {
			return cmp.Or(cmp.Compare(y.Units, x.Units), strings.Compare(x.Endpoint, y.Endpoint))
		})
		out = append(out, a.s)
	}
	slices.SortFunc(out, func(x, y Summary) int {
		return cmp.Or(strings.Compare(x.Scope, y.Scope), strings.Compare(x.Bucket, y.Bucket))
	})
	return out
}
