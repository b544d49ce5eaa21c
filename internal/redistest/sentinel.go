package redistest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name of the master set StartSentinel's sentinels watch.
const MasterName = "tollgate"

// Sentinel timeouts: a master that does not answer for DownAfter is taken
// for down, and a failover is given failoverTimeout, so that a test sees
// the replica promoted within a few seconds (Redis's defaults are 30s and
// 3 minutes).
const (
	DownAfter       = 800 * time.Millisecond
	failoverTimeout = 3 * time.Second
)

// Sentinels is a master, its replicas and three sentinels watching them,
// each a process on a free loopback port.
type Sentinels struct {
	Master    *Server   // the master when started; Master() says which is now
	Replicas  []*Server // as started
	Sentinels []*Server // redis-server --sentinel, each with a config file of its own
	// Links are the delaying proxies the replicas reach the first master
	// through, one each, when started by StartSentinelLinked.
	Links    []*Proxy
	password string
}

// StartSentinel starts a master, replicas replicas of it and three
// sentinels (redis-server --sentinel, a config file written to the test's
// temporary directory) watching it under MasterName with a quorum of two,
// and waits until every sentinel knows the replicas and the other
// sentinels. With opts.Password, the servers and the sentinels all ask it;
// opts.Args are given to the master and the replicas.
func StartSentinel(tb testing.TB, replicas int, opts Options) *Sentinels {
	tb.Helper()
	return startSentinels(tb, replicas, opts, false)
}

// StartSentinelLinked starts a set as StartSentinel does, each replica
// reaching the first master through a delaying proxy of its own (Links),
// whose delay SetLag sets: a replica in another zone, or a link cut when
// the master dies (KillMaster).
func StartSentinelLinked(tb testing.TB, replicas int, opts Options) *Sentinels {
	tb.Helper()
	return startSentinels(tb, replicas, opts, true)
}

