package anthropic

import (
	"context"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/internal/jsonscan"
	"github.com/tollgate/tollgate/internal/provider"
)

// What ITPM counts of a request that uses the prompt cache. The rate
// limits page (https://docs.anthropic.com/en/api/rate-limits, "Cache-aware
// ITPM") counts input_tokens and cache_creation_input_tokens toward ITPM;
// cache_read_input_tokens do not count "for most Claude models", and do
// for the models its table marks with a dagger (†): the older Claude
// Haiku 3.5 and Claude Haiku 3. An answer's usage.input_tokens leaves out
// both kinds of cache tokens ("the input tokens after the last cache
// breakpoint", prompt caching page,
// https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching), so
// a cached request's input settles to the sum of the fields that count:
// the root settles InputTokens to input_tokens at the request's instant,
// as for any request, and the cacheCounter below records the cache tokens
// that count (Transport.Record) when the body ends, just before that
// settlement, so that the count never dips below the truth in between.

// DefaultCacheReads reports whether a model class's cache reads
// (usage.cache_read_input_tokens) count toward its ITPM, as the rate limits
// page marks them: only for the classes of Claude Haiku 3.5
// ("claude-3-5-haiku") and Claude Haiku 3 ("claude-3-haiku"); for every
// other class, the current models' among them, they do not. It is the
// default of Options.CacheReads: wrap it to mark other classes.
func DefaultCacheReads(class string) bool {
	switch class {
	case "claude-3-5-haiku", "claude-3-haiku":
		return true
	}
	return false
}

// cacheCounter is the Base of the Transports: it sends a request through
// base, and watches the answer of a cached Messages request that the
// Transport settles (read.settleCache) for the cache tokens that count.
type cacheCounter struct {
	base http.RoundTripper
	t    *Transport
}

func (c *cacheCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	base := c.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil || resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	r, ok := req.Context().Value(readKey{}).(*read)
	scope, _ := provider.ScopeOf(req)
	if !ok || !r.settleCache || scope == "" {
		return resp, err
	}
	resp.Body = newCacheBody(resp, r, func(units int64) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), 2*time.Second)
		defer cancel()
		// An error leaves the count at input_tokens: the announced
		// remainders still correct it (Bucket.Follows).
		_ = c.t.Record(ctx, scope, InputTokens, units)
	})
	return resp, err
}

// CloseIdleConnections closes the idle connections of base, when it can.
func (c *cacheCounter) CloseIdleConnections() {
	base := c.base
	if base == nil {
		base = http.DefaultTransport
	}
	if b, ok := base.(interface{ CloseIdleConnections() }); ok {
		b.CloseIdleConnections()
	}
}

// The fields of usage read, in the order of cacheBody's scanner's paths.
const (
	usageInput = iota
	usageCreation
	usageRead
)

// cacheBody reads an answer's body for the caller, unchanged, and finds
// in it the usage the root settles from: usage.* in a JSON answer,
// message.usage.* (message_start) in a stream. When the body ends (EOF)
// having told input_tokens, which the root then settles to, it records the
// cache tokens that count. A body closed before its end, or that never
// tells input_tokens, keeps the estimate, and records nothing.
type cacheBody struct {
	body   io.ReadCloser
	scan   *jsonscan.Scanner
	events *eventData // nil for a JSON answer
	reads  bool       // cache reads count
	record func(units int64)
	done   bool
}

func newCacheBody(resp *http.Response, r *read, record func(int64)) *cacheBody {
	prefix := "usage."
	if r.facts.stream {
		prefix = "message.usage." // message_start, as the root reads it
	}
	b := &cacheBody{body: resp.Body, reads: r.cacheReads, record: record,
		scan: jsonscan.New(prefix+"input_tokens", prefix+"cache_creation_input_tokens", prefix+"cache_read_input_tokens")}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		b.events = &eventData{lineStart: true}
	}
	return b
}

func (b *cacheBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if n > 0 && !b.done {
		if b.events != nil {
			b.events.feed(p[:n], b.scan)
		} else {
			b.scan.Write(p[:n])
		}
	}
	if err == io.EOF && !b.done {
		b.done = true
		if units := b.counted(); units > 0 {
			b.record(units)
		}
	}
	return n, err
}

// counted is what the cache tokens count toward ITPM, when the body told
// input_tokens.
func (b *cacheBody) counted() int64 {
	if _, ok := b.scan.Number(usageInput); !ok {
		return 0
	}
	units, _ := b.scan.Number(usageCreation)
	if b.reads {
		read, _ := b.scan.Number(usageRead)
		units = add(min(units, maxUnits), min(read, maxUnits))
	}
	return min(units, maxUnits)
}

func (b *cacheBody) Close() error {
	b.done = true
	return b.body.Close()
}

// eventData feeds the data of server-sent events to a scanner, each
// event's data a document of its own: the value of every "data:" line
// (less one leading space), lines of one event joined by a newline; an
// empty line ends the event and resets the scanner, which keeps the
// numbers found (the last one met wins). Lines end with LF, CR or CRLF
// (https://html.spec.whatwg.org/multipage/server-sent-events.html).
type eventData struct {
	lineStart bool   // the next byte starts a line
	head      []byte // the first bytes of the line, until they tell its field
	data      bool   // in the value of a data line
	skip      bool   // in a line of another field
	cr        bool   // the last line ended with CR: an LF next is its end too
}

func (e *eventData) feed(p []byte, scan *jsonscan.Scanner) {
	const field = "data:"
	for len(p) > 0 {
		c := p[0]
		if e.cr {
			e.cr = false
			if c == '\n' {
				p = p[1:]
				continue
			}
		}
		if c == '\n' || c == '\r' {
			if e.data {
				scan.Write([]byte{'\n'})
			} else if e.lineStart {
				scan.Reset() // an empty line: the event ends
			}
			e.lineStart, e.head, e.data, e.skip, e.cr = true, e.head[:0], false, false, c == '\r'
			p = p[1:]
			continue
		}
		switch {
		case e.data:
			i := 0
			for i < len(p) && p[i] != '\n' && p[i] != '\r' {
				i++
			}
			scan.Write(p[:i])
			p = p[i:]
		case e.skip:
			i := 0
			for i < len(p) && p[i] != '\n' && p[i] != '\r' {
				i++
			}
			p = p[i:]
		default:
			e.lineStart = false
			e.head = append(e.head, c)
			p = p[1:]
			switch {
			case string(e.head) == field:
				e.data, e.head = true, e.head[:0]
				if len(p) > 0 && p[0] == ' ' {
					p = p[1:]
				}
			case len(e.head) > len(field) || field[:len(e.head)] != string(e.head):
				e.skip, e.head = true, e.head[:0]
			}
		}
	}
}
