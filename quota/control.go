package quota

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/keyscan"
	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/quota/internal/access"
)

// The kill switch. A pause stops decisions in Redis (see Pause); a process
// spending from a lease, or remembering refusals, asks Redis nothing and
// would not see it. So PauseBecause and ops.Operator.Resume also tell
// every process listening (see Listen) on a Redis channel, and a tool can
// wait until each has acknowledged applying what it was told
// (ops.Operator.Confirm).

// Paused is a pause as Redis holds it.
type Paused struct {
	// Until is when spending may resume, on the limiter's clock; zero when
	// no pause is in force.
	Until time.Time
	// Reason is why, as the pause's writer said, e.g. "deploy rollback";
	// empty when it said nothing.
	Reason string
	// Upstream reports a pause set for an upstream's answer (Pause, or
	// tollgate's Transport for a 429), e.g. a 429; false for an
	// operator's (PauseBecause).
	Upstream bool
}

// PauseBecause pauses bucket in scope (the whole scope for bucket "") as
// Pause does, keeping reason beside the pause for tools such as
// cmd/tollgate to show, and tells every process listening (see Listen). A
// shorter pause never cuts a longer one short: the pause in force, with
// its own reason, stays, and is returned. A reason is plain text of at
// most 200 bytes, and never a secret.
func (l *Limiter) PauseBecause(ctx context.Context, scope, bucket string, d time.Duration, reason string) (Paused, error) {
	return l.pauseFor(ctx, scope, bucket, d, reason, false)
}

// pauseUpstream pauses bucket in scope as PauseBecause does, for an
// upstream's answer (a 429, YouTube's quotaExceeded): the pause's Upstream
// is set, so that refusals during it say the upstream's pause, not an
// operator's. The reason says what the upstream answered, e.g. "the
// upstream answered 429 to search.list".
func (l *Limiter) pauseUpstream(ctx context.Context, scope, bucket string, d time.Duration, reason string) (Paused, error) {
	return l.pauseFor(ctx, scope, bucket, d, reason, true)
}

// pauseFor is PauseBecause and pauseUpstream.
func (l *Limiter) pauseFor(ctx context.Context, scope, bucket string, d time.Duration, reason string, upstream bool) (Paused, error) {
	if err := l.check(scope); err != nil {
		return Paused{}, err
	}
	if d <= 0 {
		return Paused{}, invalid("pause "+d.String(), "duration must be positive")
	}
	if len(reason) > quotapath.MaxReason || !utf8.ValidString(reason) {
		return Paused{}, invalid("pause reason", "must be valid UTF-8 of at most "+strconv.Itoa(quotapath.MaxReason)+" bytes")
	}
	key := pauseKey(l.scopeKey(scope), bucket)
	up := ""
	if upstream {
		up = "1"
	}
	v, err := l.control(ctx, "pause", scope, bucket, []string{key, key + ":why", key + "-up"}, d.Microseconds(), reason, up)
	if err != nil {
		return Paused{}, err
	}
	list, _ := v.([]any)
	if len(list) != 4 {
		return Paused{}, &RedisError{Op: "pause", Err: errReply(v)}
	}
	until, ok1 := list[0].(int64)
	why, ok2 := list[1].(string)
	byUp, ok3 := list[3].(int64)
	if !ok1 || !ok2 || !ok3 {
		return Paused{}, &RedisError{Op: "pause", Err: errReply(v)}
	}
	return Paused{Until: time.UnixMicro(until), Reason: why, Upstream: byUp == 1}, nil
}

