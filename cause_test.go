package tollgate_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// TestRefusalCauses: every kind of refusal says its cause, and a pause's
// its reason, whether Redis decided it, the process remembered it, or a
// pause reached the request while it waited.
func TestRefusalCauses(t *testing.T) {
	srv, rc := realRedis(t)
	failFast := tollgate.Policy{OnRefusal: tollgate.Refuse}
	waitBriefly := tollgate.Policy{MaxWait: 300 * time.Millisecond}
	capped := map[string]tollgate.Bucket{
		"pool":   {Limits: []quota.Limit{quota.PerWindow(1000, time.Hour)}, MaxInFlight: 1},
		"search": {Limits: []quota.Limit{quota.PerWindow(10, time.Hour)}},
	}
	pauseBy := func(t *testing.T, scope, reason string) { // as an operator, from a process of its own
		t.Helper()
		if _, err := limiterOn(t, rc).PauseBecause(context.Background(), scope, "", time.Minute, reason); err != nil {
			t.Fatal(err)
		}
	}
	slow := func(up *upstream) {
		up.setRespond(func(w http.ResponseWriter, r *http.Request) { time.Sleep(time.Second) })
	}
	type rig struct {
		tr, other *tollgate.Transport // two processes on one Redis
		up        *upstream
		scope     string
	}
	cases := []struct {
		name   string
		policy tollgate.Policy
		bkts   map[string]tollgate.Bucket
		// refuse makes the request to url refused, and returns its error.
		refuse func(t *testing.T, r rig) error
		cause  tollgate.Cause
		reason string // "" for none; a "~" prefix: contains
	}{
		{"no room, decided in Redis", failFast, nil, func(t *testing.T, r rig) error {
			for range 3 {
				get(t, r.tr, r.up.URL+"/v1/items")
			}
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.NoRoom, ""},
		{"no room, remembered", failFast, nil, func(t *testing.T, r rig) error {
			for range 4 {
				get(t, r.tr, r.up.URL+"/v1/items")
			}
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.NoRoom, ""},
		{"no room before MaxWait", waitBriefly, nil, func(t *testing.T, r rig) error {
			for range 3 {
				get(t, r.tr, r.up.URL+"/v1/items")
			}
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.NoRoom, ""},
		{"an operator's pause, decided in Redis", waitBriefly, nil, func(t *testing.T, r rig) error {
			pauseBy(t, r.scope, "rollback 12")
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.PausedByOperator, "rollback 12"},
		{"an operator's pause, remembered", failFast, nil, func(t *testing.T, r rig) error {
			pauseBy(t, r.scope, "rollback 13")
			get(t, r.tr, r.up.URL+"/v1/items")
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.PausedByOperator, "rollback 13"},
		{"an operator's pause of a bucket", failFast, nil, func(t *testing.T, r rig) error {
			if _, err := limiterOn(t, rc).PauseBecause(context.Background(), r.scope, "search", time.Minute, "search off"); err != nil {
				t.Fatal(err)
			}
			_, err := get(t, r.tr, r.up.URL+"/v1/search")
			return err
		}, tollgate.PausedByOperator, "search off"},
		{"the upstream's 429", failFast, nil, func(t *testing.T, r rig) error {
			_, err := get(t, r.tr, r.up.URL+"/v1/items?status=429")
			return err
		}, tollgate.PausedByUpstream, "~the upstream answered 429 to items.list"},
		{"the upstream's pause, another process's", failFast, nil, func(t *testing.T, r rig) error {
			get(t, r.other, r.up.URL+"/v1/items?status=429")
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.PausedByUpstream, "~the upstream answered 429"},
		{"the upstream's pause, told while waiting", tollgate.Policy{MaxWait: 5 * time.Second}, buckets(3, 2*time.Second), func(t *testing.T, r rig) error {
			for range 3 {
				get(t, r.tr, r.up.URL+"/v1/items")
			}
			go func() {
				time.Sleep(300 * time.Millisecond)
				get(t, r.other, r.up.URL+"/v1/probe?status=429") // another bucket, with room
			}()
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.PausedByUpstream, "~429"},
		{"Transport.Pause", failFast, nil, func(t *testing.T, r rig) error {
			if err := r.other.Pause(context.Background(), r.scope, "", time.Minute); err != nil {
				t.Fatal(err)
			}
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.PausedByUpstream, ""},
		{"a free request during a pause", failFast, nil, func(t *testing.T, r rig) error {
			pauseBy(t, r.scope, "free too")
			get(t, r.tr, r.up.URL+"/v1/items") // learns of the pause
			_, err := get(t, r.tr, r.up.URL+"/v1/status")
			return err
		}, tollgate.PausedByOperator, "free too"},
		{"a cap, now", failFast, capped, func(t *testing.T, r rig) error {
			slow(r.up)
			go get(t, r.other, r.up.URL+"/v1/items")
			time.Sleep(300 * time.Millisecond)
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.CapFull, ""},
		{"a cap, before MaxWait", waitBriefly, capped, func(t *testing.T, r rig) error {
			slow(r.up)
			go get(t, r.other, r.up.URL+"/v1/items")
			time.Sleep(300 * time.Millisecond)
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.CapFull, ""},
		{"Redis down, the local share spent", tollgate.Policy{OnRefusal: tollgate.Refuse, OnOutage: tollgate.FailLocal}, nil, func(t *testing.T, r rig) error {
			srv.Kill()
			t.Cleanup(func() { srv.Restart(t) })
			get(t, r.tr, r.up.URL+"/v1/items") // the share: 1 of 3, rounded
			_, err := get(t, r.tr, r.up.URL+"/v1/items")
			return err
		}, tollgate.RedisDown, ""},
	}
	tab, err := costs.New(costs.Spec{Buckets: []string{"pool", "search"}, Rules: []costs.Rule{
		{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
		{Pattern: "GET /v1/search", Endpoint: "search.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}, {Bucket: "search", Units: 1}}},
		{Pattern: "GET /v1/status", Endpoint: "status", Free: true},
		{Pattern: "GET /v1/probe", Endpoint: "probe", Charges: []costs.Charge{{Bucket: "search", Units: 1}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t)
			up.setRespond(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("status") == "429" {
					w.Header().Set("Retry-After", "60")
					w.WriteHeader(http.StatusTooManyRequests)
				}
			})
			scope := "cause-" + string(rune('a'+i))
			bkts := c.bkts
			if bkts == nil {
				bkts = buckets(3, time.Hour)
			}
			cfg := func() tollgate.Config {
				cfg := tollgate.Config{
					Transit: -1, Limiter: limiterOn(t, quickClient(t, srv.Addr)), Costs: tab, Buckets: bkts,
					Scope:  tollgate.Scope(scope),
					Policy: tollgate.Policies(c.policy, nil),
				}
				if c.policy.OnOutage == tollgate.FailLocal {
					cfg.LocalLimiter, cfg.LocalShare = inProcess(t), 0.34
				}
				return cfg
			}
			r := rig{tr: newTransport(t, cfg()), other: newTransport(t, cfg()), up: up, scope: scope}
			err := c.refuse(t, r)
			var qe *tollgate.QuotaError
			if !errors.As(err, &qe) {
				t.Fatalf("got %v, want a *QuotaError", err)
			}
			if qe.Cause != c.cause {
				t.Errorf("cause %v (%v), want %v", qe.Cause, err, c.cause)
			}
			if want, ok := strings.CutPrefix(c.reason, "~"); ok {
				if !strings.Contains(qe.Reason, want) {
					t.Errorf("reason %q, want one containing %q", qe.Reason, want)
				}
			} else if qe.Reason != c.reason {
				t.Errorf("reason %q, want %q", qe.Reason, c.reason)
			}
			if !strings.Contains(err.Error(), c.cause.String()) {
				t.Errorf("the error says %q, not its cause %q", err, c.cause)
			}
		})
	}
}

// TestQuotaErrorReadsWell: the message says the cause, a pause's reason,
// and a RetryAfter rounded to what a person reads.
func TestQuotaErrorReadsWell(t *testing.T) {
	cases := []struct {
		qe   tollgate.QuotaError
		want string
	}{
		{tollgate.QuotaError{Endpoint: "search.list", Scope: "p", Bucket: "pool", Units: 100, RetryAfter: 24*time.Hour + 49813*time.Microsecond},
			`tollgate: quota exhausted (no room): endpoint "search.list" scope "p" bucket "pool" units 100; retry after 24h0m0s`},
		{tollgate.QuotaError{Endpoint: "e", Scope: "p", Units: 1, RetryAfter: 114*time.Second + 912*time.Millisecond, Cause: tollgate.PausedByOperator, Reason: "incident 7"},
			`tollgate: quota exhausted (an operator's pause: incident 7): endpoint "e" scope "p" units 1; retry after 1m55s`},
		{tollgate.QuotaError{Endpoint: "e", Scope: "p", Units: 1, RetryAfter: 2345 * time.Millisecond, Cause: tollgate.PausedByUpstream, Reason: "the upstream answered 429 to e"},
			`tollgate: quota exhausted (the upstream's pause: the upstream answered 429 to e): endpoint "e" scope "p" units 1; retry after 2.3s`},
		{tollgate.QuotaError{Endpoint: "e", Scope: "p", Bucket: "pool", RetryAfter: 45123 * time.Microsecond, Cause: tollgate.CapFull},
			`tollgate: quota exhausted (a cap on requests in flight): endpoint "e" scope "p" bucket "pool" units 0; retry after 45ms`},
		{tollgate.QuotaError{Endpoint: "e", Scope: "p", Units: 3, Cause: tollgate.RedisDown},
			`tollgate: quota exhausted (Redis down, the local share spent): endpoint "e" scope "p" units 3; retry time unknown`},
	}
	for _, c := range cases {
		if got := c.qe.Error(); got != c.want {
			t.Errorf("Error() = %s\nwant      %s", got, c.want)
		}
	}
}
