package youtube_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/providers/youtube"
)

// discovery is the part of a discovery document the walk reads.
type discovery struct {
	RootURL   string              `json:"rootUrl"`
	Revision  string              `json:"revision"`
	Resources map[string]resource `json:"resources"`
}

type resource struct {
	Methods   map[string]apiMethod `json:"methods"`
	Resources map[string]resource  `json:"resources"`
}

type apiMethod struct {
	ID          string `json:"id"`
	HTTPMethod  string `json:"httpMethod"`
	Path        string `json:"path"`
	MediaUpload *struct {
		Protocols struct {
			Simple    struct{ Path string } `json:"simple"`
			Resumable struct{ Path string } `json:"resumable"`
		} `json:"protocols"`
	} `json:"mediaUpload"`
}

// walk appends the methods of r and of the resources under it.
func (r resource) walk(out []apiMethod) []apiMethod {
	for _, m := range r.Methods {
		out = append(out, m)
	}
	for _, sub := range r.Resources {
		out = sub.walk(out)
	}
	return out
}

// line is the method as a line of internal/ytsim's discovery-methods.tsv.
func (m apiMethod) line() string {
	simple, resumable := "", ""
	if m.MediaUpload != nil {
		simple, resumable = m.MediaUpload.Protocols.Simple.Path, m.MediaUpload.Protocols.Resumable.Path
	}
	return strings.Join([]string{m.ID, m.HTTPMethod, "/" + m.Path, simple, resumable}, "\t")
}

// endpoint is the name the cost tables give a method.
func endpoint(id string) string {
	if id == "youtube.youtube.v3.liveChat.messages.stream" {
		return "liveChatMessages.streamList"
	}
	return strings.TrimPrefix(id, "youtube.")
}

// readDiscovery reads the YouTube Data API's discovery document from the
// google.golang.org/api module the tests build with.
func readDiscovery(t *testing.T) discovery {
	t.Helper()
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-m", "-f", "{{.Dir}}", "google.golang.org/api").Output()
	if err != nil {
		t.Fatalf("go list -m google.golang.org/api: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "youtube", "v3", "youtube-api.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d discovery
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestEveryDiscoveryMethodIsPriced walks every method of the discovery
// document in Google's client library, and fails on one that a cost table
// does not price: each must resolve, in both models and on both hosts, to
// its own endpoint with a charge; on its upload paths too, where the
// requests to an upload session continue the call, free. The list the
// simulator serves (internal/ytsim/testdata) must be this one.
func TestEveryDiscoveryMethodIsPriced(t *testing.T) {
	d := readDiscovery(t)
	var methods []apiMethod
	for _, r := range d.Resources {
		methods = r.walk(methods)
	}
	slices.SortFunc(methods, func(a, b apiMethod) int { return strings.Compare(a.ID, b.ID) })
	t.Logf("discovery document revision %s: %d methods", d.Revision, len(methods))
	if len(methods) < 83 {
		t.Fatalf("%d methods in the discovery document, want at least the 83 of revision 20261019", len(methods))
	}

	committed, err := os.ReadFile("../../internal/ytsim/testdata/discovery-methods.tsv")
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{"id\thttpMethod\tpath\tsimpleUploadPath\tresumableUploadPath"}
	for _, m := range methods {
		lines = append(lines, m.line())
	}
	if got, want := strings.Join(lines, "\n")+"\n", string(committed); got != want {
		t.Errorf("internal/ytsim/testdata/discovery-methods.tsv differs from the discovery document; the document's list:\n%s", got)
	}

	root, err := url.Parse(d.RootURL)
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]*\}`)
	for _, model := range []struct {
		name string
		spec costs.Spec
	}{{"classic", youtube.Classic()}, {"granular", youtube.Granular()}} {
		table, err := costs.New(model.spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range methods {
			paths := []string{"/" + m.Path}
			if m.MediaUpload != nil {
				paths = append(paths, m.MediaUpload.Protocols.Simple.Path, m.MediaUpload.Protocols.Resumable.Path)
			}
			for _, host := range []string{root.Host, "www.googleapis.com"} {
				for _, p := range paths {
					u := "https://" + host + param.ReplaceAllString(p, "x") + "?part=id"
					req, _ := http.NewRequest(m.HTTPMethod, u, nil)
					e, err := table.Resolve(req)
					if err != nil || e.Name != endpoint(m.ID) || e.Free || e.Units() <= 0 {
						t.Errorf("%s: %s %s = %s %v (%v): unpriced, want %s charged", model.name, m.HTTPMethod, u, e.Name, e.Charges, err, endpoint(m.ID))
					}
					if p == paths[0] {
						continue
					}
					for _, verb := range []string{"PUT", "POST"} {
						req, _ := http.NewRequest(verb, u+"&uploadType=resumable&upload_id=x", nil)
						if e, err := table.Resolve(req); err != nil || !e.Continues {
							t.Errorf("%s: a chunk %s %s = %s (%v), want a continuation", model.name, verb, req.URL, e.Name, err)
						}
					}
				}
			}
		}
	}
}
