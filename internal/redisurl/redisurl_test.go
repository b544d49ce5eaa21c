package redisurl

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestClientKinds(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want string // "server", "cluster" or "sentinel"
	}{
		{"redis://127.0.0.1:6379", "server"},
		{"127.0.0.1:6379", "server"},
		{"rediss://u:p@redis:6380/2", "server"},
		{"redis://a:1,redis://b:2", "cluster"},
		{"a:1, b:2 ,c:3", "cluster"},
		{"redis://s1:26379?master_name=m&addr=s2:26379&addr=s3:26379", "sentinel"},
		{"rediss://:p@s1:26379/1?master_name=m&password=q", "sentinel"},
	} {
		c, err := Client(tc.spec)
		if err != nil {
			t.Errorf("Client(%q): %v", tc.spec, err)
			continue
		}
		got := "server"
		switch cl := c.(type) {
		case *redis.ClusterClient:
			got = "cluster"
		case *redis.Client:
			if cl.Options().Addr == "FailoverClient" {
				got = "sentinel"
			}
		}
		if got != tc.want || IsSentinel(tc.spec) != (tc.want == "sentinel") {
			t.Errorf("Client(%q) is a %s (IsSentinel %v), want a %s", tc.spec, got, IsSentinel(tc.spec), tc.want)
		}
		c.Close()
	}
}

// TestSentinelURLAsGoRedisReadsIt: the sentinels are the host and every
// addr; the user part logs in to the sentinels, the query's password to
// the master; TLS with rediss://.
func TestSentinelURLAsGoRedisReadsIt(t *testing.T) {
	spec := "rediss://sam:sentpw@s1:26379/3?master_name=orders&addr=s2:26380&addr=s3:26381&password=masterpw"
	o, err := redis.ParseFailoverURL(spec)
	if err != nil {
		t.Fatal(err)
	}
	if o.MasterName != "orders" || strings.Join(o.SentinelAddrs, " ") != "s1:26379 s2:26380 s3:26381" ||
		o.SentinelUsername != "sam" || o.SentinelPassword != "sentpw" || o.Password != "masterpw" || o.DB != 3 || o.TLSConfig == nil {
		t.Errorf("ParseFailoverURL(%q) = %+v", spec, o)
	}
	if got, want := Describe(spec), `Sentinel master set "orders" (sentinels s1:26379, s2:26380, s3:26381, over TLS)`; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

// TestNoPasswordPrinted: what is printed of a URL, and every error about
// one, hides its passwords, in the user part and in the query.
func TestNoPasswordPrinted(t *testing.T) {
	for _, spec := range []string{
		"redis://tollgate:hunter2@redis:6379",
		"redis://:hunter2@a:1,redis://:hunter2@b:2",
		"redis://:hunter2@s1:26379?master_name=m&password=hunter2&addr=s2:1",
		"redis://:hunter2@s1:26379?master_name=m&password=hunter2&bogus=1", // an unknown parameter
		"redis://:hunter2@s1:26379?master_name=m&password=hunter2&dial_timeout=x",
		"redis://:hunter2@s1:26379/notadb?master_name=m",
		"redis://:hunter2@redis:6379/notadb",
		"redis://:hunter2@redis:6379?password=hunter2",
		"redis://:hunter2@a:1,redis://:hunter2@b:2?master_name=m", // a Sentinel URL in a list
	} {
		if d := Describe(spec); strings.Contains(d, "hunter2") {
			t.Errorf("Describe(%q) = %q", spec, d)
		}
		c, err := Client(spec)
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Client(%q): %v", spec, err)
		}
		if c != nil {
			c.Close()
		}
	}
	if _, err := Client("redis://s1:26379?master_name="); err == nil {
		t.Error("an empty master_name was taken")
	}
}
