package redistest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on loopback that delays everything it forwards, in
// both directions, to stand for a slow or distant Redis.
type Proxy struct {
	Addr   string
	target string
	delay  atomic.Int64 // ns, each way
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// NewProxy forwards a loopback port to target, adding delay each way. It
// stops when the test ends.
func NewProxy(tb testing.TB, target string, delay time.Duration) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	p.delay.Store(int64(delay))
	p.wg.Go(p.accept)
	tb.Cleanup(p.Close)
	return p
}

// SetDelay changes the delay for what is forwarded from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Close stops the proxy and its connections, and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		if !p.track(in) || !p.track(out) {
			in.Close()
			out.Close()
			return
		}
		p.wg.Go(func() { p.pump(in, out) })
		p.wg.Go(func() { p.pump(out, in) })
	}
}

// chunk is data read at an instant, to be written delay later.
type chunk struct {
	data []byte
	at   time.Time
}

// pump copies src to dst, each chunk delay after it was read, in order.
func (p *Proxy) pump(src, dst net.Conn) {
	defer dst.Close()
	defer src.Close()
	queue := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		failed := false
		for c := range queue { // drained to the end, so the reader never blocks
			if failed {
				continue
			}
			time.Sleep(time.Until(c.at.Add(time.Duration(p.delay.Load()))))
			if _, err := dst.Write(c.data); err != nil {
				failed = true
				src.Close() // stop the reader too
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{append([]byte(nil), buf[:n]...), time.Now()}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			break
		}
	}
	close(queue)
	<-done
}
