// Package redisurl reads the Redis URLs that tollgate's commands and
// examples take (-redis, TOLLGATE_REDIS, the gateway's redis field) and
// says what they name without their passwords.
//
// Three kinds of URL are read:
//
//   - redis://[user:password@]host:port[/db] (rediss:// for TLS), or a bare
//     host:port: one server, as redis.ParseURL reads it;
//   - several of those separated by commas: the nodes of a Redis Cluster,
//     one credential for all;
//   - a URL whose query names master_name: a Sentinel URL, as
//     redis.ParseFailoverURL reads it,
//     redis://[user:password@]SENTINEL:PORT?master_name=NAME&addr=SENTINEL2:PORT&addr=...
//     The host and each addr are sentinels; the user and password in the
//     URL are the sentinels', and the master's and replicas' are the query's
//     username and password (go-redis's reading).
package redisurl

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/quota"
)

// The client settings every kind of URL gets, so that an unreachable Redis
// is noticed within seconds and the outage mode takes over.
const (
	dialTimeout   = 2 * time.Second
	dialerRetries = 1
	maxRetries    = 1
)

// IsSentinel reports whether spec is a Sentinel URL: one URL whose query
// names master_name.
func IsSentinel(spec string) bool {
	spec = strings.TrimSpace(spec)
	if strings.Contains(spec, ",") || !strings.Contains(spec, "://") {
		return false
	}
	u, err := url.Parse(spec)
	return err == nil && u.Query().Has("master_name")
}

// Client returns a client for spec: a *redis.Client for one server or a
// Sentinel URL (a failover client, which follows the master Sentinel
// names), a *redis.ClusterClient for several URLs. Its errors never quote
// a password.
func Client(spec string) (redis.UniversalClient, error) {
	if IsSentinel(spec) {
		o, err := redis.ParseFailoverURL(strings.TrimSpace(spec))
		if err != nil {
			return nil, errors.New(hide(err.Error(), spec))
		}
		if o.MasterName == "" {
			return nil, errors.New("the Sentinel URL's master_name is empty")
		}
		o.DialTimeout, o.DialerRetries, o.MaxRetries = dialTimeout, dialerRetries, maxRetries
		return redis.NewFailoverClient(o), nil
	}
	items := split(spec)
	if len(items) == 0 {
		return nil, errors.New("no Redis URL")
	}
	var opts []*redis.Options
	for i, u := range items {
		if IsSentinel(u) {
			return nil, fmt.Errorf("item %d is a Sentinel URL (master_name): give it alone, not in a list", i+1)
		}
		o, err := options(u)
		if err != nil {
			if len(items) > 1 {
				return nil, fmt.Errorf("item %d: %v", i+1, err)
			}
			return nil, err
		}
		opts = append(opts, o)
	}
	if len(opts) == 1 {
		return redis.NewClient(opts[0]), nil
	}
	co := &redis.ClusterOptions{DialTimeout: dialTimeout, DialerRetries: dialerRetries, MaxRetries: maxRetries}
	for _, o := range opts {
		co.Addrs = append(co.Addrs, o.Addr)
		co.Username, co.Password, co.TLSConfig = o.Username, o.Password, o.TLSConfig
	}
	return redis.NewClusterClient(co), nil
}

// options reads one server's URL, or a bare host:port.
func options(raw string) (*redis.Options, error) {
	if !strings.Contains(raw, "://") {
		raw = "redis://" + raw
	}
	if _, err := url.Parse(raw); err != nil {
		// url's errors quote the URL, password and all.
		return nil, errors.New("not a URL")
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, errors.New(hide(err.Error(), raw))
	}
	if strings.HasPrefix(raw, "rediss://") && o.TLSConfig == nil {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	o.DialTimeout, o.DialerRetries, o.MaxRetries = dialTimeout, dialerRetries, maxRetries
	return o, nil
}

// Describe returns spec as it may be printed: a server's or a cluster's
// URLs without their passwords, e.g. redis://tollgate:xxxxx@redis:6379; a
// Sentinel URL as the master set it names and its sentinels, e.g.
// `Sentinel master set "mymaster" (sentinels 10.0.0.1:26379, 10.0.0.2:26379)`.
func Describe(spec string) string {
	if IsSentinel(spec) {
		u, _ := url.Parse(strings.TrimSpace(spec)) // IsSentinel parsed it
		sentinels := []string{u.Host}
		sentinels = append(sentinels, u.Query()["addr"]...)
		tls := ""
		if u.Scheme == "rediss" {
			tls = ", over TLS"
		}
		return fmt.Sprintf("Sentinel master set %q (sentinels %s%s)", u.Query().Get("master_name"), strings.Join(sentinels, ", "), tls)
	}
	parts := split(spec)
	for i, p := range parts {
		parts[i] = redact(p)
	}
	return strings.Join(parts, ",")
}

// secretParams are the query parameters that carry a password.
var secretParams = []string{"password", "sentinel_password"}

// redact hides the password of one URL, in its user part and its query.
func redact(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw // host:port: no password
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	q := u.Query()
	changed := false
	for _, k := range secretParams {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// hide replaces every password spec carries in msg.
func hide(msg, spec string) string {
	for _, item := range split(spec) {
		u, err := url.Parse(item)
		if err != nil {
			continue
		}
		var secrets []string
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p, url.QueryEscape(p))
		}
		for _, k := range secretParams {
			for _, v := range u.Query()[k] {
				secrets = append(secrets, v, url.QueryEscape(v))
			}
		}
		for _, s := range secrets {
			if s != "" {
				msg = strings.ReplaceAll(msg, s, "xxxxx")
			}
		}
	}
	return msg
}

// split splits a comma-separated list, dropping empty items and spaces.
func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// NoReplica explains err, a failed quota.Limiter.Ping on the master a
// Sentinel URL names while the master itself answers: it has fewer
// replicas than the limiter waits for.
func NoReplica(spec string, err error) error {
	return fmt.Errorf("%s: %v: with a Sentinel URL, tollgate answers each decision once a replica holds it (quota.WithReplicas, within %v), so that a failover loses none; give the master a replica",
		Describe(spec), err, quota.DefaultReplicaTimeout)
}
