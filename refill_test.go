package tollgate

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/quota"
)

// A token bucket's reserve, Transit and shares apply to its capacity and
// its refill: tollgate's bucket never holds more, or refills faster, than
// the share of the upstream's it may spend; and Transit takes from the
// capacity what the upstream's bucket refills while a request travels,
// keeping the period.
func TestTokenBucketReserveTransitAndShares(t *testing.T) {
	b := Bucket{Limits: []quota.Limit{quota.TokenBucket(4000, 4000, time.Minute), quota.PerWindow(4000, time.Minute)}, ReservePercent: 5}
	limits, _, err := enforced([]string{"requests"}, map[string]Bucket{"requests": b}, 60*time.Millisecond)
	if err != nil {
		t.Fatalf("a token bucket and a sliding window of one length: %v, want both (their keys differ)", err)
	}
	got := limits["requests"]
	// 5% of 4000 kept below: 3800 refilled at 3800 a minute; Transit
	// (60ms) takes 3800·60ms/1m = 3.8, so 4, from the capacity.
	if want := quota.TokenBucket(3796, 3800, time.Minute); got[0] != want {
		t.Errorf("the bucket enforced: %v, want %v", got[0], want)
	}
	if want := quota.PerWindow(3800, time.Minute+60*time.Millisecond); got[1] != want {
		t.Errorf("the window enforced: %v, want %v", got[1], want)
	}
	half := shareOf(limits, 0.5)["requests"]
	if want := quota.TokenBucket(1898, 1900, time.Minute); half[0] != want {
		t.Errorf("half the bucket (the background's or FailLocal's share): %v, want %v", half[0], want)
	}
	if _, err := (Bucket{Limits: []quota.Limit{quota.TokenBucket(100, 1, time.Minute)}, ReserveUnits: 1}).effective("b"); err == nil {
		t.Error("a reserve that leaves a bucket no refill: no error")
	}
}