// resume is ops.Operator.Resume: it lifts the pause of bucket in scope,
// or for bucket "" the scope's pause and the pause of every bucket in it, whoever set them (an
// upstream's 429 included), and tells every process listening. It returns
// the number of pauses lifted.
func (l *Limiter) resume(ctx context.Context, scope, bucket string) (int, error) {
	if err := l.check(scope); err != nil {
		return 0, err
	}
	sk := l.scopeKey(scope)
	keys := []string{pauseKey(sk, bucket), pauseKey(sk, bucket) + ":why", pauseKey(sk, bucket) + "-up"}
	if bucket == "" {
		found, err := l.scanScope(ctx, scope, keyscan.Glob(sk)+"*:pause")
		if err != nil {
			return 0, err
		}
		for _, k := range found {
			if k != keys[0] {
				keys = append(keys, k, k+":why", k+"-up")
			}
		}
	}
	v, err := l.control(ctx, "resume", scope, bucket, keys)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, &RedisError{Op: "resume", Err: errReply(v)}
	}
	return int(n), nil
}

// PauseOf reads the pause of bucket in scope (of the whole scope for
// bucket ""), writing nothing: its Until is zero when none is set.
func (l *Limiter) PauseOf(ctx context.Context, scope, bucket string) (Paused, error) {
	_, p, err := l.pauseAmong(ctx, scope, bucket)
	return p, err
}

// pauseAmong reads, in one round trip and writing nothing, the pauses of
// scope and of its buckets, and returns the one that ends last with its
// bucket ("" for the scope's own): e.g. for a call about to be sent after
// a wait, whether anything now stops it. Its Until is zero when none is
// set.
func (l *Limiter) pauseAmong(ctx context.Context, scope string, buckets ...string) (string, Paused, error) {
	if err := l.check(scope); err != nil {
		return "", Paused{}, err
	}
	sk := l.scopeKey(scope)
	if len(buckets) == 0 {
		buckets = []string{""}
	}
	// One slot: the scope's hash tag. GETs in a pipeline, not an MGET,
	// which a cluster client may refuse to split.
	type read struct{ until, why, up *redis.StringCmd }
	reads := make([]read, len(buckets))
	_, _ = l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range buckets {
			key := pauseKey(sk, b)
			reads[i] = read{p.Get(ctx, key), p.Get(ctx, key+":why"), p.Get(ctx, key+"-up")}
		}
		return nil
	})
	var found string
	var last Paused
	for i, r := range reads {
		key := pauseKey(sk, buckets[i])
		v, err := r.until.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return "", Paused{}, redisError(ctx, "pause", err)
		}
		us, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || us <= 0 || strings.Trim(v, "0123456789") != "" {
			return "", Paused{}, &formatError{msg: key + " holds a pause of a Redis format this tollgate cannot read"}
		}
		p := Paused{Until: time.UnixMicro(us)}
		if w, err := r.why.Result(); err == nil {
			if at, text, ok := strings.Cut(w, ":"); ok && at == v {
				p.Reason = text
			}
		}
		if u, err := r.up.Result(); err == nil && u == v {
			p.Upstream = true
		}
		if p.Until.After(last.Until) {
			found, last = buckets[i], p
		}
	}
	return found, last, nil
}

// control runs control.lua, telling the notice on the control channel.
func (l *Limiter) control(ctx context.Context, op, scope, bucket string, keys []string, extra ...any) (any, error) {
	_, clockArg := l.clockArg()
	id := l.entryID(l.seq.Add(1))
	b := ""
	if bucket != "" {
		b = keyPart(bucket)
	}
	args := append([]any{clockArg, op, l.controlChannel(), id, keyPart(scope), b}, extra...)
	l.told.record(told{id: id, resume: op == "resume", scope: keyPart(scope), bucket: b})
	v, err := controlScript.Run(ctx, l.client, keys, args...).Result()
	if err != nil {
		return nil, redisError(ctx, op, err)
	}
	return v, nil
}

// controlChannel carries the notices; appliedChannel their
// acknowledgements.
func (l *Limiter) controlChannel() string { return l.prefix + "control" }
func (l *Limiter) appliedChannel() string { return l.prefix + "control:applied" }

