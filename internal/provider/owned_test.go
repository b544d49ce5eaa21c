package provider

import (
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
)

// TestOwnedRefusesWhatTheProviderSets: each setting a provider makes
// itself is refused with its provider's name and the option to use; the
// scope only when the provider scopes requests itself.
func TestOwnedRefusesWhatTheProviderSets(t *testing.T) {
	table, err := costs.New(costs.Spec{Buckets: []string{"b"},
		Rules: []costs.Rule{{Pattern: "/", Endpoint: "any", Charges: []costs.Charge{{Bucket: "b", Units: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	scoping := Owned{Provider: "p", Upstream: "P", Buckets: "Options.Limits", Scope: "by credential"}
	for name, c := range map[string]struct {
		cfg  tollgate.Config
		want string
	}{
		"Base":         {tollgate.Config{Base: http.DefaultTransport}, "Options.Base"},
		"Costs":        {tollgate.Config{Costs: table}, "Options.Table"},
		"Buckets":      {tollgate.Config{Buckets: map[string]tollgate.Bucket{}}, "Options.Limits"},
		"Scope":        {tollgate.Config{Scope: tollgate.Scope("x")}, "by credential"},
		"ReadResponse": {tollgate.Config{ReadResponse: tollgate.DefaultUpstream}, "Options.Tollgate.ReadResponse is set: NewTransport reads P's responses"},
	} {
		err := scoping.Check(c.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), "p: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error from p naming %q", name, err, c.want)
		}
	}
	if err := scoping.Check(tollgate.Config{Transit: time.Second}); err != nil {
		t.Errorf("a setting the provider leaves alone: %v", err)
	}
	leaves := Owned{Provider: "p", Upstream: "P", Buckets: "Options.Limits"}
	if err := leaves.Check(tollgate.Config{Scope: tollgate.Scope("x")}); err != nil {
		t.Errorf("a scope where the provider leaves it to the user: %v", err)
	}
}

// TestSizesNameWhatCannotWork: a negative minute or body bound and a
// reserve of 100% or more (or NaN) are refused, naming the option; zeros,
// the defaults, pass.
func TestSizesNameWhatCannotWork(t *testing.T) {
	for _, c := range []struct {
		sizes Sizes
		want  string // "" for no error
	}{
		{Sizes{}, ""},
		{Sizes{Minute: time.Second, MaxBody: 1 << 20, ReservePercent: 99.5}, ""},
		{Sizes{Minute: -time.Second}, "p: Options.Minute is -1s"},
		{Sizes{MaxBody: -1}, "p: Options.MaxBody is -1"},
		{Sizes{ReservePercent: 100}, "p: Options.ReservePercent is 100"},
		{Sizes{ReservePercent: math.NaN()}, "p: Options.ReservePercent is NaN"},
	} {
		err := c.sizes.Check("p")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want no error", c.sizes, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error starting %q", c.sizes, err, c.want)
		}
	}
}

// TestSizesRead: each size reads as given, or as its default for 0 (a
// negative reserve as none).
func TestSizesRead(t *testing.T) {
	var zero Sizes
	if got := zero.Length(); got != time.Minute {
		t.Errorf("Length of 0: %v, want a minute", got)
	}
	if got := zero.Body(7); got != 7 {
		t.Errorf("Body of 0: %d, want the default 7", got)
	}
	if got := zero.Reserve(5); got != 5 {
		t.Errorf("Reserve of 0: %v, want the default 5", got)
	}
	given := Sizes{Minute: time.Second, MaxBody: 100, ReservePercent: -1}
	if given.Length() != time.Second || given.Body(7) != 100 || given.Reserve(5) != 0 {
		t.Errorf("%+v reads %v %d %v, want 1s 100 0", given, given.Length(), given.Body(7), given.Reserve(5))
	}
}
