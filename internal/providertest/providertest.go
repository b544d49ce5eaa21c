// Package providertest holds what the tests of tollgate's providers
// (openai, anthropic, gemini) share about reaching a provider's
// Transport: a Base that serves requests in memory, sending a request and
// reading its answer whole, and reading what a scope's bucket counts.
package providertest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/quota"
)

// Served is a Base that serves requests with Handler in memory: tests
// reach a provider's Transport with header values net/http would refuse
// to put on the wire, and need no listener. Sent, when not nil, counts
// the requests it served.
type Served struct {
	Handler http.Handler
	Sent    *atomic.Int64
}

// RoundTrip serves req with the handler and closes its body, as a Base
// must.
func (s Served) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.Sent != nil {
		s.Sent.Add(1)
	}
	rec := httptest.NewRecorder()
	s.Handler.ServeHTTP(rec, req)
	if req.Body != nil {
		req.Body.Close()
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// Send sends req through rt and reads the answer whole: the response
// (its body closed), its body and the error of either.
func Send(rt http.RoundTripper, req *http.Request) (*http.Response, string, error) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// UsageReader is what a provider's Transport has of tollgate.Transport.Usage.
type UsageReader interface {
	Usage(ctx context.Context, scope, bucket string) ([]quota.Usage, error)
}

// Used returns what tr counts in a scope's bucket, by its first limit:
// the units used, and the limit enforced. It ends the test when tr
// cannot tell.
func Used(t testing.TB, tr UsageReader, scope, bucket string) (used, limit int64) {
	t.Helper()
	u, err := tr.Usage(context.Background(), scope, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if len(u) == 0 {
		t.Fatalf("Usage(%s, %s): no limit", scope, bucket)
	}
	return u[0].Used, u[0].Limit.Units
}
