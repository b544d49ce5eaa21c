package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/providers/gemini"
	"github.com/tollgate/tollgate/providers/openai"
	"github.com/tollgate/tollgate/quota"
)

// body is the JSON the gateway answers with, under "error", in the shape
// Google's and OpenAI's SDKs read a message from:
//
//	{"error":{"code":429,"status":"quota_exhausted","message":"...",
//	  "upstream":"youtube","bucket":"pool","cause":"no_room","retry_after":41}}
type body struct {
	Code       int    `json:"code"`
	Status     string `json:"status"`
	Message    string `json:"message"`
	Upstream   string `json:"upstream,omitempty"`
	Bucket     string `json:"bucket,omitempty"`
	Cause      string `json:"cause,omitempty"`
	RetryAfter int64  `json:"retry_after,omitempty"`
}

// unavailableRetry is the Retry-After of a 503: Redis down, or the
// gateway shutting down.
const unavailableRetry = 5 * time.Second

// retrySeconds rounds a wait as tollgate.QuotaError.ServeHTTP does: whole
// seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int64 {
	return max(int64(math.Ceil(d.Seconds())), 1)
}

// answer writes a JSON answer; retry, when positive, is its Retry-After
// in seconds.
func answer(w http.ResponseWriter, code int, retry int64, b body) {
	b.Code = code
	if retry > 0 {
		b.RetryAfter = retry
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	out, _ := json.Marshal(map[string]body{"error": b})
	w.Write(append(out, '\n'))
}

// refuse answers a request the gateway does not forward.
func refuse(w http.ResponseWriter, code int, status, message string) {
	answer(w, code, 0, body{Status: status, Message: message})
}

// causes name a QuotaError's Cause in the answer's "cause".
var causes = map[tollgate.Cause]string{
	tollgate.NoRoom:           "no_room",
	tollgate.PausedByUpstream: "paused_by_upstream",
	tollgate.PausedByOperator: "paused_by_operator",
	tollgate.CapFull:          "cap_full",
	tollgate.RedisDown:        "redis_down",
}

// quotaAnswer answers a refusal: 429 and its Retry-After.
func quotaAnswer(w http.ResponseWriter, up string, qe *tollgate.QuotaError) {
	secs := retrySeconds(qe.RetryAfter)
	cause, ok := causes[qe.Cause]
	if !ok {
		cause = "no_room"
	}
	where := "upstream " + strconv.Quote(up)
	if qe.Bucket != "" {
		where = "bucket " + strconv.Quote(qe.Bucket) + " of " + where
	}
	answer(w, http.StatusTooManyRequests, secs, body{Status: "quota_exhausted", Upstream: up, Bucket: qe.Bucket, Cause: cause,
		Message: fmt.Sprintf("tollgate: quota exhausted (%s) in %s; retry after %d seconds", qe.Cause, where, secs)})
}

// shuttingDown answers a request the gateway will not send: it is
// shutting down.
func (g *Gateway) shuttingDown(w http.ResponseWriter, up *upstream) {
	answer(w, http.StatusServiceUnavailable, retrySeconds(unavailableRetry), body{Status: "unavailable", Upstream: up.cfg.Name,
		Cause: "shutting_down", Message: "tollgate: the gateway is shutting down; retry after 5 seconds"})
}

// failed answers a request its Transport did not send, or whose upstream
// could not be reached (ReverseProxy's ErrorHandler).
func (g *Gateway) failed(w http.ResponseWriter, r *http.Request, err error) {
	f := flightOf(r.Context())
	up := f.up.cfg.Name
	var qe *tollgate.QuotaError
	var ue *tollgate.UnavailableError
	switch {
	case f.drained || errors.Is(err, errShuttingDown) || context.Cause(r.Context()) == errShuttingDown:
		g.shuttingDown(w, f.up)
	case f.body.hasStalled():
		w.Header().Set("Connection", "close")
		answer(w, http.StatusRequestTimeout, 0, body{Status: "request_timeout", Upstream: up, Cause: "body_timeout",
			Message: "tollgate: the request body sent nothing for the body timeout; the connection is closed"})
	case errors.As(err, &qe):
		if qe.Cause == tollgate.PausedByUpstream && f.replay(w) {
			return // the upstream's own answer, which paused the scope
		}
		quotaAnswer(w, up, qe)
	case errors.Is(err, openai.ErrInsufficientQuota) && f.replay(w):
	case errors.As(err, &ue):
		answer(w, http.StatusServiceUnavailable, retrySeconds(unavailableRetry), body{Status: "unavailable", Upstream: up,
			Cause: "redis_unavailable", Message: "tollgate: the quota store does not answer and this upstream fails closed; retry after 5 seconds"})
	case r.Context().Err() != nil:
		// The caller went away: no one reads the answer.
		w.WriteHeader(http.StatusBadGateway)
	case errors.Is(err, openai.ErrBody), errors.Is(err, anthropic.ErrBody):
		answer(w, http.StatusBadRequest, 0, body{Status: "bad_request", Upstream: up, Cause: "body",
			Message: "tollgate: the request body cannot be counted: not a JSON object, or larger than the upstream's max_body"})
	case errors.Is(err, costs.ErrUnknownEndpoint):
		answer(w, http.StatusNotFound, 0, body{Status: "not_found", Upstream: up, Cause: "unknown_endpoint",
			Message: "tollgate: no endpoint of the upstream's cost table matches the request"})
	case errors.Is(err, quota.ErrCostExceedsLimit):
		answer(w, http.StatusBadRequest, 0, body{Status: "bad_request", Upstream: up, Cause: "cost_exceeds_limit",
			Message: "tollgate: the request costs more than a limit of its bucket holds: it can never be sent"})
	case errors.Is(err, gemini.ErrNoLimits):
		answer(w, http.StatusBadRequest, 0, body{Status: "bad_request", Upstream: up, Cause: "no_limits",
			Message: "tollgate: the upstream has no limits for this model"})
	default:
		// A *url.Error repeats the URL, query and all: say what failed
		// without it.
		why := err
		var ue *url.Error
		if errors.As(err, &ue) {
			why = fmt.Errorf("%s: %w", ue.Op, ue.Err)
		}
		// What the request sent is quoted: a newline in its path cannot
		// write a line of its own.
		g.log.Printf("upstream %s: %q %q: %q", up, r.Method, r.URL.Path, oneLine(why.Error()))
		answer(w, http.StatusBadGateway, 0, body{Status: "bad_gateway", Upstream: up,
			Message: "tollgate: the request could not be sent to the upstream, or its answer could not be read"})
	}
}

// unbuffered answers a request whose body the gateway did not buffer:
// too large, past a bound on the bytes buffered, stalled, or cut.
func (g *Gateway) unbuffered(w http.ResponseWriter, r *http.Request, f *flight, err error) {
	up := f.up.cfg.Name
	// Its body may not have been read whole: the connection closes, and
	// the server reads no more of it.
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	switch {
	case errors.Is(err, errTooLarge):
		answer(w, http.StatusBadRequest, 0, body{Status: "bad_request", Upstream: up, Cause: "body",
			Message: "tollgate: the request body cannot be counted: larger than the upstream's max_body"})
	case errors.Is(err, errBudgetCaller):
		answer(w, http.StatusTooManyRequests, 1, body{Status: "too_many_requests", Upstream: up, Cause: "caller_buffered",
			Message: "tollgate: this caller has as many request bytes buffered as max_buffered_per_caller allows; retry after 1 second"})
	case errors.Is(err, errBudgetAll):
		answer(w, http.StatusServiceUnavailable, 1, body{Status: "unavailable", Upstream: up, Cause: "buffered",
			Message: "tollgate: the gateway has as many request bytes buffered as max_buffered allows; retry after 1 second"})
	case f.body.hasStalled():
		answer(w, http.StatusRequestTimeout, 0, body{Status: "request_timeout", Upstream: up, Cause: "body_timeout",
			Message: "tollgate: the request body sent nothing for the body timeout; the connection is closed"})
	default:
		answer(w, http.StatusBadRequest, 0, body{Status: "bad_request", Upstream: up, Cause: "body",
			Message: "tollgate: the request body could not be read"})
	}
}

// replay writes the upstream's own answer that the provider read and
// turned into an error: status, headers and body as they came. It
// reports false when it has none, whole.
func (f *flight) replay(w http.ResponseWriter) bool {
	c := f.answer
	if c == nil || !c.complete {
		return false
	}
	h := w.Header()
	for k, vs := range c.header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Trailer", "Upgrade":
			continue
		}
		h[k] = append([]string(nil), vs...)
	}
	h.Set("Content-Length", strconv.Itoa(len(c.kept)))
	w.WriteHeader(c.status)
	w.Write(c.kept)
	return true
}
