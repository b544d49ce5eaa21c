package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster on loopback.
type Cluster struct {
	Nodes []*Server // masters first, then replicas, as redis-cli assigned them
	Addrs []string
}

// StartCluster starts masters*(1+replicas) redis-server processes in cluster
// mode, joins them with redis-cli --cluster create, and waits until every
// node reports the cluster ok. With replicas, nodes time out after one
// second, so that a replica takes over a killed master quickly; without,
// after Redis's default 15s, as nothing could take over.
func StartCluster(tb testing.TB, masters, replicas int) *Cluster {
	tb.Helper()
	return StartClusterWith(tb, masters, replicas, Options{})
}

// StartClusterWith starts a cluster like StartCluster, each node run as
// opts say; over TLS, one authority signs every node's certificate.
func StartClusterWith(tb testing.TB, masters, replicas int, opts Options) *Cluster {
	tb.Helper()
	cli := binary(tb, "redis-cli")
	c := &Cluster{}
	var login []string // redis-cli's arguments to reach a node
	if opts.Password != "" {
		login = append(login, "-a", opts.Password, "--no-auth-warning")
	}
	if opts.TLS {
		ca, err := newAuthority(tb.TempDir())
		if err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		opts.authority = ca
		login = append(login, "--tls", "--cacert", ca.caFile, "--cert", ca.certFile, "--key", ca.keyFile)
	}
	// A node that misses pings for the timeout is failed by the others;
	// with no replica to take over, the cluster answers CLUSTERDOWN until
	// it is back. On a loaded machine (two cores, tests under -race beside
	// it) a node has stalled past one second: TestSuiteCluster then failed
	// 1 run in 10 with "CLUSTERDOWN The cluster is down", though no node
	// was ever killed. Only a failover needs the short timeout.
	timeout := "15000"
	if replicas > 0 {
		timeout = "1000"
	}
	opts.Args = append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", timeout, "--cluster-replica-validity-factor", "0"}, opts.Args...)
	for range masters * (1 + replicas) {
		s := start(tb, true, opts)
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	args := append(login, "--cluster", "create")
	args = append(args, c.Addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitOK(tb)
	return c
}

// WaitOK waits, up to 30 seconds, until every running node reports
// cluster_state:ok and knows a master for every slot, and every replica's
// link to its master is up: a replica promoted before its first sync would
// come up empty.
func (c *Cluster) WaitOK(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		bad := c.notOK()
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: cluster not ok after 30s: %s", bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// notOK names a node that is running but not yet ok, or returns "".
func (c *Cluster) notOK() string {
	for _, s := range c.Nodes {
		if !s.running() {
			continue
		}
		if bad := nodeNotOK(s); bad != "" {
			return bad
		}
	}
	return ""
}

// nodeNotOK says why one node is not ready, or returns "".
func nodeNotOK(s *Server) string {
	addr := s.Addr
	opt := s.ClientOptions()
	opt.MaxRetries = -1
	cl := redis.NewClient(opt)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return addr + ": " + err.Error()
	}
	if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
		return addr + " is not ok yet"
	}
	repl, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return addr + ": " + err.Error()
	}
	if strings.Contains(repl, "role:slave") &&
		(!strings.Contains(repl, "master_link_status:up") || !strings.Contains(repl, "master_sync_in_progress:0")) {
		return addr + " has not synced with its master yet"
	}
	return ""
}

// Client returns a cluster client logged in as the nodes' default user,
// closed when the test ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cl := redis.NewClusterClient(c.ClientOptions())
	tb.Cleanup(func() { _ = cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.Ping(ctx).Err()
	}); err != nil {
		tb.Fatalf("redistest: cluster client: %v", err)
	}
	return cl
}

// ClientOptions are the options of a cluster client logged in as the
// nodes' default user, over TLS when they speak TLS.
func (c *Cluster) ClientOptions() *redis.ClusterOptions {
	node := c.Nodes[0].ClientOptions()
	return &redis.ClusterOptions{Addrs: c.Addrs, Password: node.Password, TLSConfig: node.TLSConfig}
}

// SetUser runs ACL SETUSER with rules on every node: Redis keeps users
// per node, and a replica that takes over must know them too.
func (c *Cluster) SetUser(tb testing.TB, rules ...string) {
	tb.Helper()
	for _, s := range c.Nodes {
		s.SetUser(tb, rules...)
	}
}
