package tollgate_test

import (
	"errors"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// TestNewRefusesWhatCannotWork: every configuration a request would fail on
// fails New instead, with an error matching ErrConfig, so that it shows at
// startup rather than on the first request or the first outage.
func TestNewRefusesWhatCannotWork(t *testing.T) {
	lim := limiterOn(t, quickClient(t, "127.0.0.1:1")) // never reached: New does not call Redis
	hour := quota.PerWindow(100, time.Hour)
	good := func() tollgate.Config {
		return tollgate.Config{Limiter: lim, Costs: table(t), Buckets: buckets(100, time.Hour)}
	}
	withBucket := func(b tollgate.Bucket) func(*tollgate.Config) {
		return func(c *tollgate.Config) {
			c.Buckets = map[string]tollgate.Bucket{"pool": b, "search": {Limits: []quota.Limit{hour}}}
		}
	}
	withPolicy := func(p tollgate.Policy) func(*tollgate.Config) {
		return func(c *tollgate.Config) {
			c.Policy = tollgate.Policies(tollgate.Policy{}, map[string]tollgate.Policy{"upload": p})
		}
	}
	cases := []struct {
		name   string
		change func(*tollgate.Config)
	}{
		{"no limiter", func(c *tollgate.Config) { c.Limiter = nil }},
		{"no cost table", func(c *tollgate.Config) { c.Costs = nil }},
		{"no buckets", func(c *tollgate.Config) { c.Buckets = nil }},
		{"a charged bucket missing", func(c *tollgate.Config) { delete(c.Buckets, "search") }},
		{"a bucket with no limits", withBucket(tollgate.Bucket{})},
		{"a negative quota", withBucket(tollgate.Bucket{Limits: []quota.Limit{quota.PerWindow(-1, time.Hour)}})},
		{"a zero window", withBucket(tollgate.Bucket{Limits: []quota.Limit{quota.PerWindow(100, 0)}})},
		{"a calendar day with no zone", withBucket(tollgate.Bucket{Limits: []quota.Limit{quota.PerDay(100, nil)}})},
		{"one window twice", withBucket(tollgate.Bucket{Limits: []quota.Limit{hour, quota.PerWindow(50, time.Hour)}})},
		{"a negative reserve", withBucket(tollgate.Bucket{Limits: []quota.Limit{hour}, ReserveUnits: -1})},
		{"a reserve of 100%", withBucket(tollgate.Bucket{Limits: []quota.Limit{hour}, ReservePercent: 100})},
		{"a NaN reserve", withBucket(tollgate.Bucket{Limits: []quota.Limit{hour}, ReservePercent: math.NaN()})},
		{"a reserve that leaves nothing", withBucket(tollgate.Bucket{Limits: []quota.Limit{hour}, ReserveUnits: 100})},
		{"LocalShare without Local", func(c *tollgate.Config) { c.LocalShare = 0.5 }},
		{"Local without LocalShare", func(c *tollgate.Config) { c.LocalLimiter = lim }},
		{"LocalShare over 1", func(c *tollgate.Config) { c.LocalLimiter, c.LocalShare = lim, 1.5 }},
		{"LocalShare NaN", func(c *tollgate.Config) { c.LocalLimiter, c.LocalShare = lim, math.NaN() }},
		{"FailLocal with no Local", withPolicy(tollgate.Policy{OnOutage: tollgate.FailLocal})},
		{"Failover with no Routes", withPolicy(tollgate.Policy{OnRefusal: tollgate.Failover})},
		{"AfterFailover that fails over again", func(c *tollgate.Config) {
			c.Routes = []tollgate.Route{{Scope: "b"}}
			withPolicy(tollgate.Policy{OnRefusal: tollgate.Failover, AfterFailover: tollgate.Failover})(c)
		}},
		{"an unknown action", withPolicy(tollgate.Policy{OnRefusal: tollgate.Action(7)})},
		{"an unknown outage mode", withPolicy(tollgate.Policy{OnOutage: tollgate.Outage(-1)})},
		{"a route with nowhere to go", func(c *tollgate.Config) { c.Routes = []tollgate.Route{{Name: "nowhere"}} }},
		{"the default rule's policy", func(c *tollgate.Config) {
			tab, err := costs.New(costs.Spec{
				Buckets: []string{"pool"},
				Default: &costs.Rule{Endpoint: "other", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			c.Costs = tab
			c.Policy = tollgate.Policies(tollgate.Policy{}, map[string]tollgate.Policy{"other": {OnOutage: tollgate.FailLocal}})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good()
			c.change(&cfg)
			tr, err := tollgate.New(cfg)
			if !errors.Is(err, tollgate.ErrConfig) || tr != nil {
				t.Fatalf("New = %v, %v; want nil and an error matching ErrConfig", tr, err)
			}
		})
	}

	// What is right builds.
	cfg := good()
	cfg.LocalLimiter, cfg.LocalShare = lim, 0.25
	cfg.Routes = []tollgate.Route{{Name: "cache", Base: http.DefaultTransport}}
	cfg.Policy = tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Failover, AfterFailover: tollgate.WaitTurn, OnOutage: tollgate.FailLocal}, nil)
	tr, err := tollgate.New(cfg)
	if err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	tr.Close()
}

// TestUsageOfAnUnknownBucket: Usage, Record and Pause refuse a bucket the
// cost table does not charge, rather than reading or writing keys no
// decision uses.
func TestUsageOfAnUnknownBucket(t *testing.T) {
	tr := newTransport(t, tollgate.Config{Limiter: inProcess(t), Costs: table(t), Buckets: buckets(100, time.Hour)})
	ctx := t.Context()
	if _, err := tr.Usage(ctx, "s", "nope"); err == nil {
		t.Error("Usage of an unknown bucket: no error")
	}
	if err := tr.Record(ctx, "s", "nope", 1); err == nil {
		t.Error("Record of an unknown bucket: no error")
	}
	if err := tr.Record(ctx, "s", "pool", 0); err == nil {
		t.Error("Record of 0 units: no error")
	}
	if err := tr.Pause(ctx, "s", "nope", time.Second); err == nil {
		t.Error("Pause of an unknown bucket: no error")
	}
}

// TestUsageRecordAndPauseReachTheTransportsKeys: what Usage reads and
// Record and Pause write are the windows the Transport's decisions use,
// with the reserve taken off and Transit added.
func TestUsageRecordAndPauseReachTheTransportsKeys(t *testing.T) {
	up := newUpstream(t)
	tr := newTransport(t, tollgate.Config{
		Limiter: inProcess(t), Costs: table(t),
		Buckets: map[string]tollgate.Bucket{
			"pool":   {Limits: []quota.Limit{quota.PerWindow(100, time.Hour)}, ReserveUnits: 10},
			"search": {Limits: []quota.Limit{quota.PerWindow(10, time.Hour)}},
		},
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Refuse}, nil),
	})
	ctx := t.Context()
	if err := tr.Record(ctx, tollgate.DefaultScope, "pool", 60); err != nil {
		t.Fatal(err)
	}
	usage, err := tr.Usage(ctx, tollgate.DefaultScope, "pool")
	if err != nil {
		t.Fatal(err)
	}
	want := quota.PerWindow(90, time.Hour+tollgate.DefaultTransit)
	if len(usage) != 1 || usage[0].Limit != want || usage[0].Used != 60 || usage[0].Remaining != 30 {
		t.Fatalf("Usage = %+v, want 60 used of %v", usage, want)
	}
	// 60 recorded + 50 for an upload is over the 90 enforced.
	if _, err := send(t, tr, ctx, "POST", up.URL+"/v1/upload", nil); !errors.Is(err, tollgate.ErrQuotaExhausted) {
		t.Errorf("an upload after recording 60 of 90: %v, want refused", err)
	}
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil {
		t.Errorf("a list call with 30 left: %v", err)
	}
	if err := tr.Pause(ctx, tollgate.DefaultScope, "", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err = get(t, tr, up.URL+"/v1/items")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.RetryAfter < 59*time.Second {
		t.Errorf("a list call after Pause: %v, want refused for about a minute", err)
	}
	if up.count() != 1 {
		t.Errorf("the upstream received %d requests, want 1", up.count())
	}
}

// TestNewRefusesAChargeNoLimitAdmits: a rule whose charge (an estimate
// too) is more than a limit of its bucket admits, less the reserve, fails
// New, naming the rule, the bucket and the limit as configured; a charge
// that fits, a computed one, and one against a limit an announcement may
// replace pass.
func TestNewRefusesAChargeNoLimitAdmits(t *testing.T) {
	lim := limiterOn(t, quickClient(t, "127.0.0.1:1")) // never reached: New does not call Redis
	rules := []costs.Rule{
		{Pattern: "GET /v1/items/{id}", Endpoint: "items.get", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
		{Pattern: "GET /v1/search", Endpoint: "search", Charges: []costs.Charge{{Bucket: "pool", Units: 100}}},
		{Pattern: "POST /v1/chat", Endpoint: "chat", Charges: []costs.Charge{{Bucket: "tokens", Units: 4096}},
			Settle: []costs.Settle{{Bucket: "tokens", Field: "usage.total_tokens"}}},
	}
	tab, err := costs.New(costs.Spec{Buckets: []string{"pool", "tokens"}, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	enough := tollgate.Bucket{Limits: []quota.Limit{quota.PerWindow(100_000, time.Minute)}}
	cases := []struct {
		name         string
		pool, tokens tollgate.Bucket
		want         string // "" builds
	}{
		{"a charge over the limit", tollgate.Bucket{Limits: []quota.Limit{quota.PerWindow(50, time.Hour)}}, enough,
			`tollgate: rule 1 ("GET /v1/search", endpoint "search") charges 100 units of bucket "pool", more than its limit 50/1h0m0s admits (50 after the reserve): every such request would fail`},
		{"a charge over the limit less its reserve", tollgate.Bucket{Limits: []quota.Limit{quota.PerDay(10_000, time.UTC), quota.PerWindow(100, time.Hour)}, ReservePercent: 5}, enough,
			`tollgate: rule 1 ("GET /v1/search", endpoint "search") charges 100 units of bucket "pool", more than its limit 100/1h0m0s admits (95 after the reserve): every such request would fail`},
		{"an estimate over a token bucket", enough, tollgate.Bucket{Limits: []quota.Limit{quota.TokenBucket(2000, 2000, time.Minute)}},
			`tollgate: rule 2 ("POST /v1/chat", endpoint "chat") charges 4096 units of bucket "tokens", more than its limit 2000+2000/1m0s admits (1998 after the reserve): every such request would fail`},
		{"charges that fit", tollgate.Bucket{Limits: []quota.Limit{quota.PerWindow(100, time.Hour)}}, tollgate.Bucket{Limits: []quota.Limit{quota.PerWindow(4096, time.Minute)}}, ""},
		{"a limit still to be announced", tollgate.Bucket{Limits: []quota.Limit{quota.PerWindow(10, time.Hour)}, Follows: "core"}, enough, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := tollgate.New(tollgate.Config{Limiter: lim, Costs: tab, Buckets: map[string]tollgate.Bucket{"pool": c.pool, "tokens": c.tokens}})
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("New = %v, want a Transport", err)
			case c.want == "":
				tr.Close()
			case err == nil:
				tr.Close()
				t.Fatalf("New built a Transport; want %s", c.want)
			case err.Error() != c.want || !errors.Is(err, tollgate.ErrConfig):
				t.Errorf("New = %v\nwant %s", err, c.want)
			}
		})
	}

	// A catalog lists endpoints a program may never call: it builds.
	spec := tab.Spec()
	spec.Catalog = true
	catalog, err := costs.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tollgate.New(tollgate.Config{Limiter: lim, Costs: catalog, Buckets: map[string]tollgate.Bucket{"pool": cases[0].pool, "tokens": enough}})
	if err != nil {
		t.Fatalf("New with a catalog = %v, want a Transport", err)
	}
	tr.Close()

	// The default rule, and a computed charge (known only per request).
	def, err := costs.New(costs.Spec{Buckets: []string{"pool"},
		Rules: []costs.Rule{{Pattern: "GET /v1/report", Endpoint: "report", Func: func(*http.Request) (costs.Endpoint, error) {
			return costs.Endpoint{Charges: []costs.Charge{{Bucket: "pool", Units: 500}}}, nil
		}}},
		Default: &costs.Rule{Endpoint: "other", Charges: []costs.Charge{{Bucket: "pool", Units: 20}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tollgate.New(tollgate.Config{Limiter: lim, Costs: def, Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(10, time.Minute)}}}})
	if want := `tollgate: the default rule (endpoint "other") charges 20 units of bucket "pool", more than its limit 10/1m0s admits (10 after the reserve): every such request would fail`; err == nil || err.Error() != want {
		t.Errorf("New = %v\nwant %s", err, want)
	}
}
