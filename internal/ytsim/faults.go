package ytsim

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
)

// Fault is an error answer a test can make the Server send in place of a
// call (see Inject). Its value is the error's reason, except
// RateLimitExceeded429. The bodies are those in testdata/errors, where
// their sources are listed.
type Fault string

// The faults a Server can inject.
const (
	// QuotaExceeded is 403 youtube.quota quotaExceeded, what the Server
	// also answers by itself once a bucket is spent.
	QuotaExceeded Fault = "quotaExceeded"
	// DailyLimitExceeded is the older 403 usageLimits dailyLimitExceeded.
	DailyLimitExceeded Fault = "dailyLimitExceeded"
	// RateLimitExceeded is 403 usageLimits rateLimitExceeded.
	RateLimitExceeded Fault = "rateLimitExceeded"
	// RateLimitExceeded429 is the same reason sent with HTTP 429.
	RateLimitExceeded429 Fault = "rateLimitExceeded-429"
	// UserRateLimitExceeded is 403 usageLimits userRateLimitExceeded.
	UserRateLimitExceeded Fault = "userRateLimitExceeded"
	// UploadLimitExceeded is 400 youtube.video uploadLimitExceeded: the
	// channel's upload limit for 24 hours, not the project's quota.
	UploadLimitExceeded Fault = "uploadLimitExceeded"
	// UserRequestsExceedRateLimit is the Live Streaming API's 403
	// userRequestsExceedRateLimit.
	UserRequestsExceedRateLimit Fault = "userRequestsExceedRateLimit"
	// Forbidden is 403 global forbidden: not a quota error.
	Forbidden Fault = "forbidden"
	// InsufficientPermissions is 403 global insufficientPermissions: not a
	// quota error.
	InsufficientPermissions Fault = "insufficientPermissions"
)

//go:embed testdata/errors/*.json
var errorFiles embed.FS

// faultReplies holds every Fault's answer, read from testdata/errors once.
var faultReplies = loadFaults(QuotaExceeded, DailyLimitExceeded, RateLimitExceeded,
	RateLimitExceeded429, UserRateLimitExceeded, UploadLimitExceeded,
	UserRequestsExceedRateLimit, Forbidden, InsufficientPermissions)

// loadFaults reads the bodies of faults: compacted, with their field order
// and escapes kept, under the status their code field names.
func loadFaults(faults ...Fault) map[Fault]reply {
	out := make(map[Fault]reply, len(faults))
	for _, f := range faults {
		raw, err := errorFiles.ReadFile("testdata/errors/" + string(f) + ".json")
		if err != nil {
			panic("ytsim: " + err.Error()) // unreachable: embedded above, checked by the tests
		}
		var body bytes.Buffer
		var head struct {
			Error struct{ Code int } `json:"error"`
		}
		if err := json.Compact(&body, raw); err != nil || json.Unmarshal(raw, &head) != nil || head.Error.Code == 0 {
			panic(fmt.Sprintf("ytsim: testdata/errors/%s.json: not an error body", f))
		}
		out[f] = reply{status: head.Error.Code, body: body.Bytes()}
	}
	return out
}

// quotaExceeded is the answer once a project's bucket is spent.
func quotaExceeded() reply { return faultReplies[QuotaExceeded] }

// Inject makes the Server answer the next call of method (a name as in
// Arrival.Method, e.g. "videos.insert"; "" for a call of any method) with
// f instead of serving it. It fails for a method or fault it does not know. Injected faults queue up: two Injects answer
// the next two calls. A fault for the method itself is used before one
// for any method. A call that names no valid key is refused as usual and
// leaves the queue alone.
//
// The call is refused before it is charged: it counts in Requests (and a
// QuotaExceeded in QuotaErrors) but spends no units, as the Server's own
// quotaExceeded; whether Google charges refused calls is not documented.
// An injected fault on the request that opens an upload session opens
// none; chunk requests never take faults.
func (s *Server) Inject(method string, f Fault) error {
	if _, ok := faultReplies[f]; !ok {
		return fmt.Errorf("ytsim: unknown fault %q", f)
	}
	if _, ok := s.prices[method]; !ok && method != "" {
		return fmt.Errorf("ytsim: unknown method %q", method)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], f)
	return nil
}

// nextFault takes the fault queued for a call of method, if any; s.mu is
// held.
func (s *Server) nextFault(method string) (Fault, bool) {
	if _, ok := s.prices[method]; !ok {
		return "", false // not a method of the API: unknown paths, wrong HTTP methods
	}
	for _, k := range []string{method, ""} {
		if q := s.faults[k]; len(q) > 0 {
			f := q[0]
			if len(q) == 1 {
				delete(s.faults, k)
			} else {
				s.faults[k] = q[1:]
			}
			return f, true
		}
	}
	return "", false
}
