package redistest

import (
	"context"
	"slices"
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
// acknowledges s's writes: until a WAIT on s would count it. A master that
// counts its replica online is not yet enough: after a diskless sync,
// Redis 7 holds back the stream of writes until the replica's first
// acknowledgement, which the replica sends once a second, and until then
// a WAIT times out. So WaitOnline writes on s (a key of its own, set and
// deleted at once, in a slot s serves when s is in a cluster) and waits
// until the offset replica acknowledges reaches s's offset after that
// write. It runs no WAIT itself, so that Calls counts only the tests'.
func (s *Server) WaitOnline(tb testing.TB, replica *Server) {
	tb.Helper()
	replica.WaitSynced(tb)
	c := redis.NewClient(s.ClientOptions())
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	var (
		target int64 = -1 // s's offset after the write, once made
		info   string
		err    error
	)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if online, _ := replicaOffset(info, replica.Port); target < 0 && online {
			err = writeOwnKey(ctx, c)
			info = ""
			if err == nil {
				info, err = c.Info(ctx, "replication").Result()
				target = infoInt(info, "master_repl_offset")
			}
		} else {
			info, err = c.Info(ctx, "replication").Result()
		}
		cancel()
		if online, acked := replicaOffset(info, replica.Port); err == nil && online && target >= 0 && acked >= target {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: replica %s does not acknowledge %s's writes (offset %d) after 10s: %v %s", replica.Addr, s.Addr, target, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// onlineKey names the key WaitOnline writes; a cluster node takes it with
// a hash tag (the number) that falls in one of its slots.
const onlineKey = "redistest:online:{"

// writeOwnKey sets and deletes a key on c's server, trying hash tags until
// one is in a slot of the server's when it is a cluster node: two writes
// in the stream of writes its replicas receive.
func writeOwnKey(ctx context.Context, c *redis.Client) error {
	var err error
	for i := range 1000 {
		key := onlineKey + strconv.Itoa(i) + "}"
		if err = c.Set(ctx, key, "1", 0).Err(); err == nil {
			return c.Del(ctx, key).Err()
		}
		if !strings.HasPrefix(err.Error(), "MOVED ") {
			return err
		}
	}
	return err
}

// replicaOffset reads, in a master's INFO replication, whether it counts
// the replica on port online and the replication offset that replica has
// acknowledged ("slave0:ip=...,port=6380,state=online,offset=42,lag=0").
func replicaOffset(info string, port int) (online bool, acked int64) {
	for _, line := range strings.Split(info, "\n") {
		fields := strings.Split(strings.TrimSpace(line), ",")
		if !strings.HasPrefix(line, "slave") || !slices.Contains(fields, "port="+strconv.Itoa(port)) {
			continue
		}
		acked = -1
		for _, f := range fields {
			if v, ok := strings.CutPrefix(f, "offset="); ok {
				acked, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		return slices.Contains(fields, "state=online"), acked
	}
	return false, -1
}

// infoInt reads field's value in INFO output, or -1.
func infoInt(info, field string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
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
