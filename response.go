package tollgate

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// read hands the response to the upstream reader. When it says the quota
// is spent, every worker is paused (in Redis, or on the limiter that
// decided) and the caller gets a *QuotaError instead of the response.
// Otherwise the response goes to the caller, metered: its true cost is
// settled and its slots given back when its body ends (settle.go).
func (t *Transport) read(ctx context.Context, c *call, o outcome, resp *http.Response) (*http.Response, error) {
	t.reconcile(ctx, c, o, resp.Header)
	t.releaseSlots(ctx, o.gates) // what they waited to learn is known
	v := t.upstream(resp, c.endpoint)
	if !v.Spent {
		return t.meter(ctx, c, o, resp), nil
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	resp.Body.Close()
	t.releaseSlots(ctx, o.slots)

	qe := &QuotaError{Endpoint: c.endpoint.Name, Scope: o.scope(c), Units: c.endpoint.Units(), RetryAfter: v.Pause, Cause: PausedByUpstream}
	buckets := v.Buckets
	if len(buckets) == 0 {
		buckets = []string{""}
	} else {
		qe.Bucket = buckets[0]
		qe.Units = unitsOf(c.endpoint, buckets[0])
	}
	said := strconv.Itoa(resp.StatusCode)
	if v.Reason != "" {
		said += " " + v.Reason
	}
	qe.Reason = pauseReason("the upstream answered " + said + " to " + c.endpoint.Name)
	now := t.now()
	for _, b := range buckets {
		t.exhausted.note(qe.Scope, b, 0, PausedByUpstream, qe.Reason, now.Add(v.Pause), now)
	}
	if o.by != nil && v.Pause > 0 {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		for _, b := range buckets {
			if _, err := o.by.lim.PauseUpstream(pctx, qe.Scope, b, v.Pause, qe.Reason); err != nil {
				t.log(ctx, slog.LevelWarn, "tollgate: could not record the upstream's quota signal",
					slog.String("scope", qe.Scope), slog.String("bucket", b), slog.Any("err", err))
			}
		}
	}
	t.log(ctx, slog.LevelWarn, "tollgate: upstream reports its quota spent",
		slog.String("endpoint", qe.Endpoint), slog.String("scope", qe.Scope),
		slog.Any("buckets", v.Buckets), slog.Duration("pause", v.Pause), slog.Int("status", resp.StatusCode))
	if t.cfg.OnPause != nil {
		reason := v.Reason
		if reason == "" {
			reason = strconv.Itoa(resp.StatusCode)
		}
		t.cfg.OnPause(ctx, UpstreamPause{Endpoint: qe.Endpoint, Scope: qe.Scope, Buckets: v.Buckets, For: v.Pause, Reason: reason})
	}
	return nil, qe
}
