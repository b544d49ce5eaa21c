package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// upstreamJSON is a working youtube upstream, for configurations that
// break something else.
const upstreamJSON = `{"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": "https://youtube.googleapis.com/youtube", "key_env": "YT_KEY"}`

// TestLoadErrors: every configuration that cannot work is one line,
// naming what is wrong, and never a secret.
func TestLoadErrors(t *testing.T) {
	withUpstream := func(fields string) string {
		return `{"callers": [{"name": "php", "token_env": "TOKEN_PHP"}], "upstreams": [{"name": "up", "prefix": "/up/", "target": "https://api.example.com", "key_env": "YT_KEY", ` + fields + `}]}`
	}
	cases := []struct{ name, json, want string }{
		{"bad JSON", `{"upstreams": [`, "reading the configuration"},
		{"not an object", `[]`, "reading the configuration"},
		{"data after it", `{"upstreams": [` + upstreamJSON + `]} {}`, "data after"},
		{"unknown field", `{"upstream": []}`, `unknown field "upstream"`},
		{"unknown upstream field", withUpstream(`"provider": "youtube", "prefixes": "/x/"`), `unknown field "prefixes"`},
		{"no upstreams", `{}`, "no upstreams"},
		{"unknown provider", withUpstream(`"provider": "twitter"`), `unknown provider "twitter"`},
		{"unknown option", withUpstream(`"provider": "youtube", "options": {"quotas": 5}`), `unknown option "quotas"`},
		{"unknown openai option", withUpstream(`"provider": "openai", "options": {"rpm": 5, "tmp": 1}`), `unknown option "tmp"`},
		{"bad table", withUpstream(`"provider": "youtube", "options": {"table": "modern"}`), `table "modern"`},
		{"bad window", withUpstream(`"provider": "youtube", "options": {"window": "10"}`), `window "10"`},
		{"negative quota", withUpstream(`"provider": "youtube", "options": {"quota": -1}`), "option quota -1: must be positive"},
		{"option of the wrong type", withUpstream(`"provider": "youtube", "options": {"quota": "600"}`), "options"},
		{"bad minute", withUpstream(`"provider": "openai", "options": {"minute": "fast"}`), `minute "fast"`},
		{"unknown anthropic option", withUpstream(`"provider": "anthropic", "options": {"itpm": 5, "tpm": 1}`), `unknown option "tpm"`},
		{"unknown anthropic class option", withUpstream(`"provider": "anthropic", "options": {"classes": {"claude-haiku-4": {"rpd": 1}}}`), `unknown option "rpd"`},
		{"bad anthropic minute", withUpstream(`"provider": "anthropic", "options": {"minute": "4"}`), `minute "4"`},
		{"negative anthropic limit", withUpstream(`"provider": "anthropic", "options": {"classes": {"claude-haiku-4": {"otpm": -1}}}`), "otpm -1: must be positive"},
		{"anthropic cache_reads not a bool", withUpstream(`"provider": "anthropic", "options": {"cache_reads": {"claude-3-5-haiku": "yes"}}`), "options"},
		{"unset token_env", `{"callers": [{"name": "php", "token_env": "UNSET"}], "upstreams": [` + upstreamJSON + `]}`, "UNSET (token_env) is not set"},
		{"caller without token_env", `{"callers": [{"name": "php"}], "upstreams": [` + upstreamJSON + `]}`, "no token_env"},
		{"caller without name", `{"callers": [{"token_env": "TOKEN_PHP"}], "upstreams": [` + upstreamJSON + `]}`, "no name"},
		{"two callers, one token", `{"callers": [{"name": "a", "token_env": "TOKEN_PHP"}, {"name": "b", "token_env": "TOKEN_PHP"}], "upstreams": [` + upstreamJSON + `]}`, "same token"},
		{"a caller holding the key", `{"callers": [{"name": "a", "token_env": "YT_KEY"}], "upstreams": [` + upstreamJSON + `]}`, "upstream \"youtube\"'s key"},
		{"unset key_env", withUpstream(`"provider": "youtube", "key_env": "UNSET"`), "UNSET (key_env) is not set"},
		{"no key_env with callers", `{"callers": [{"name": "php", "token_env": "TOKEN_PHP"}], "upstreams": [{"name": "up", "provider": "youtube", "prefix": "/up/", "target": "https://a.example"}]}`, "no key_env"},
		{"prefix without leading slash", withUpstream(`"provider": "youtube", "prefix": "up/"`), `prefix "up/" must start and end with "/"`},
		{"prefix without trailing slash", withUpstream(`"provider": "youtube", "prefix": "/up"`), `prefix "/up" must start and end with "/"`},
		{"prefix with dot segment", withUpstream(`"provider": "youtube", "prefix": "/a/../b/"`), "dot segment"},
		{"same prefix twice", `{"upstreams": [` + upstreamJSON + `, ` + strings.Replace(upstreamJSON, `"youtube", "provider"`, `"yt2", "provider"`, 1) + `]}`, "same prefix"},
		{"same name twice", `{"upstreams": [` + upstreamJSON + `, ` + strings.Replace(upstreamJSON, `/youtube/"`, `/yt2/"`, 1) + `]}`, "two upstreams are named"},
		{"target not http", withUpstream(`"provider": "youtube", "target": "ftp://a.example"`), "http or https URL"},
		{"target with user", withUpstream(`"provider": "youtube", "target": "https://me:secret-pass@a.example"`), "no user"},
		{"bad policy", withUpstream(`"provider": "youtube", "policy": {"on_refusal": "retry"}`), `on_refusal "retry"`},
		{"bad outage", withUpstream(`"provider": "youtube", "policy": {"on_outage": "local"}`), `on_outage "local"`},
		{"bad max_wait", withUpstream(`"provider": "youtube", "policy": {"max_wait": "soon"}`), `max_wait "soon"`},
		{"unknown policy field", withUpstream(`"provider": "youtube", "policy": {"wait": "1s"}`), `unknown field "wait"`},
		{"costs for youtube", withUpstream(`"provider": "youtube", "costs": "x.json"`), "custom provider"},
		{"public_url not http", `{"public_url": "ftp://gw.example", "upstreams": [` + upstreamJSON + `]}`, "public_url"},
		{"public_url with a query", `{"public_url": "https://gw.example/?a=1", "upstreams": [` + upstreamJSON + `]}`, "public_url"},
		{"bad body_timeout", `{"limits": {"body_timeout": "0s"}, "upstreams": [` + upstreamJSON + `]}`, "body_timeout"},
		{"negative max_conns_per_client", `{"limits": {"max_conns_per_client": -1}, "upstreams": [` + upstreamJSON + `]}`, "max_conns_per_client"},
		{"negative max_buffered", `{"limits": {"max_buffered": -1}, "upstreams": [` + upstreamJSON + `]}`, "max_buffered"},
		{"a model without a name", withUpstream(`"provider": "openai", "options": {"models": ["gpt-4o", " "]}`), "models has an empty name"},
		{"models not a list", withUpstream(`"provider": "gemini", "options": {"models": "gemini-2.0-flash"}`), "options"},
		{"custom without costs", withUpstream(`"provider": "custom"`), "needs \"costs\""},
		{"custom costs missing", withUpstream(`"provider": "custom", "costs": "missing.json", "buckets": {}`), "missing.json"},
		{"custom without buckets", withUpstream(`"provider": "custom", "costs": "costs.json"`), "needs \"buckets\""},
		{"custom bucket missing", withUpstream(`"provider": "custom", "costs": "costs.json", "buckets": {"other": {"limits": [{"units": 1, "window": "1m"}]}}`), "pool"},
		{"custom bad window", withUpstream(`"provider": "custom", "costs": "costs.json", "buckets": {"pool": {"limits": [{"units": 1, "window": "week"}]}}`), `window "week"`},
		{"custom bad zone", withUpstream(`"provider": "custom", "costs": "costs.json", "buckets": {"pool": {"limits": [{"units": 1, "window": "day", "zone": "Mars/Base"}]}}`), `zone "Mars/Base"`},
		{"custom reserve all", withUpstream(`"provider": "custom", "costs": "costs.json", "buckets": {"pool": {"limits": [{"units": 10, "window": "1m"}], "reserve_percent": 100}}`), "reserve"},
		{"bad forwarded_for", `{"forwarded_for": "always", "upstreams": [` + upstreamJSON + `]}`, "forwarded_for"},
		{"bad limits", `{"limits": {"drain": "-1s"}, "upstreams": [` + upstreamJSON + `]}`, "drain"},
		{"shares lendable over 1", withUpstream(`"provider": "youtube", "shares": {"lendable": 2}`), "lendable"},
		{"shares weight 0", withUpstream(`"provider": "youtube", "shares": {"weights": {"php": 0}}`), `weight of "php"`},
		{"shares bad idle", withUpstream(`"provider": "youtube", "shares": {"idle": "a while"}`), "idle"},
		{"pace burst over 1", withUpstream(`"provider": "youtube", "pace": {"burst": 1.5}`), "burst"},
		{"shares on openai", withUpstream(`"provider": "openai", "shares": {}`), "youtube and custom"},
		{"pace on a sliding window", withUpstream(`"provider": "youtube", "options": {"window": "10s"}, "pace": {"burst": 0.1}`), "Pacific day"},
	}
	dir := t.TempDir()
	costsJSON := `{"buckets": ["pool"], "rules": [], "default": {"endpoint": "any", "charges": [{"bucket": "pool", "units": 1}]}}`
	if err := os.WriteFile(filepath.Join(dir, "costs.json"), []byte(costsJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load([]byte(c.json), dir, getenv)
			if err == nil {
				t.Fatal("Load accepted it")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "gateway: ") {
				t.Errorf("error %q, want one line starting \"gateway: \" saying %q", msg, c.want)
			}
			noSecrets(t, "the error", msg)
			if strings.Contains(msg, "secret-pass") {
				t.Errorf("the error shows a password: %q", msg)
			}
		})
	}
}

