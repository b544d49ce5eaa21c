package caps

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/quota"
)

// TestHeldTellsCapsFromGates: only the caps' slots are returned to be
// told to the slot hook; the gates of learning buckets are not.
func TestHeldTellsCapsFromGates(t *testing.T) {
	var h Held
	capSlot, gate := new(quota.Slot), new(quota.Slot)
	h.Add([]*quota.Slot{capSlot}, "s", []string{"pool"}, false)
	h.Add([]*quota.Slot{gate}, "s", []string{"pool"}, true)
	got := h.Remove([]*quota.Slot{gate, capSlot})
	if len(got) != 1 || got[0] != (Owner{Scope: "s", Bucket: "pool"}) {
		t.Errorf("Remove = %v, want the cap's slot alone", got)
	}
	if again := h.Remove([]*quota.Slot{capSlot}); len(again) != 0 {
		t.Errorf("a slot removed twice was returned again: %v", again)
	}
	if owners, err := h.ReleaseAll(context.Background()); len(owners) != 0 || err != nil {
		t.Errorf("ReleaseAll of nothing = %v, %v", owners, err)
	}
}
