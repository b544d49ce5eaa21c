package tollgate

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/announce"
	"github.com/tollgate/tollgate/internal/learn"
	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/internal/remember"
	"github.com/tollgate/tollgate/internal/told"
	"github.com/tollgate/tollgate/quota"
)

// Quotas the upstream announces (Bucket.Follows). Every response's
// headers are read (package announce) for the buckets tied to them, and
// so is what a provider's Base read of the response where package
// announce does not (internal/told: Shopify's answers). When
// the upstream counts more used than tollgate does, the difference (spent
// by programs that share the credential without tollgate) is counted as
// spent until the announced reset, in Redis, for every process; when it
// counts less, nothing is given back. An announced limit, and window when
// stated, replace the bucket's first limit's, so that a bucket learns its
// limit; one whose limit is not known yet (0 units) lets one request at a
// time through per scope until the first announcement. An announcement
// that says nothing is left pauses the bucket until its reset. The common
// case, an announcement that agrees with tollgate's count, costs no round
// trip; one that does not costs one.

// learnedName names the window of a bucket's first limit in Redis keys, so
// that an announced window can change without stranding what was counted.
const learnedName = "announced"

// A Reconciliation reports what an upstream's announcement changed in the
// shared count: never a credential; Scope is a pool's name or a hash.
type Reconciliation struct {
	// Scope and Bucket are the bucket announced, e.g. "project-a", "core".
	Scope, Bucket string
	// Announced is what the response said, e.g. 4700 of 5000 remaining
	// until 12:00.
	Announced announce.Quota
	// Outside is the units now counted as spent by others (beyond
	// tollgate's own count) until the announced reset; 0 when the
	// upstream agrees.
	Outside int64
	// Learned reports that the announcement changed the bucket's limit,
	// window or reset as this process knew them.
	Learned bool
	// Paused reports that nothing was left: the bucket pauses until the
	// reset, for every process.
	Paused bool
}

// announcements is the first reader of a response: it reads what the
// response announces of the Transport's announced buckets, in the scope
// the request spent, and holds the shared count to it; then the gates of
// the buckets still learning their limit are given back: what they waited
// to learn is known.
type announcements struct {
	limits   *limits
	redis    *decider
	refusals *remember.Refusals
	holds    *learn.Holds
	gates    *gates
	hooks    *hooks
}

// read reconciles, at the response's instant, and passes the response on.
func (a *announcements) read(ctx context.Context, r *request, resp *http.Response) (*http.Response, error) {
	a.reconcile(ctx, r, resp.Header)
	a.gates.release(ctx, r, heldGates)
	return resp, nil
}

// reconcile holds the announced buckets to what header announces.
func (a *announcements) reconcile(ctx context.Context, r *request, header http.Header) {
	if len(a.limits.announced) == 0 || r.kind == unmetered {
		return
	}
	// The headers' quotas, then those a provider's Base read where package
	// announce does not (internal/told: Shopify's, in the body).
	qs := append(announce.Read(header, r.now), told.Of(r.req.Context())...)
	if len(qs) == 0 {
		return
	}
	d := r.by
	if d == nil {
		d = a.redis
	}
	scope := r.spending()
	for bucket, name := range a.limits.announced {
		for _, q := range qs {
			if matches(name, q) {
				a.reconcileOne(ctx, d, r.res, scope, bucket, q, r.now)
				break
			}
		}
	}
}

// matches reports whether an announced quota is the one a bucket names:
// by its name, or "dialect/name".
func matches(name string, q announce.Quota) bool {
	if dialect, n, ok := strings.Cut(name, "/"); ok {
		return q.Dialect == dialect && q.Name == n
	}
	return q.Name == name
}

