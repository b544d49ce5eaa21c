// Package redistest starts real redis-server processes on loopback for
// tests: a standalone server, or a Redis Cluster of several masters (and
// replicas). Each server lives in the test's temporary directory and is
// killed when the test ends.
//
// When redis-server (or redis-cli, for a cluster) is not installed, the test
// is skipped, unless TOLLGATE_REQUIRE_REDIS is set: then it fails, so that a
// CI run cannot pass by skipping.
package redistest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RequireEnv, when set to anything, turns a missing redis-server into a test
// failure instead of a skip.
const RequireEnv = "TOLLGATE_REQUIRE_REDIS"

// binary returns the path of a Redis program, or skips (or fails) the test.
func binary(tb testing.TB, name string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv(RequireEnv) != "" {
		tb.Fatalf("%s is not installed and %s is set: %v", name, RequireEnv, err)
	}
	tb.Skipf("%s is not installed (set %s to make this a failure)", name, RequireEnv)
	return ""
}

// Server is a redis-server process on 127.0.0.1.
type Server struct {
	Addr string // "127.0.0.1:port"
	Port int
	Dir  string // its working directory: logs, nodes.conf, appendonly files

	// Password is the default user's password (Options.Password); empty
	// when the server asks none.
	Password string
	// TLS is a client configuration that trusts the server's certificate
	// (and carries a client certificate when the server asks for one);
	// nil when the server speaks plain TCP.
	TLS *tls.Config
	// CAFile is the PEM file of the authority that signed the server's
	// certificate, e.g. for SSL_CERT_FILE; empty without TLS.
	CAFile string

	tb   testing.TB
	bin  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs a redis-server on a free loopback port for the test. Extra
// arguments are added to the command line, e.g. "--appendonly", "yes".
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	return start(tb, false, Options{Args: extra})
}

func start(tb testing.TB, clusterBus bool, opts Options) *Server {
	tb.Helper()
	bin := binary(tb, "redis-server")
	var lastErr error
	for attempt := 0; attempt < 8; attempt++ {
		port, err := freePort(clusterBus)
		if err != nil {
			lastErr = err
			continue
		}
		dir, err := os.MkdirTemp(tb.TempDir(), "redis-"+strconv.Itoa(port)+"-")
		if err != nil {
			tb.Fatal(err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: dir, tb: tb, bin: bin}
		s.args = []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no",
			"--protected-mode", "no", "--logfile", filepath.Join(dir, "redis.log"),
			"--repl-diskless-sync-delay", "0", // a replica syncs at once, not 5s later
		}
		if err := s.secure(opts); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		s.args = append(s.args, opts.Args...)
		if err := s.run(); err != nil {
			lastErr = err
			continue
		}
		tb.Cleanup(s.Kill)
		return s
	}
	tb.Fatalf("redistest: no redis-server would start: %v", lastErr)
	return nil
}

// freePort finds a loopback port nobody listens on; with clusterBus, the
// port 10000 above it (the cluster bus) must be free too.
func freePort(clusterBus bool) (int, error) {
	if !clusterBus {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	for range 50 {
		port := 20000 + rand.IntN(30000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair for a cluster node")
}

// run starts the process and waits until it answers PING.
func (s *Server) run() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.Dir
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	opt := s.ClientOptions()
	opt.MaxRetries, opt.DialTimeout = -1, time.Second
	c := redis.NewClient(opt)
	defer c.Close()
	for range 500 {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited: %s", s.Addr, s.logTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Kill()
	return fmt.Errorf("redis-server on %s did not answer: %s", s.Addr, s.logTail())
}

// logTail returns the end of the server's log, for error messages.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// Client returns a client of the server, logged in as its default user,
// closed when the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(s.ClientOptions())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill stops the server at once (SIGKILL) and waits for it to exit. It does
// nothing when the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Restart starts the server again on the same port and directory, after
// Kill; with appendonly it reloads what it had written.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Kill()
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = s.run(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("redistest: restarting %s: %v", s.Addr, err)
}

// running reports whether the server process is up.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}
