package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate"
)

// FuzzEstimate: any body is either refused with ErrBody or counted at
// least 1 and at most quota.MaxUnits input tokens, never fewer than the
// bytes of its text, and read for cache_control and sources as an
// independent reading of the decoded document finds them.
func FuzzEstimate(f *testing.F) {
	for _, s := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"où est la gare ?"}]}`,
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"rules","cache\u005fcontrol":{"type":"ephemeral"}}],"messages":[]}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"image","source":{"type":"url","url":"https://x"}}]}]}`,
		`{"type":"base64","type":1,"data":{"a":"b"},"":"x","text":"\ud800"}`,
		`{"max_tokens":1e300,"tools":[{}],"stream":true}`,
		`[]`, `null`, `{`, `{"a":[[[[]]]]}`,
	} {
		f.Add([]byte(s), int64(0))
		f.Add([]byte(s), int64(1600))
	}
	f.Fuzz(func(t *testing.T, body []byte, inline int64) {
		fs, err := parse(body)
		if err != nil {
			if !errors.Is(err, ErrBody) {
				t.Fatalf("parse: %v, want ErrBody", err)
			}
			return
		}
		c := Counting{InlineTokens: max(inline, 0) % 100000}
		in, out := c.input(fs), c.output(fs)
		if in < 1 || in > maxUnits || out < 0 || out > maxUnits {
			t.Fatalf("input %d, output %d: out of [1, MaxUnits]", in, out)
		}
		// Numbers read as the API reads them, of any size: 1e700 is JSON,
		// though no float64.
		var doc any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("parse accepted what encoding/json refuses: %v", err)
		}
		if duplicateKeys(body) {
			return // RFC 8259 leaves a document with repeated names to each reader
		}
		var want walked
		want.walk(doc)
		if fs.cached != want.cached || fs.inline != want.inline || fs.byReference != want.byReference {
			t.Errorf("read cached %v, %d inline, %d by reference; the document holds %v, %d, %d", fs.cached, fs.inline, fs.byReference, want.cached, want.inline, want.byReference)
		}
		if (Counting{}).input(fs) < want.text && utf8.Valid(body) {
			t.Errorf("counted %d input tokens, below the %d bytes of its text", (Counting{}).input(fs), want.text)
		}
	})
}

// walked is what an independent reading of a decoded document finds.
type walked struct {
	cached              bool
	inline, byReference int64
	text                int64 // the bytes of every "text" string
}

// duplicateKeys reports whether an object of the valid JSON body names a
// key twice.
func duplicateKeys(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	type level struct {
		object bool
		keys   map[string]bool
		keyed  bool // a key was read: its value comes next
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if top != nil && top.object {
				top.keyed = false
			}
			stack = append(stack, &level{object: tok == json.Delim('{'), keys: map[string]bool{}})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top == nil || !top.object {
			continue
		}
		if top.keyed {
			top.keyed = false
			continue
		}
		k, _ := tok.(string)
		if top.keys[k] {
			return true
		}
		top.keys[k], top.keyed = true, true
	}
}

func (w *walked) walk(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "cache_control" {
				w.cached = true
			}
			if s, ok := x.(string); ok && k == "text" {
				w.text += int64(len(s))
			}
			w.walk(x)
		}
		switch v["type"] {
		case "base64":
			w.inline++
		case "url", "file":
			w.byReference++
		}
	case []any:
		for _, x := range v {
			w.walk(x)
		}
	}
}

// served answers every request with the body its context carries, as a
// stream of server-sent events.
type served struct{}

type bodyKey struct{}

func (served) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	b, _ := req.Context().Value(bodyKey{}).([]byte)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(b)), Request: req, ContentLength: -1}, nil
}

// FuzzStream: a stream's body reaches the caller byte for byte, and its
// output tokens are settled to the last message_delta's usage when one
// well-formed ends it; whatever else the stream holds, a settlement is a
// count the stream wrote.
func FuzzStream(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"), int64(42), []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), true)
	f.Add([]byte("data: {\"usage\":{\"output_tokens\":7}}\r\n\r\ndata: {\"usage\":{\"output_tokens\":"), int64(3), []byte(": ping\n"), true)
	f.Add([]byte("data: {\"usage\":{\"output_tokens\":7}}\n\n"), int64(0), []byte(""), false)
	f.Add([]byte("data: {\"usage\":{\"output\\u005ftokens\":1e3}}\n\ndata: [1,2"), int64(0), []byte(""), false)
	var mu sync.Mutex
	var settled []tollgate.Decision
	// Limits that never bind: token buckets of 2^40 units refilled every
	// millisecond, so that a settlement of up to 2^40 output tokens is
	// refilled before the next call (a minute's would hold the next calls
	// back for up to a minute).
	tr, err := NewTransport(nil, &Options{Base: served{}, Limits: Limits{RPM: 1 << 40, ITPM: 1 << 40, OTPM: 1 << 40}, Minute: time.Millisecond,
		Tollgate: tollgate.Config{Transit: -1, Trace: tollgate.Trace{Settled: func(_ context.Context, d tollgate.Decision) {
			mu.Lock()
			settled = append(settled, d)
			mu.Unlock()
		}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { tr.Close() })
	const maxTokens = 1000
	f.Fuzz(func(t *testing.T, junk []byte, n int64, tail []byte, delta bool) {
		body := junk
		if delta {
			if bytes.Contains(tail, []byte("output")) || bytes.Contains(tail, []byte(`\`)) {
				return
			}
			n = max(n, 0) % (1 << 40)
			body = append(append(append([]byte{}, junk...), "\n\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":"+strconv.FormatInt(n, 10)+"}}\n\n"...), tail...)
		}
		mu.Lock()
		settled = settled[:0]
		mu.Unlock()
		ctx := context.WithValue(context.Background(), bodyKey{}, body)
		req, _ := http.NewRequestWithContext(ctx, "POST", "https://api.anthropic.com/v1/messages",
			strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":1000,"stream":true,"cache_control":{},"messages":[]}`))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("the caller read %q (%v), the upstream sent %q", got, err, body)
		}
		mu.Lock()
		defer mu.Unlock()
		output := int64(maxTokens)
		for _, d := range settled {
			for _, c := range d.Charges {
				if c.Bucket == OutputTokens {
					output = c.Units
				}
			}
		}
		switch {
		case delta && output != n:
			t.Errorf("settled to %d output tokens, the last message_delta told %d", output, n)
		case !delta && output != maxTokens && !bytes.Contains(body, []byte(strconv.FormatInt(output, 10))) && !bytes.Contains(body, []byte("e")):
			t.Errorf("settled to %d output tokens, a count the stream never wrote", output)
		}
	})
}
