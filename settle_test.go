package tollgate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// settleTable estimates a chat call at 1,000 tokens, settled from the
// body's usage.total_tokens, a report at 100, settled from X-Cost, and a
// poll at 5, settled from X-Cost, and to nothing when answered 304.
func settleTable(t *testing.T) *costs.Table {
	t.Helper()
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"tokens"},
		Rules: []costs.Rule{
			{Pattern: "POST /v1/chat", Endpoint: "chat", Charges: []costs.Charge{{Bucket: "tokens", Units: 1000}},
				Settle: []costs.Settle{{Bucket: "tokens", Field: "usage.total_tokens"}}},
			{Pattern: "GET /v1/report", Endpoint: "report", Charges: []costs.Charge{{Bucket: "tokens", Units: 100}},
				Settle: []costs.Settle{{Bucket: "tokens", Header: "X-Cost"}}},
			{Pattern: "GET /v1/poll", Endpoint: "poll", Charges: []costs.Charge{{Bucket: "tokens", Units: 5}},
				Settle: []costs.Settle{{Bucket: "tokens", Header: "X-Cost"}, {Bucket: "tokens", Status: http.StatusNotModified, Units: 0}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// settleRig is a Transport on an in-process Redis whose tokens bucket
// allows 100,000 an hour, with the settlements it reported.
type settleRig struct {
	tr      *tollgate.Transport
	up      *upstream
	settled decisions
}

func newSettleRig(t *testing.T) *settleRig {
	t.Helper()
	r := &settleRig{up: newUpstream(t)}
	r.tr = newTransport(t, tollgate.Config{
		Transit: -1, Limiter: inProcess(t), Costs: settleTable(t),
		Buckets: map[string]tollgate.Bucket{"tokens": {Limits: []quota.Limit{quota.PerWindow(100000, time.Hour)}}},
		Trace:   tollgate.Trace{Settled: r.settled.hook},
	})
	return r
}

// used is the tokens the Transport counts now.
func (r *settleRig) used(t *testing.T) int64 {
	t.Helper()
	u, err := r.tr.Usage(context.Background(), tollgate.DefaultScope, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	return u[0].Used
}

// call sends a request and reads its body, all of it or the first n bytes
// before closing it.
func (r *settleRig) call(t *testing.T, method, path string, n int) string {
	t.Helper()
	req, _ := http.NewRequest(method, r.up.URL+path, nil)
	resp, err := r.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	if n < 0 {
		body, err = io.ReadAll(resp.Body)
	} else {
		body = make([]byte, n)
		_, err = io.ReadFull(resp.Body, body)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return string(body)
}

func TestSettleFromTheBody(t *testing.T) {
	r := newSettleRig(t)
	doc := `{"id":"chatcmpl-1","choices":[{"message":{"content":"` + strings.Repeat("word ", 2000) + `"}}],"usage":{"prompt_tokens":40,"completion_tokens":180,"total_tokens":220}}`
	r.up.setRespond(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, doc)
	})
	if got := r.call(t, "POST", "/v1/chat", -1); got != doc {
		t.Fatalf("the caller read %d bytes, want the body whole (%d)", len(got), len(doc))
	}
	if used := r.used(t); used != 220 {
		t.Errorf("used %d tokens after a call that cost 220 (estimated 1,000)", used)
	}
	s := r.settled.list()
	if len(s) != 1 || !s[0].Settled || s[0].Err != nil || s[0].Charges[0] != (costs.Charge{Bucket: "tokens", Units: 220}) ||
		len(s[0].Estimate) != 1 || s[0].Estimate[0] != (costs.Charge{Bucket: "tokens", Units: 1000}) {
		t.Errorf("Settled saw %+v, want one settlement of the 1,000 tokens estimated to 220", s)
	}
}

func TestSettleFromAHeader(t *testing.T) {
	r := newSettleRig(t)
	cost := "7"
	r.up.setRespond(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Cost", cost)
		io.WriteString(w, "ok")
	})
	r.call(t, "GET", "/v1/report", 0) // the header alone settles: the body need not be read
	if used := r.used(t); used != 7 {
		t.Errorf("used %d after a report that cost 7 (estimated 100)", used)
	}
	// More than the estimate counts too: the upstream spent it.
	cost = "350"
	r.call(t, "GET", "/v1/report", -1)
	if used := r.used(t); used != 357 {
		t.Errorf("used %d after a report that cost 350, want 357", used)
	}
}

// A response with a status the rule gives a cost for settles to that
// cost at once, whatever a header says; other statuses settle as the
// rule's header says, or keep the estimate.
func TestSettleFromTheStatus(t *testing.T) {
	r := newSettleRig(t)
	status, cost := http.StatusNotModified, "9"
	r.up.setRespond(func(w http.ResponseWriter, _ *http.Request) {
		if cost != "" {
			w.Header().Set("X-Cost", cost)
		}
		w.WriteHeader(status)
	})
	for range 3 {
		r.call(t, "GET", "/v1/poll", -1)
	}
	if used := r.used(t); used != 0 {
		t.Errorf("used %d after three polls answered 304, want 0", used)
	}
	status, cost = http.StatusOK, "3"
	r.call(t, "GET", "/v1/poll", -1)
	if used := r.used(t); used != 3 {
		t.Errorf("used %d after a poll answered 200 with X-Cost: 3, want 3", used)
	}
	cost = ""
	r.call(t, "GET", "/v1/poll", -1)
	if used := r.used(t); used != 3+5 {
		t.Errorf("used %d after a poll answered 200 that tells nothing, want 3 + the estimate of 5", used)
	}
	s := r.settled.list()
	if len(s) != 4 || s[0].Charges[0] != (costs.Charge{Bucket: "tokens", Units: 0}) || s[0].Err != nil {
		t.Errorf("Settled saw %+v, want four settlements, the first to 0 tokens", s)
	}
}

// TestSettleFromAStream: in a stream of server-sent events, the usage the
// last event tells settles the call; the caller reads the stream as sent.
func TestSettleFromAStream(t *testing.T) {
	r := newSettleRig(t)
	events := []string{
		`{"id":"c1","choices":[{"delta":{"content":"Hel"}}],"usage":null}`,
		`{"id":"c1","choices":[{"delta":{"content":"lo"}}],"usage":null}`,
		`{"id":"c1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}}`,
	}
	var sent strings.Builder
	r.up.setRespond(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i, ev := range events {
			// Lines end in CRLF in one event, as the format allows; each
			// event goes out in two writes, split inside its JSON.
			end := "\n\n"
			if i == 1 {
				end = "\r\n\r\n"
			}
			msg := "event: chunk\ndata: " + ev + end
			io.WriteString(w, msg[:len(msg)/2])
			f.Flush()
			io.WriteString(w, msg[len(msg)/2:])
			f.Flush()
			sent.WriteString(msg)
		}
		io.WriteString(w, "data: [DONE]\n\n")
		sent.WriteString("data: [DONE]\n\n")
	})
	got := r.call(t, "POST", "/v1/chat", -1)
	if got != sent.String() {
		t.Errorf("the caller read %q, want the stream as sent", got)
	}
	if used := r.used(t); used != 42 {
		t.Errorf("used %d after a stream whose last usage was 42 (estimated 1,000)", used)
	}
}

// TestEstimateKept: a response that does not tell the true cost, or a
// body closed before its end, keeps the estimate; a cost that cannot be
// read is reported, never applied.
func TestEstimateKept(t *testing.T) {
	cases := []struct {
		name    string
		path    string
		header  string
		body    string
		read    int // bytes the caller reads; -1: all
		reports bool
	}{
		{"no usage field", "/v1/chat", "", `{"choices":[]}`, -1, false},
		{"not JSON", "/v1/chat", "", `<html>busy</html>`, -1, false},
		{"closed early", "/v1/chat", "", `{"pad":"` + strings.Repeat("x", 64<<10) + `","usage":{"total_tokens":5}}`, 100, false},
		{"a negative header", "/v1/report", "-5", "ok", -1, true},
		{"a header past MaxUnits", "/v1/report", fmt.Sprint(int64(1) << 60), "ok", -1, true},
		{"a header that is no number", "/v1/report", "12 tokens", "ok", -1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newSettleRig(t)
			r.up.setRespond(func(w http.ResponseWriter, _ *http.Request) {
				if c.header != "" {
					w.Header().Set("X-Cost", c.header)
				}
				io.WriteString(w, c.body)
			})
			method := "POST"
			want := int64(1000)
			if c.path == "/v1/report" {
				method, want = "GET", 100
			}
			r.call(t, method, c.path, c.read)
			if used := r.used(t); used != want {
				t.Errorf("used %d, want the estimate %d", used, want)
			}
			s := r.settled.list()
			if c.reports && (len(s) != 1 || s[0].Err == nil || s[0].Charges[0].Units != want) {
				t.Errorf("Settled saw %+v, want one report of the unreadable cost, the estimate kept", s)
			}
			if !c.reports && len(s) != 0 {
				t.Errorf("Settled saw %+v, want nothing: the response told nothing", s)
			}
		})
	}
}
