package providertest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/quota"
)

// closeCounter counts how often a request body is closed.
type closeCounter struct {
	io.Reader
	closed *int
}

func (c closeCounter) Close() error { *c.closed++; return nil }

// TestServedAndSend: the handler's answer comes back whole, the request
// counted and its body closed once.
func TestServedAndSend(t *testing.T) {
	var sent atomic.Int64
	s := Served{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "got "+string(b))
	}), Sent: &sent}
	closed := 0
	req, _ := http.NewRequest("POST", "http://x/y", nil)
	req.Body = closeCounter{strings.NewReader("hi"), &closed}
	resp, body, err := Send(s, req)
	if err != nil || resp.StatusCode != http.StatusAccepted || body != "got hi" || resp.Request != req {
		t.Fatalf("Send: %v %q %v, want 202 \"got hi\"", resp, body, err)
	}
	if sent.Load() != 1 || closed != 1 {
		t.Errorf("sent %d, body closed %d times; want 1 and 1", sent.Load(), closed)
	}
}

// usage answers Usage with its fields.
type usage struct {
	u   []quota.Usage
	err error
}

func (u usage) Usage(context.Context, string, string) ([]quota.Usage, error) { return u.u, u.err }

// TestUsed: the first limit's units used and limit; a Transport that
// cannot tell ends the test.
func TestUsed(t *testing.T) {
	u := usage{u: []quota.Usage{{Used: 3, Limit: quota.Limit{Units: 10}}, {Used: 4}}}
	if used, limit := Used(t, u, "s", "b"); used != 3 || limit != 10 {
		t.Errorf("Used: %d of %d, want 3 of 10", used, limit)
	}
	for _, bad := range []usage{{err: errors.New("down")}, {}} {
		tb := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Used(tb, bad, "s", "b")
		}()
		<-done
		if !tb.fatal {
			t.Errorf("%+v: Used went on", bad)
		}
	}
}

// fatalTB records a Fatal and ends its goroutine, as testing's does.
type fatalTB struct {
	testing.TB
	fatal bool
}

func (*fatalTB) Helper() {}

func (f *fatalTB) Fatal(...any) { f.fatal = true; runtime.Goexit() }

func (f *fatalTB) Fatalf(string, ...any) { f.fatal = true; runtime.Goexit() }
