package outage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/costs"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestProbe(t *testing.T) {
	var p Probe
	if p.Down() {
		t.Fatal("a new probe is down")
	}
	boom := errors.New("boom")
	if !p.Fail(boom, t0) || p.Fail(boom, t0) {
		t.Fatal("Fail switched down other than once")
	}
	if p.Due(t0.Add(ProbeInterval - time.Nanosecond)) {
		t.Error("due before its interval")
	}
	if !p.Due(t0.Add(ProbeInterval)) || p.Due(t0.Add(ProbeInterval)) {
		t.Error("due after its interval other than once")
	}
	if got := p.LastErr(); got != boom {
		t.Errorf("LastErr = %v, want %v", got, boom)
	}
	if !p.Up() || p.Up() || p.Down() {
		t.Error("Up switched back other than once")
	}
}

// TestLedgerSettle: what is recorded is forgotten; what fails stays owed,
// as many units as were tried.
func TestLedgerSettle(t *testing.T) {
	var l Ledger
	l.Add("s", []costs.Charge{{Bucket: "a", Units: 3}, {Bucket: "b", Units: 50}})
	l.Add("s", []costs.Charge{{Bucket: "a", Units: 2}})
	got := map[string]int64{}
	failing := errors.New("down")
	record := func(_ context.Context, scope, bucket string, units int64) (int64, error) {
		got[scope+"/"+bucket] = units
		if bucket == "b" {
			return min(units, 10), failing
		}
		return units, nil
	}
	var failed []string
	l.Settle(context.Background(), record, func(scope, bucket string, err error) { failed = append(failed, bucket) })
	if got["s/a"] != 5 || got["s/b"] != 50 || len(failed) != 1 || failed[0] != "b" {
		t.Fatalf("recorded %v, failed %v; want s/a 5, s/b 50, b failed", got, failed)
	}
	clear(got)
	l.Settle(context.Background(), record, func(string, string, error) {})
	if len(got) != 1 || got["s/b"] != 10 {
		t.Errorf("then recorded %v, want only the 10 units of b tried", got)
	}
}
