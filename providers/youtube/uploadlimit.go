package youtube

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/header"
)

// UploadLimitPause is how long a credential's video uploads are refused
// after YouTube answers one with 400 uploadLimitExceeded: the channel
// behind it has uploaded as many videos as it may in 24 hours, and may
// "try again in 24 hours". Options.Window, when set, replaces it.
//
// That limit is the channel's, not the project's quota: pausing the
// project's uploads would stop every other channel's too. So the Transport
// pauses the video uploads of the credential that met it, the only trace
// of the channel a request carries: its OAuth token (or, failing one, its
// API key), by hash. It refuses them with a *tollgate.QuotaError whose
// Cause is tollgate.PausedByUpstream and whose Scope is "uploads-" + the credential's
// tollgate.HashCredential. The pause is kept in the process and in Redis
// under that scope, so every process sharing the Redis refuses them too.
// What it cannot do:
//
//   - It knows credentials, not channels. OAuth access tokens are renewed
//     about every hour, and a renewed token is a new credential: each
//     renewal may spend one more call on the refusal. Two credentials of
//     one channel are paused one at a time.
//   - Every video upload call costs a Redis read beyond its decision, to
//     learn of pauses other processes recorded. When Redis cannot be read
//     within a second, the process's own memory decides alone.
//   - Only videos.insert calls are refused; captions, thumbnails and the
//     chunks of sessions already open go on.
//   - The pause is counted from the refusal: Google does not say when the
//     channel's own 24 hours end.
const UploadLimitPause = 24 * time.Hour

// uploaders remembers, per credential (by hash), until when its video
// uploads are refused. It is safe for concurrent use.
type uploaders struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// maxUploaders bounds the memory; past it, pauses that have ended go.
const maxUploaders = 1 << 12

// note remembers that id's uploads are refused until until.
func (u *uploaders) note(id string, until, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.until == nil {
		u.until = make(map[string]time.Time)
	}
	if len(u.until) >= maxUploaders {
		for k, v := range u.until {
			if !v.After(now) {
				delete(u.until, k)
			}
		}
	}
	if old, ok := u.until[id]; !ok || until.After(old) {
		u.until[id] = until
	}
}

// check returns until when id's uploads are refused, if they are at now.
func (u *uploaders) check(id string, now time.Time) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	until, ok := u.until[id]
	return until, ok && until.After(now)
}

// uploaderScope is the scope under which a credential's upload pause is
// kept in Redis.
func uploaderScope(id string) string { return "uploads-" + id }

// videoUpload returns the endpoint of a request that calls videos.insert
// (opens an upload session, or uploads in one request), and whether it is
// one. Requests to a session are not: they continue a call.
func (t *Transport) videoUpload(req *http.Request) (costs.Endpoint, bool) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/youtube/v3/videos") || inSession(req) {
		return costs.Endpoint{}, false
	}
	e, err := t.costs.Resolve(req)
	return e, err == nil && !e.Free
}

// upload sends a video upload call, unless its credential's uploads are
// paused, and pauses them when YouTube answers uploadLimitExceeded.
func (t *Transport) upload(req *http.Request, e costs.Endpoint) (*http.Response, error) {
	cred := header.Bearer(req)
	if cred == "" {
		cred = keyOf(req)
	}
	if cred == "" {
		return t.Transport.RoundTrip(req)
	}
	scope := uploaderScope(tollgate.HashCredential(cred))
	refusal := func(d time.Duration) *tollgate.QuotaError {
		return &tollgate.QuotaError{Endpoint: e.Name, Scope: scope, Units: e.Units(), RetryAfter: d, Cause: tollgate.PausedByUpstream}
	}
	if d, paused := t.uploadPaused(req.Context(), scope); paused {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, refusal(d)
	}
	resp, err := t.Transport.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		return resp, err
	}
	body, _ := tollgate.PeekBody(resp, maxErrorBody)
	if !slices.Contains(reasons(body), reasonUploadLimit) {
		return resp, nil
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	resp.Body.Close()

	now := t.now()
	t.uploads.note(scope, now.Add(t.uploadPause), now)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), 2*time.Second)
	defer cancel()
	if err := t.Transport.Pause(ctx, scope, "", t.uploadPause); err != nil && t.logger != nil {
		t.logger.LogAttrs(ctx, slog.LevelWarn, "youtube: could not record a credential's upload pause in Redis",
			slog.String("scope", scope), slog.Any("err", err))
	}
	if t.logger != nil {
		t.logger.LogAttrs(ctx, slog.LevelWarn, "youtube: upload limit met; the credential's video uploads pause",
			slog.String("scope", scope), slog.Duration("pause", t.uploadPause))
	}
	return nil, refusal(t.uploadPause)
}

// uploadPaused reports how long the uploads of the credential whose
// scope is given stay paused, when they are: as this process remembers,
// else as Redis says.
func (t *Transport) uploadPaused(ctx context.Context, scope string) (time.Duration, bool) {
	now := t.now()
	if until, ok := t.uploads.check(scope, now); ok {
		return until.Sub(now), true
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	usage, err := t.Transport.Usage(rctx, scope, Pool)
	if err != nil || len(usage) == 0 || !usage[0].PausedUntil.After(usage[0].Now) {
		return 0, false
	}
	d := usage[0].PausedUntil.Sub(usage[0].Now)
	t.uploads.note(scope, now.Add(d), now)
	return d, true
}
