package tollgate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// freeTable charges a list call 1 unit, and has a free status call and an
// upload chunk that continues a session already paid for.
func freeTable(t *testing.T) *costs.Table {
	t.Helper()
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{
			{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
			{Pattern: "GET /v1/status", Endpoint: "status", Free: true},
			{Pattern: "PUT /v1/upload/{session}", Endpoint: "upload.chunk", Continues: true},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// TestFreeRequestsAskNothing: a free request reserves nothing and sends no
// command to Redis; it honours a pause this process knows of, while a
// continuation of a paid session is sent even then.
func TestFreeRequestsAskNothing(t *testing.T) {
	_, rc := realRedis(t)
	var counter commandCounter
	rc.AddHook(&counter)
	lim := limiterOn(t, rc)
	up := newUpstream(t)
	var d decisions
	tr := newTransport(t, tollgate.Config{
		Transit: -1, Limiter: lim, Costs: freeTable(t),
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(1, time.Hour)}}},
		Trace:   tollgate.Trace{Decided: d.hook},
	})
	ctx := t.Context()
	if _, err := get(t, tr, up.URL+"/v1/items"); err != nil { // the one unit
		t.Fatal(err)
	}
	before := counter.n()
	for range 5 {
		if _, err := get(t, tr, up.URL+"/v1/status"); err != nil {
			t.Fatalf("a free request with the pool spent: %v", err)
		}
		if _, err := send(t, tr, ctx, "PUT", up.URL+"/v1/upload/s1", newBody("chunk")); err != nil {
			t.Fatalf("an upload chunk: %v", err)
		}
	}
	if counter.n() != before {
		t.Errorf("10 free requests sent %d commands to Redis, want none", counter.n()-before)
	}
	if up.count() != 11 {
		t.Errorf("the upstream received %d requests, want 11", up.count())
	}
	evs := d.list()
	if last := evs[len(evs)-1]; !last.Free || !last.Admitted || !last.At.IsZero() {
		t.Errorf("a free request's decision = %+v, want admitted, free, nothing reserved", last)
	}

	// The upstream said stop: a free request stops too; a chunk of an
	// upload already paid for goes on.
	if err := tr.Pause(ctx, tollgate.DefaultScope, "", time.Minute); err != nil {
		t.Fatal(err)
	}
	up.reset()
	_, err := get(t, tr, up.URL+"/v1/status")
	var qe *tollgate.QuotaError
	if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream {
		t.Errorf("a free request while paused: %v, want a *QuotaError from the pause", err)
	}
	if _, err := send(t, tr, ctx, "PUT", up.URL+"/v1/upload/s1", newBody("chunk")); err != nil {
		t.Errorf("an upload chunk while paused: %v, want it sent", err)
	}
	if up.count() != 1 || up.last().method != "PUT" {
		t.Errorf("the upstream received %d requests while paused, want the chunk alone", up.count())
	}
}
