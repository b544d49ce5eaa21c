package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartReplica starts a redis-server replicating s (which speaks plain
// TCP), logged in to it as its default user, and waits until it has
// synced; after a Kill, Restart brings it back as a replica of s.
func (s *Server) StartReplica(tb testing.TB) *Server {
	tb.Helper()
	if s.TLS != nil {
		tb.Fatal("redistest: StartReplica of a TLS server is not supported")
	}
	r := start(tb, false, Options{Password: s.Password, Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(s.Port)}})
	s.WaitOnline(tb, r)
	return r
}

// WaitOnline waits, up to 10 seconds, until replica has synced with s and
// s counts it online. After a diskless sync a master puts its replica
// online only at the replica's first acknowledgement, up to a second
// later; until then a WAIT on the master does not count it.
func (s *Server) WaitOnline(tb testing.TB, replica *Server) {
	tb.Helper()
	replica.WaitSynced(tb)
	c := redis.NewClient(s.ClientOptions())
	defer c.Close()
	online := "port=" + strconv.Itoa(replica.Port) + ",state=online"
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "replication").Result()
		cancel()
		if err == nil && strings.Contains(info, online) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: %s does not count replica %s online after 10s: %v %s", s.Addr, replica.Addr, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitSynced waits, up to 10 seconds, until the replica's link to its
// master is up and its first sync is done.
func (s *Server) WaitSynced(tb testing.TB) {
	tb.Helper()
	c := redis.NewClient(s.ClientOptions())
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.Info(ctx, "replication").Result()
		cancel()
		if err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: replica %s not synced after 10s: %v %s", s.Addr, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ReplicaOf returns the running node that replicates the node at addr, or
// nil when none does.
func (c *Cluster) ReplicaOf(tb testing.TB, addr string) *Server {
	tb.Helper()
	_, port, _ := strings.Cut(addr, ":")
	for _, s := range c.Nodes {
		if !s.running() {
			continue
		}
		cl := redis.NewClient(s.ClientOptions())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := cl.Info(ctx, "replication").Result()
		cancel()
		cl.Close()
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+port+"\r") {
			return s
		}
	}
	return nil
}

// ReadOnlyClient returns a client of a cluster replica that may read the
// keys of the slots it replicates (READONLY on every connection), closed
// when the test ends.
func (s *Server) ReadOnlyClient(tb testing.TB) *redis.Client {
	tb.Helper()
	opt := s.ClientOptions()
	opt.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
	c := redis.NewClient(opt)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// WaitReplicasSynced waits until every running replica of the cluster has
// synced with its master and its master counts it online (see
// WaitOnline): a cluster reports ok before then, and a WAIT counts only
// the replicas that are online.
func (c *Cluster) WaitReplicasSynced(tb testing.TB) {
	tb.Helper()
	for _, s := range c.Nodes {
		if !s.running() {
			continue
		}
		cl := redis.NewClient(s.ClientOptions())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := cl.Info(ctx, "replication").Result()
		cancel()
		cl.Close()
		if err != nil {
			tb.Fatalf("redistest: INFO replication on %s: %v", s.Addr, err)
		}
		if !strings.Contains(info, "role:slave") {
			continue
		}
		var master *Server
		for _, m := range c.Nodes {
			if strings.Contains(info, "master_port:"+strconv.Itoa(m.Port)+"\r") {
				master = m
			}
		}
		if master == nil {
			tb.Fatalf("redistest: the master of replica %s is no node of the cluster: %s", s.Addr, info)
		}
		master.WaitOnline(tb, s)
	}
}
