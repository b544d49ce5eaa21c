package tollgate

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/remember"
)

// An UpstreamPause reports that the upstream answered a request that its
// quota is spent, so that every worker holds off: never a credential;
// Scope is a pool's name or a hash.
type UpstreamPause struct {
	// Endpoint is the request's endpoint, e.g. "search.list".
	Endpoint string
	// Scope is the pool paused, e.g. "project-a".
	Scope string
	// Buckets are the buckets paused; none means the whole scope.
	Buckets []string
	// For is how long every worker holds off, e.g. 10s.
	For time.Duration
	// Reason is the upstream's reason (Verdict.Reason), e.g.
	// "quotaExceeded", or else the response's status code, e.g. "429".
	Reason string
}

// verdicts is the reader of what the upstream says of its quota
// (Config.ReadResponse, upstream.go). When it says the quota is spent,
// every worker is paused (in Redis, on the limiter that decided, and in
// this process's memory) and the caller gets a *QuotaError instead of the
// response.
type verdicts struct {
	read     UpstreamFunc
	refusals *remember.Refusals
	gates    *gates
	hooks    *hooks
}

// verdict passes the response on, unless the upstream says its quota is
// spent.
func (v *verdicts) verdict(ctx context.Context, r *request, resp *http.Response) (*http.Response, error) {
	said := v.read(resp, r.endpoint)
	if !said.Spent {
		return resp, nil
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	resp.Body.Close()
	v.gates.release(ctx, r, heldSlots)

	bucket, buckets := "", said.Buckets
	if len(buckets) == 0 {
		buckets = []string{""}
	} else {
		bucket = buckets[0]
	}
	status := strconv.Itoa(resp.StatusCode)
	if said.Reason != "" {
		status += " " + said.Reason
	}
	qe := r.refused(r.spending(), bucket, PausedByUpstream, said.Pause, pauseReason("the upstream answered "+status+" to "+r.endpoint.Name))
	for _, b := range buckets {
		v.refusals.Note(remember.Key{Scope: qe.Scope, Bucket: b},
			remember.Refusal{Until: r.now.Add(said.Pause), Cause: uint8(PausedByUpstream), Pause: true, Reason: qe.Reason}, r.now)
	}
	if r.by != nil && said.Pause > 0 {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		for _, b := range buckets {
			if _, err := pauseUpstream(r.by.lim, pctx, qe.Scope, b, said.Pause, qe.Reason); err != nil {
				v.hooks.log(ctx, slog.LevelWarn, "tollgate: could not record the upstream's quota signal",
					slog.String("scope", qe.Scope), slog.String("bucket", b), slog.Any("err", err))
			}
		}
	}
	v.hooks.log(ctx, slog.LevelWarn, "tollgate: upstream reports its quota spent",
		slog.String("endpoint", qe.Endpoint), slog.String("scope", qe.Scope),
		slog.Any("buckets", said.Buckets), slog.Duration("pause", said.Pause), slog.Int("status", resp.StatusCode))
	reason := said.Reason
	if reason == "" {
		reason = strconv.Itoa(resp.StatusCode)
	}
	v.hooks.paused(ctx, UpstreamPause{Endpoint: qe.Endpoint, Scope: qe.Scope, Buckets: said.Buckets, For: said.Pause, Reason: reason})
	return nil, qe
}