// TestLoadGood: a configuration of every provider loads, defaults filled
// in, and custom costs found beside the file.
func TestLoadGood(t *testing.T) {
	dir := t.TempDir()
	costsJSON := `{"buckets": ["pool"], "rules": [], "default": {"endpoint": "any", "charges": [{"bucket": "pool", "units": 1}]}}`
	if err := os.WriteFile(filepath.Join(dir, "costs.json"), []byte(costsJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]byte(`{
  "redis": "redis://127.0.0.1:6379/0",
  "callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
  "upstreams": [
    {"name": "youtube", "provider": "youtube", "prefix": "/youtube/", "target": "https://youtube.googleapis.com/youtube", "key_env": "YT_KEY",
     "options": {"quota": 600, "window": "10s", "table": "classic", "pool": "project-1"}, "policy": {"max_wait": "30s", "on_refusal": "wait", "on_outage": "closed"}},
    {"name": "openai", "provider": "openai", "prefix": "/openai/", "target": "https://api.openai.com", "key_env": "OAI_KEY", "options": {"minute": "1s", "max_body": 1048576}},
    {"name": "gemini", "provider": "gemini", "prefix": "/gemini/", "target": "https://generativelanguage.googleapis.com", "key_env": "YT_KEY", "options": {"rpm": 10}},
    {"name": "github", "provider": "github", "prefix": "/github/", "target": "https://api.github.com", "key_env": "OAI_KEY"},
    {"name": "anthropic", "provider": "anthropic", "prefix": "/anthropic/", "target": "https://api.anthropic.com", "key_env": "ANT_KEY",
     "options": {"minute": "4s", "rpm": 50, "itpm": 30000, "otpm": 8000, "classes": {"claude-haiku-4": {"rpm": 50, "itpm": 50000, "otpm": 10000}},
       "cache_reads": {"claude-3-5-haiku": false}, "reserve_percent": 5, "max_body": 1048576, "bytes_per_token": 1, "tool_tokens": 512,
       "inline_tokens": 1600, "reference_tokens": 1600}},
    {"name": "shop", "provider": "custom", "prefix": "/shop/", "target": "https://shop.example", "key_env": "OAI_KEY", "costs": "costs.json",
     "options": {"key_header": "X-Shop-Key"},
     "buckets": {"pool": {"limits": [{"units": 10000, "window": "day", "zone": "America/New_York"}, {"units": 40, "window": "1s"}], "reserve_percent": 5}}}
  ]}`), dir, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != DefaultListen || cfg.Upstreams[5].Costs != filepath.Join(dir, "costs.json") {
		t.Errorf("listen %q, costs %q: want the defaults filled in", cfg.Listen, cfg.Upstreams[5].Costs)
	}
}

// TestLoadIssueExample: the configuration the contract gives, as written.
func TestLoadIssueExample(t *testing.T) {
	example := `{
  "listen": "127.0.0.1:8787",
  "redis": "redis://127.0.0.1:6379/0",
  "callers": [{"name": "php-cron", "token_env": "TOLLGATE_TOKEN_PHP"}],
  "upstreams": [
    {"name": "youtube", "provider": "youtube", "prefix": "/youtube/",
     "target": "https://youtube.googleapis.com/youtube", "key_env": "YOUTUBE_API_KEY",
     "options": {"quota": 10000, "table": "classic"}},
    {"name": "openai", "provider": "openai", "prefix": "/openai/",
     "target": "https://api.openai.com", "key_env": "OPENAI_API_KEY", "options": {}}
  ]
}`
	vars := map[string]string{"TOLLGATE_TOKEN_PHP": phpToken, "YOUTUBE_API_KEY": realKey, "OPENAI_API_KEY": "sk-real-openai-key"}
	cfg, err := Load([]byte(example), t.TempDir(), func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Upstreams) != 2 || cfg.Callers[0].token.get() != phpToken || cfg.Upstreams[1].key.get() != "sk-real-openai-key" {
		t.Errorf("loaded %d upstreams and %d callers, or their secrets not read from the environment", len(cfg.Upstreams), len(cfg.Callers))
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		noSecrets(t, "the Config printed with "+verb, fmt.Sprintf(verb, cfg))
	}
}

// TestLoadRefusesZeroQuotas: a quota, window or reserve of zero or less
// is refused, naming the option, where it used to mean the provider's
// default (a "quota": 0 meant 10,000); JSON that does not parse says
// where, by line and column.
func TestLoadRefusesZeroQuotas(t *testing.T) {
	withOptions := func(provider, options string) string {
		return `{"upstreams": [{"name": "up", "provider": "` + provider + `", "prefix": "/up/", "target": "https://api.example.com", "key_env": "YT_KEY", "options": ` + options + `}]}`
	}
	cases := []struct{ json, want string }{
		{withOptions("youtube", `{"quota": 0}`), `gateway: upstream "up": option quota 0: must be positive (leave it out for the default)`},
		{withOptions("youtube", `{"quota": -5}`), `gateway: upstream "up": option quota -5: must be positive (leave it out for the default)`},
		{withOptions("youtube", `{"search_quota": 0}`), `gateway: upstream "up": option search_quota 0: must be positive (leave it out for the default)`},
		{withOptions("youtube", `{"window": ""}`), `gateway: upstream "up": option window "": want a positive Go duration, e.g. "10s" (leave it out for the default)`},
		{withOptions("youtube", `{"window": "0s"}`), `gateway: upstream "up": option window "0s": want a positive Go duration, e.g. "10s"`},
		{withOptions("youtube", `{"reserve_percent": 0}`), `gateway: upstream "up": option reserve_percent 0: leave it out for the default (5%), or give reserve_percent -1 for no reserve`},
		{withOptions("youtube", `{"reserve_units": -1}`), `gateway: upstream "up": option reserve_units -1: must be positive (leave it out for the default)`},
		{withOptions("openai", `{"rpm": 0}`), `gateway: upstream "up": option rpm 0: must be positive (leave it out for the default)`},
		{withOptions("github", `{"hour": ""}`), `gateway: upstream "up": option hour "": want a positive Go duration, e.g. "10s" (leave it out for the default)`},
		{withOptions("anthropic", `{"classes": {"claude-haiku-4": {"otpm": 0}}}`), `gateway: upstream "up": option classes.claude-haiku-4.otpm 0: must be positive (leave it out for the default)`},
		{"{\n  \"upstreams\": [\n    {\"name\": \"up\",}\n  ]\n}", `gateway: reading the configuration: line 3, column 20: invalid character '}' looking for beginning of object key string`},
		{"{\n  \"upstreams\": [\n", `gateway: reading the configuration: line 3, column 1: the JSON ends before it is complete`},
		{"{\n  \"listen\": 8787\n}", `gateway: reading the configuration: line 2: json: cannot unmarshal number into Go struct field Config.listen of type string`},
	}
	for _, c := range cases {
		_, err := Load([]byte(c.json), t.TempDir(), getenv)
		if err == nil || err.Error() != c.want {
			t.Errorf("Load(%s) = %v\nwant %s", c.json, err, c.want)
		}
	}
	if _, err := Load([]byte(withOptions("youtube", `{"quota": 600, "window": "10s", "reserve_percent": -1}`)), t.TempDir(), getenv); err != nil {
		t.Errorf("positive options: %v", err)
	}
}
