package gateway

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// errBodyStalled is the error of a request body that sent nothing for
// the body timeout.
var errBodyStalled = errors.New("gateway: the request body stalled")

// timedBody is a request's body whose every read must make progress
// within a bound: before each read the connection's read deadline is set
// that far ahead, so that a body that stalls is cut, and one that
// arrives slowly but steadily is not (nginx's client_body_timeout). The
// deadline is cleared when the body ends, is closed, or the handler
// returns.
type timedBody struct {
	body io.ReadCloser
	rc   *http.ResponseController
	d    time.Duration

	mu      sync.Mutex
	done    bool // the body ended, or the handler returned: no more deadlines
	stalled bool
}

func newTimedBody(w http.ResponseWriter, body io.ReadCloser, d time.Duration) *timedBody {
	return &timedBody{body: body, rc: http.NewResponseController(w), d: d}
}

func (b *timedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if !b.done {
		b.rc.SetReadDeadline(time.Now().Add(b.d))
	}
	b.mu.Unlock()
	n, err := b.body.Read(p)
	if err != nil {
		b.mu.Lock()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !b.done {
			b.stalled = true
			err = errBodyStalled
		}
		b.endLocked()
		b.mu.Unlock()
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.stop()
	return b.body.Close()
}

// stop ends the deadlines; the handler calls it before it returns, after
// which the ResponseController must not be used. A body not read to its
// end keeps its last deadline: the server reads what is left of it
// before it reads the connection's next request, and that read too is
// bounded.
func (b *timedBody) stop() {
	b.mu.Lock()
	b.done = true
	b.mu.Unlock()
}

// endLocked clears the deadline once the body has ended: the server then
// watches the connection for the client going away, and a deadline left
// would read as that.
func (b *timedBody) endLocked() {
	if b.done {
		return
	}
	b.done = true
	if !b.stalled {
		b.rc.SetReadDeadline(time.Time{})
	}
}

// hasStalled reports whether the body was cut for stalling.
func (b *timedBody) hasStalled() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stalled
}

// perClient is a listener that keeps at most max connections open from
// one client address: those beyond are closed as they are accepted.
type perClient struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[string]int
}

func (l *perClient) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(c.RemoteAddr().String())
		if err != nil {
			host = c.RemoteAddr().String()
		}
		l.mu.Lock()
		if l.open[host] >= l.max {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &countedConn{Conn: c, l: l, host: host}, nil
	}
}

// countedConn is a connection perClient counts until it is closed.
type countedConn struct {
	net.Conn
	l    *perClient
	host string
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.l.open[c.host]--; c.l.open[c.host] <= 0 {
			delete(c.l.open, c.host)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one whose request it did not read whole.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
