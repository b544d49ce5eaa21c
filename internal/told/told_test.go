package told

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/announce"
)

func TestTold(t *testing.T) {
	// Without With, what is told goes nowhere.
	Tell(context.Background(), announce.Quota{Name: "lost"})
	if qs := Of(context.Background()); qs != nil {
		t.Errorf("a context without Quotas holds %v", qs)
	}
	ctx := With(context.Background())
	for i := range maxQuotas + 2 {
		Tell(ctx, announce.Quota{Name: "q", Remaining: int64(i)})
	}
	qs := Of(ctx)
	if len(qs) != maxQuotas {
		t.Fatalf("told %d quotas past the bound, want %d kept", len(qs), maxQuotas)
	}
	for i, q := range qs {
		if q.Remaining != int64(i) {
			t.Errorf("quota %d is the one told %d-th: not in the order told", i, q.Remaining)
		}
	}
	qs[0].Name = "changed"
	if Of(ctx)[0].Name != "q" {
		t.Error("Of returned the quotas themselves, not a copy")
	}
}