func startSentinels(tb testing.TB, replicas int, opts Options, linked bool) *Sentinels {
	tb.Helper()
	if opts.TLS {
		tb.Fatal("redistest: StartSentinel over TLS is not supported")
	}
	s := &Sentinels{password: opts.Password}
	s.Master = start(tb, false, opts)
	for range replicas {
		port := strconv.Itoa(s.Master.Port)
		if linked {
			link := NewProxy(tb, s.Master.Addr, 0)
			s.Links = append(s.Links, link)
			_, port, _ = strings.Cut(link.Addr, ":")
		}
		args := append([]string{"--replicaof", "127.0.0.1", port}, opts.Args...)
		r := start(tb, false, Options{Password: opts.Password, Args: args})
		s.Master.WaitOnline(tb, r)
		s.Replicas = append(s.Replicas, r)
	}
	for range 3 {
		s.Sentinels = append(s.Sentinels, s.startSentinel(tb))
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, sn := range s.Sentinels {
		for {
			m, err := sn.sentinelMaster()
			if err == nil && m["num-slaves"] == strconv.Itoa(replicas) && m["num-other-sentinels"] == "2" {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("redistest: sentinel %s does not know the set after 20s: %v %v", sn.Addr, m, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return s
}

// SetLag delays what the first master and its replicas send each other
// by lag each way from now on: replicas in another zone.
func (s *Sentinels) SetLag(lag time.Duration) {
	for _, p := range s.Links {
		p.SetDelay(lag)
	}
}

// KillMaster kills the first master with SIGKILL and cuts its links to
// the replicas at the same instant, dropping what they carried: the
// master's machine and its network gone at once.
func (s *Sentinels) KillMaster() {
	s.Master.Kill()
	for _, p := range s.Links {
		p.Close()
	}
}

// startSentinel writes a sentinel's config file and starts it.
func (s *Sentinels) startSentinel(tb testing.TB) *Server {
	tb.Helper()
	bin := binary(tb, "redis-server")
	var lastErr error
	for range 8 {
		port, err := freePort(false)
		if err != nil {
			lastErr = err
			continue
		}
		dir, err := os.MkdirTemp(tb.TempDir(), "sentinel-"+strconv.Itoa(port)+"-")
		if err != nil {
			tb.Fatal(err)
		}
		conf := []string{
			"port " + strconv.Itoa(port),
			"bind 127.0.0.1",
			"daemonize no",
			"protected-mode no",
			"dir " + dir,
			"logfile " + filepath.Join(dir, "redis.log"),
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", MasterName, s.Master.Port),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", MasterName, DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", MasterName, failoverTimeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", MasterName),
		}
		if s.password != "" {
			conf = append(conf, "requirepass "+s.password,
				fmt.Sprintf("sentinel auth-pass %s %s", MasterName, s.password),
				"sentinel sentinel-pass "+s.password)
		}
		file := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(file, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
			tb.Fatal(err)
		}
		sn := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: dir, Password: s.password,
			tb: tb, bin: bin, args: []string{file, "--sentinel"}}
		if err := sn.run(); err != nil {
			lastErr = err
			continue
		}
		tb.Cleanup(sn.Kill)
		return sn
	}
	tb.Fatalf("redistest: no sentinel would start: %v", lastErr)
	return nil
}

// sentinelMaster reads SENTINEL MASTER of the set from one sentinel.
func (sn *Server) sentinelMaster() (map[string]string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr, Password: sn.Password})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Master(ctx, MasterName).Result()
}

// URL is the Sentinel URL of the set, as redis.ParseFailoverURL reads it:
// the first sentinel as the host, the others as addr parameters, and the
// password (when the servers ask one) both for the sentinels (the user
// part) and for the master (the password parameter).
func (s *Sentinels) URL() string {
	u := url.URL{Scheme: "redis", Host: s.Sentinels[0].Addr}
	q := url.Values{"master_name": {MasterName}}
	for _, sn := range s.Sentinels[1:] {
		q.Add("addr", sn.Addr)
	}
	if s.password != "" {
		u.User = url.UserPassword("", s.password)
		q.Set("password", s.password)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Client returns a failover client of the set, as redis.ParseFailoverURL
// reads URL, closed when the test ends.
func (s *Sentinels) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	o, err := redis.ParseFailoverURL(s.URL())
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	c := redis.NewFailoverClient(o)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// MasterAddr returns the master's address as the first sentinel that
// answers reports it.
func (s *Sentinels) MasterAddr(tb testing.TB) string {
	tb.Helper()
	var lastErr error
	for _, sn := range s.Sentinels {
		if !sn.running() {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr, Password: sn.Password})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addr, err := c.GetMasterAddrByName(ctx, MasterName).Result()
		cancel()
		c.Close()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1]
		}
		lastErr = err
	}
	tb.Fatalf("redistest: no sentinel names the master: %v", lastErr)
	return ""
}

// Server returns the node of the set at addr, or nil.
func (s *Sentinels) Server(addr string) *Server {
	for _, n := range append([]*Server{s.Master}, s.Replicas...) {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// WaitPromoted waits, up to 30 seconds, until every running sentinel names
// a master other than old, and that node answers as a master; it returns
// the new master.
func (s *Sentinels) WaitPromoted(tb testing.TB, old string) *Server {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		addr, agreed := "", true
		for _, sn := range s.Sentinels {
			if !sn.running() {
				continue
			}
			c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr, Password: sn.Password})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			got, err := c.GetMasterAddrByName(ctx, MasterName).Result()
			cancel()
			c.Close()
			if err != nil || len(got) != 2 || (addr != "" && addr != got[0]+":"+got[1]) {
				agreed = false
				break
			}
			addr = got[0] + ":" + got[1]
		}
		if n := s.Server(addr); agreed && addr != old && n != nil && n.role() == "master" {
			return n
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: no replica of %s promoted after 30s (sentinels name %q)", old, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// role returns the server's INFO replication role, or "".
func (s *Server) role() string {
	c := redis.NewClient(s.ClientOptions())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return v
		}
	}
	return ""
}
