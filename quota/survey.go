package quota

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/keyscan"
	"github.com/tollgate/tollgate/quota/internal/access"
)

// storedScope and storedBucket are ops.StoredScope and ops.StoredBucket,
// as package access carries them to package ops.
type (
	storedScope  = access.StoredScope[Description]
	storedBucket = access.StoredBucket[Description]
)

// survey is ops.Operator.Survey: it lists every scope and bucket that has
// keys under the limiter's prefix, with SCAN on every node (never KEYS), and reads their
// descriptions; for a non-empty scope, that scope alone (matched by its
// name, or by the "#" hash a StoredScope shows), scanning its node only.
// It returns nothing, and no error, when there are no such keys. A
// bucket's gate while its limit is learned is not listed.
func (l *Limiter) survey(ctx context.Context, scope string) ([]storedScope, error) {
	match := keyscan.Glob(l.prefix) + "{*}:*"
	var keys []string
	var err error
	if scope != "" {
		part := keyPart(scope)
		if strings.HasPrefix(scope, "#") {
			part = scope // a hash, as survey shows it
		}
		keys, err = l.scanSlot(ctx, l.prefix+"{"+part+"}:", keyscan.Glob(l.prefix+"{"+part+"}:")+"*")
	} else {
		keys, err = l.scanAll(ctx, match)
	}
	if err != nil {
		return nil, redisError(ctx, "survey", err)
	}
	type bucketKeys struct {
		b     storedBucket
		about string
	}
	type scopeKeys struct {
		s       storedScope
		buckets map[string]*bucketKeys
	}
	scopes := map[string]*scopeKeys{}
	for _, k := range keys {
		part, rest, ok := splitKey(l.prefix, k)
		if !ok {
			continue
		}
		sc := scopes[part]
		if sc == nil {
			sc = &scopeKeys{s: storedScope{Scope: part, Hashed: strings.HasPrefix(part, "#")}, buckets: map[string]*bucketKeys{}}
			scopes[part] = sc
		}
		switch rest {
		case "pause":
			sc.s.Paused = true
			continue
		case "pause:why", "background", "background:alive", "background:n":
			continue
		}
		bucket, suffix, ok := strings.Cut(rest, ":")
		if !ok || bucket == "" {
			continue
		}
		bk := sc.buckets[bucket]
		if bk == nil {
			bk = &bucketKeys{b: storedBucket{Bucket: bucket}}
			sc.buckets[bucket] = bk
		}
		switch {
		case suffix == "about":
			bk.about = k
		case suffix == "pause":
			bk.b.Paused = true
		case suffix == "announced":
			bk.b.Announced = true
		case suffix == "slots" || strings.HasPrefix(suffix, "slots:"):
			bk.b.Slots = true
		case strings.HasSuffix(suffix, ":log") || strings.HasSuffix(suffix, ":meta") || strings.HasSuffix(suffix, ":sum") ||
			strings.HasSuffix(suffix, ":tat"): // a token bucket's
			w := suffix[:strings.LastIndexByte(suffix, ':')]
			if !slices.Contains(bk.b.Windows, w) {
				bk.b.Windows = append(bk.b.Windows, w)
			}
		}
	}
	// Read the descriptions, in one round trip per node.
	var abouts []*bucketKeys
	for _, sc := range scopes {
		for _, bk := range sc.buckets {
			if bk.about != "" {
				abouts = append(abouts, bk)
			}
		}
	}
	if len(abouts) > 0 {
		cmds := make([]*redis.StringCmd, len(abouts))
		_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, bk := range abouts {
				cmds[i] = p.Get(ctx, bk.about)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) && ctx.Err() != nil {
			return nil, redisError(ctx, "survey", err)
		}
		for i, bk := range abouts {
			v, err := cmds[i].Bytes()
			if errors.Is(err, redis.Nil) {
				continue // expired since the scan
			}
			if err != nil {
				return nil, redisError(ctx, "survey", err)
			}
			d, err := readDescription(bk.about, v)
			if err != nil {
				bk.b.Err = err // this bucket's alone: the others are read
				continue
			}
			bk.b.Description = &d
		}
	}
	out := make([]storedScope, 0, len(scopes))
	for _, sc := range scopes {
		for part, bk := range sc.buckets {
			if strings.HasPrefix(part, "learn.") && bk.b.Slots && len(bk.b.Windows) == 0 && bk.about == "" && !bk.b.Paused {
				continue // a bucket's gate while its limit is learned
			}
			if d := bk.b.Description; d != nil {
				bk.b.Bucket = d.Bucket
				if sc.s.Hashed {
					sc.s.Scope, sc.s.Hashed = d.Scope, false
				}
			}
			sc.s.Buckets = append(sc.s.Buckets, bk.b)
		}
		slices.SortFunc(sc.s.Buckets, func(a, b storedBucket) int { return strings.Compare(a.Bucket, b.Bucket) })
		for i := range sc.s.Buckets {
			slices.Sort(sc.s.Buckets[i].Windows)
		}
		out = append(out, sc.s)
	}
	slices.SortFunc(out, func(a, b storedScope) int { return strings.Compare(a.Scope, b.Scope) })
	return out, nil
}

// splitKey splits a key under prefix into its scope part (inside the
// braces) and the rest, after "}:".
func splitKey(prefix, key string) (part, rest string, ok bool) {
	s, ok := strings.CutPrefix(key, prefix+"{")
	if !ok {
		return "", "", false
	}
	part, rest, ok = strings.Cut(s, "}:")
	return part, rest, ok && part != ""
}

// scanAll returns the keys matching a pattern on every node.
func (l *Limiter) scanAll(ctx context.Context, match string) ([]string, error) {
	return keyscan.All(ctx, l.client, match)
}

// scanSlot returns the keys matching a pattern on the node holding key.
func (l *Limiter) scanSlot(ctx context.Context, key, match string) ([]string, error) {
	switch c := l.client.(type) {
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return keyscan.Node(ctx, n, match)
	case *redis.Ring:
		return l.scanAll(ctx, match)
	}
	return keyscan.Node(ctx, l.client, match)
}

// scanScope returns the keys of scope matching a pattern.
func (l *Limiter) scanScope(ctx context.Context, scope, match string) ([]string, error) {
	keys, err := l.scanSlot(ctx, l.scopeKey(scope), match)
	if err != nil {
		return nil, redisError(ctx, "scan", err)
	}
	return keys, nil
}
