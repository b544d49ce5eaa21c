package provider

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/costs"
)

// limits are a provider's limits for these tests: negative ones refused.
type limits struct{ RPM int64 }

func (l limits) check() error {
	if l.RPM < 0 {
		return fmt.Errorf("limits %+v must not be negative", l)
	}
	return nil
}

// TestCheckLimits: a named set's limits are told by name, the default's
// as Options.Limits, each with the check's own words after the
// provider's name; limits that can work pass.
func TestCheckLimits(t *testing.T) {
	for _, c := range []struct {
		name  string
		named map[string]limits
		def   limits
		want  string // "" for none
	}{
		{"all can work", map[string]limits{"m": {RPM: 5}}, limits{}, ""},
		{"a named set's", map[string]limits{"gpt-4o": {RPM: -5}}, limits{}, `p: Options.Models["gpt-4o"]: limits {RPM:-5} must not be negative`},
		{"the default's", nil, limits{RPM: -1}, "p: Options.Limits: limits {RPM:-1} must not be negative"},
		{"a named set's before the default's", map[string]limits{"m": {RPM: -2}}, limits{RPM: -1}, `p: Options.Models["m"]: limits {RPM:-2} must not be negative`},
	} {
		err := CheckLimits("p", "Models", c.named, c.def, limits.check)
		if got := fmt.Sprint(err); err == nil && c.want != "" || err != nil && got != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestSets: the default set is under "", each named one under its name;
// a set with no name is refused, naming the option and the kind of set.
func TestSets(t *testing.T) {
	sets, err := Sets("p", "Models", "model", limits{RPM: 1}, map[string]limits{"m": {RPM: 2}})
	if err != nil || len(sets) != 2 || sets[""].RPM != 1 || sets["m"].RPM != 2 {
		t.Fatalf("Sets: %v %v, want the default under \"\" and m", sets, err)
	}
	_, err = Sets("p", "Classes", "class", limits{}, map[string]limits{"": {RPM: 2}})
	if want := "p: Options.Classes has a class with no name; set Options.Limits instead"; fmt.Sprint(err) != want {
		t.Fatalf("a set with no name: %v, want %q", err, want)
	}
}

// TestCosts: a spec that sets a rule or a default is built as it is, the
// zero one is the provider's own table; a spec that cannot be built is
// an error prefixed with the provider's name.
func TestCosts(t *testing.T) {
	rule := costs.Rule{Pattern: "/", Endpoint: "e", Charges: []costs.Charge{{Bucket: "b", Units: 1}}}
	own := costs.Spec{Buckets: []string{"b"}, Rules: []costs.Rule{rule}}
	given := costs.Spec{Buckets: []string{"b"}, Default: &costs.Rule{Endpoint: "given", Charges: rule.Charges}}
	for _, c := range []struct {
		name string
		spec costs.Spec
		want string // the endpoint of GET /x
	}{
		{"zero", costs.Spec{}, "e"},
		{"a default of its own", given, "given"},
	} {
		ct, err := Costs("p", c.spec, own)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		req, _ := http.NewRequest("GET", "http://x/x", nil)
		if e, err := ct.Resolve(req); err != nil || e.Name != c.want {
			t.Errorf("%s: %+v %v, want the endpoint %q", c.name, e, err, c.want)
		}
	}
	bad := costs.Spec{Rules: []costs.Rule{{Pattern: "/", Endpoint: "e", Charges: []costs.Charge{{Bucket: "", Units: -1}}}}}
	if _, err := Costs("p", bad, own); err == nil || !strings.HasPrefix(err.Error(), "p: ") {
		t.Fatalf("a spec that cannot be built: %v, want an error prefixed p: ", err)
	}
}

// TestName: short names of letters, digits and the punctuation given are
// kept; others, the empty one among them, are hashed after the prefix.
func TestName(t *testing.T) {
	long := strings.Repeat("a", maxName)
	for _, c := range []struct{ in, punct, want string }{
		{"gpt-4o-mini", "._-", "gpt-4o-mini"},
		{long, "", long},
		{"ft:gpt-4o:acme::abc", "._-:", "ft:gpt-4o:acme::abc"},
		// sha256(""), sha256("a b") and sha256("a:b"), first 8 bytes.
		{"", "._-", "model-e3b0c44298fc1c14"},
		{"a b", "._-", "model-c8687a08aa5d6ed2"},
		{"a:b", "._-", "model-6783a31eabf68ccc"},
	} {
		if got := Name(c.in, c.punct, "model-"); got != c.want {
			t.Errorf("Name(%q, %q) = %q, want %q", c.in, c.punct, got, c.want)
		}
	}
	if got := Name(long+"a", "", "class-"); !strings.HasPrefix(got, "class-") || len(got) != len("class-")+16 {
		t.Errorf("a name past %d bytes: %q, want class- and 16 hex digits", maxName, got)
	}
}
