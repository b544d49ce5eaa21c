package anthropic

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// TestCacheBodyCounts: the cache tokens that count are found in a JSON
// answer and in a stream's message_start, whatever the line ends and
// however the body is cut into reads; nothing is recorded for a body that
// does not tell input_tokens, or that is closed before its end.
func TestCacheBodyCounts(t *testing.T) {
	start := `{"type":"message_start","message":{"usage":{"input_tokens":7,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":1}}}`
	delta := `{"type":"message_delta","usage":{"output_tokens":20,"cache_read_input_tokens":99999}}`
	for _, c := range []struct {
		name   string
		stream bool
		body   string
		reads  bool
		want   int64
	}{
		{"JSON, reads do not count", false, `{"content":[],"usage":{"input_tokens":7,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":20}}`, false, 300},
		{"JSON, reads count", false, `{"usage":{"cache_read_input_tokens":4000,"input_tokens":7}}`, true, 4000},
		{"JSON without input_tokens", false, `{"usage":{"cache_creation_input_tokens":300}}`, true, 0},
		{"stream, LF", true, "event: message_start\ndata: " + start + "\n\nevent: message_delta\ndata: " + delta + "\n\n", true, 4300},
		{"stream, CRLF", true, "event: message_start\r\ndata:" + start + "\r\n\r\n: ping\r\ndata: " + delta + "\r\n\r\n", false, 300},
		{"stream, CR", true, "data: " + start + "\r\rdata: " + delta + "\r\r", true, 4300},
		{"stream, data split over two lines", true, "data: {\"message\":{\"usage\":\ndata: {\"input_tokens\":1,\"cache_creation_input_tokens\":5}}}\n\n", false, 5},
		{"stream, another field named like data", true, "datum: " + start + "\n\n", true, 0},
	} {
		for cut := range len(c.body) + 1 {
			var got int64
			calls := 0
			resp := &http.Response{Header: http.Header{}, Body: io.NopCloser(&twoReads{[]byte(c.body[:cut]), []byte(c.body[cut:])})}
			if c.stream {
				resp.Header.Set("Content-Type", "text/event-stream; charset=utf-8")
			}
			b := newCacheBody(resp, &read{facts: facts{stream: c.stream}, cacheReads: c.reads}, func(n int64) { got += n; calls++ })
			out, err := io.ReadAll(b)
			if err != nil || string(out) != c.body {
				t.Fatalf("%s, cut at %d: read %q (%v), want the body unchanged", c.name, cut, out, err)
			}
			if got != c.want || calls > 1 || (c.want == 0) != (calls == 0) {
				t.Fatalf("%s, cut at %d: recorded %d in %d calls, want %d", c.name, cut, got, calls, c.want)
			}
		}
		var got int64
		resp := &http.Response{Header: http.Header{}, Body: io.NopCloser(bytes.NewReader([]byte(c.body)))}
		b := newCacheBody(resp, &read{facts: facts{stream: c.stream}, cacheReads: c.reads}, func(n int64) { got += n })
		io.ReadFull(b, make([]byte, len(c.body)))
		b.Close()
		if got != 0 {
			t.Errorf("%s: a body closed before its EOF recorded %d", c.name, got)
		}
	}
}

// twoReads returns its first part, then its second, then EOF.
type twoReads struct{ a, b []byte }

func (r *twoReads) Read(p []byte) (int, error) {
	if len(r.a) == 0 {
		r.a, r.b = r.b, nil
		if len(r.a) == 0 {
			return 0, io.EOF
		}
	}
	n := copy(p, r.a)
	r.a = r.a[n:]
	return n, nil
}