// reconcileOne holds one bucket to one announcement, read in the response
// to the call r admitted (nil: one that charged the bucket nothing, such
// as the first while its limit is learned).
func (a *announcements) reconcileOne(ctx context.Context, d *decider, r *quota.Reservation, scope, bucket string, q announce.Quota, now time.Time) {
	k := learn.Key{Scope: scope, Bucket: bucket}
	prev := a.limits.learned.Get(k)
	tol := quotapath.ResetTolerance(a.limits.windowOf(bucket, prev, q.Window))
	if !q.Reset.IsZero() && prev.Reset.Sub(q.Reset) >= tol {
		return // an older response than one already read
	}
	next := a.limits.learned.Update(k, func(l *learn.Learned) {
		if q.Limit > 0 {
			l.Limit = q.Limit
		}
		if q.Window > 0 {
			l.Window = q.Window
		}
		l.Read(q.Reset, tol)
	})
	defer func() {
		if a.limits.learned.Get(k).Gen != prev.Gen {
			a.holds.Redecide(ctx, k)
		}
	}()
	rec := Reconciliation{Scope: scope, Bucket: bucket, Announced: q,
		Learned: next.Limit != prev.Limit || next.Window != prev.Window || next.Reset.Sub(prev.Reset) >= tol}

	used := q.Used
	if used < 0 && q.Limit >= 0 && q.Remaining >= 0 {
		used = max(q.Limit-q.Remaining, 0)
	}
	// The count agrees when the upstream leaves at least the room tollgate
	// counted when it admitted the call (plus the reserve it keeps below
	// the upstream's limit): the upstream counts no more than tollgate did.
	room := int64(-1)
	var asOf time.Time
	if r != nil {
		room, asOf = r.RemainingOf(bucket), r.Time()
	}
	agrees := q.Remaining >= 0 && room >= 0 && q.Remaining >= room+a.limits.buckets[bucket].keep(max(q.Limit, 0))
	if !q.Reset.IsZero() && q.Reset.After(now) && used >= 0 && (!agrees || rec.Learned) {
		limits, _ := a.limits.of(d, scope, bucket, false)
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		got, err := d.lim.Announce(pctx, scope, bucket, quota.Announcement{
			Used: used, Reset: q.Reset, Limit: max(q.Limit, 0), Window: q.Window, AsOf: asOf}, limits...)
		cancel()
		if err != nil {
			a.hooks.log(ctx, slog.LevelWarn, "tollgate: could not record what the upstream announced",
				slog.String("scope", scope), slog.String("bucket", bucket), slog.Any("err", err))
		} else {
			// Every process then holds the bucket to the same readings.
			a.limits.learned.Update(k, func(l *learn.Learned) { l.Adopt(got, tol) })
			if got.Changed {
				rec.Outside = got.Outside
			}
		}
	}
	if q.Remaining == 0 && q.Reset.After(now) {
		if p, known := a.refusals.Paused(scope, bucket, now); !known || Cause(p.Cause) != PausedByUpstream || p.Until.Sub(now) < q.Reset.Sub(now) {
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			const reason = "the upstream announced none left until its reset"
			_, err := pauseUpstream(d.lim, pctx, scope, bucket, q.Reset.Sub(now), reason)
			cancel()
			if err == nil {
				a.refusals.Note(remember.Key{Scope: scope, Bucket: bucket},
					remember.Refusal{Until: q.Reset, Cause: uint8(PausedByUpstream), Pause: true, Reason: reason}, now)
				rec.Paused = true
			}
		}
	}
	if rec.Outside == 0 && !rec.Learned && !rec.Paused {
		return
	}
	a.hooks.reconciled(ctx, rec)
	level := slog.LevelDebug
	if rec.Outside > 0 {
		level = slog.LevelWarn
	}
	a.hooks.log(ctx, level, "tollgate: the upstream's announcement reconciled",
		slog.String("scope", scope), slog.String("bucket", bucket), slog.Int64("remaining", q.Remaining),
		slog.Time("reset", q.Reset), slog.Int64("outside", rec.Outside), slog.Bool("learned", rec.Learned), slog.Bool("paused", rec.Paused))
}

// windowOf returns the window of a bucket's announced quota: as
// announced, or else as its first limit says.
func (a *limits) windowOf(bucket string, ln learn.Learned, announced time.Duration) time.Duration {
	switch {
	case announced > 0:
		return announced
	case ln.Window > 0:
		return ln.Window
	}
	if lims := a.buckets[bucket].Limits; len(lims) > 0 {
		return lims[0].Window
	}
	return 0
}