// confirm is ops.Operator.Confirm: it runs act, which pauses or resumes
// through this limiter, and waits until every process listening has
// acknowledged applying each notice act told, or wait has passed, or ctx ends: for an operator's
// tool, so that when it returns, every process spending from a lease or
// remembering a refusal (or, for tollgate's Transports, with requests
// waiting) has seen what it did. The processes not listening hold none of
// these, and see pauses in Redis at their next decision. Then it tells
// that each resume was applied (Notice.Confirmed). Run one
// confirm at a time per limiter, and no other pause while it runs: it
// counts the notices this limiter tells.
func (l *Limiter) confirm(ctx context.Context, wait time.Duration, act func(ctx context.Context) error) (access.Reach, error) {
	listening, err := l.listening(ctx)
	if err != nil {
		return access.Reach{}, err
	}
	var acks <-chan *redis.Message
	if listening > 0 {
		ps := l.client.Subscribe(ctx, l.appliedChannel())
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			return access.Reach{}, redisError(ctx, "confirm", err)
		}
		acks = ps.Channel()
	}
	ids := l.told.start()
	err = act(ctx)
	told := ids()
	if err != nil || listening == 0 || len(told) == 0 {
		return access.Reach{Listening: listening}, err
	}
	defer l.confirmResumes(ctx, told)
	want := make(map[string]int, len(told))
	for _, t := range told {
		want[t.id] = 0
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for done := 0; done < len(told); {
		select {
		case m, ok := <-acks:
			if !ok {
				return access.Reach{Listening: listening, Applied: fewest(want)}, nil
			}
			if n, mine := want[m.Payload]; mine {
				want[m.Payload] = n + 1
				if n+1 == listening {
					done++
				}
			}
		case <-timer.C:
			return access.Reach{Listening: listening, Applied: fewest(want)}, nil
		case <-ctx.Done():
			return access.Reach{Listening: listening, Applied: fewest(want)}, ctx.Err()
		}
	}
	return access.Reach{Listening: listening, Applied: min(fewest(want), listening)}, nil
}

// confirmResumes tells, once confirm has done waiting, that the resumes
// it counted were applied (Notice.Confirmed): a Transport's requests that
// a resume made give their holds back decide again only then, so that none
// is placed behind a hold another process is about to give back.
func (l *Limiter) confirmResumes(ctx context.Context, told []told) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for _, t := range told {
		if t.resume {
			// Best effort: a process that never hears it decides again a
			// little later on its own (tollgate's Transport: 2s).
			_ = l.client.Publish(ctx, l.controlChannel(), "resumed "+t.id+" 0 "+t.scope+" "+t.bucket).Err()
		}
	}
}

// fewest is the fewest acknowledgements any notice had.
func fewest(acks map[string]int) int {
	n := -1
	for _, a := range acks {
		if n < 0 || a < n {
			n = a
		}
	}
	return max(n, 0)
}

// listening counts the subscribers of the control channel on every node:
// a cluster counts a node's own subscribers only.
func (l *Limiter) listening(ctx context.Context) (int, error) {
	var mu sync.Mutex
	total := 0
	count := func(ctx context.Context, c redis.UniversalClient) error {
		m, err := c.PubSubNumSub(ctx, l.controlChannel()).Result()
		if err != nil {
			return err
		}
		mu.Lock()
		total += int(m[l.controlChannel()])
		mu.Unlock()
		return nil
	}
	var err error
	switch c := l.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return count(ctx, n) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return count(ctx, n) })
	default:
		err = count(ctx, c)
	}
	if err != nil {
		return 0, redisError(ctx, "confirm", err)
	}
	return total, nil
}

// told is a notice a limiter told: its id, whether it was a resume, and
// its scope and bucket as keys name them.
type told struct {
	id            string
	resume        bool
	scope, bucket string
}

// toldIDs records the notices a limiter tells while confirm runs.
type toldIDs struct {
	mu  sync.Mutex
	ids *[]told // nil when nobody records
}

func (t *toldIDs) record(n told) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ids != nil {
		*t.ids = append(*t.ids, n)
	}
}

// start records from now, and returns the function that stops and
// returns what was recorded.
func (t *toldIDs) start() func() []told {
	var ids []told
	t.mu.Lock()
	t.ids = &ids
	t.mu.Unlock()
	return func() []told {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.ids = nil
		return ids
	}
}
