package youtube

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/costs"
)

// classicPrice states the classic prices as DESIGN.md's YouTube facts give
// them, independently of the methods table: reads cost 1, writes 50, with
// the listed exceptions.
func classicPrice(endpoint string) int64 {
	switch endpoint {
	case "search.list":
		return 100
	case "captions.list":
		return 50
	case "captions.download":
		return 200
	case "captions.insert":
		return 400
	case "captions.update":
		return 450
	case "videos.insert":
		return 1600
	case "liveChatMessages.list":
		return 5
	}
	op := endpoint[strings.LastIndex(endpoint, ".")+1:]
	if op == "list" || op == "getRating" || op == "batchGetStats" {
		return 1
	}
	return 50
}

// request builds a request a pattern matches, filling its wildcards.
func request(t *testing.T, pattern string) *http.Request {
	t.Helper()
	verb, rest, _ := strings.Cut(pattern, " ")
	path := rest
	if i := strings.Index(path, "{"); i >= 0 {
		path = path[:i] + "some-id"
	}
	req, err := http.NewRequest(verb, "https://"+path+"?part=snippet", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestEveryMethodResolvesToItsCost(t *testing.T) {
	classic, err := costs.New(Classic())
	if err != nil {
		t.Fatal(err)
	}
	gran, err := costs.New(Granular())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, rule := range Classic().Rules {
		req := request(t, rule.Pattern)
		e, err := classic.Resolve(req)
		if err != nil {
			t.Errorf("classic %s: %v", rule.Pattern, err)
			continue
		}
		if e.Name != rule.Endpoint || len(e.Charges) != 1 || e.Charges[0] != (costs.Charge{Bucket: Pool, Units: classicPrice(e.Name)}) {
			t.Errorf("classic %s = %s %v, want %s %d pool units", rule.Pattern, e.Name, e.Charges, rule.Endpoint, classicPrice(rule.Endpoint))
		}
		g, err := gran.Resolve(req)
		if err != nil {
			t.Errorf("granular %s: %v", rule.Pattern, err)
			continue
		}
		want := costs.Charge{Bucket: Pool, Units: classicPrice(g.Name)}
		switch g.Name {
		case "search.list":
			want = costs.Charge{Bucket: Search, Units: 1}
		case "videos.insert":
			want = costs.Charge{Bucket: Upload, Units: 1}
		case "videos.batchGetStats":
			want = costs.Charge{Bucket: BatchGetStats, Units: 1}
		}
		if len(g.Charges) != 1 || g.Charges[0] != want {
			t.Errorf("granular %s = %v, want %v", rule.Pattern, g.Charges, want)
		}
		seen[e.Name] = true
	}
	// Every method of DESIGN.md's list, on both hosts and the upload paths.
	for _, c := range []struct{ verb, url, endpoint string }{
		{"GET", "https://youtube.googleapis.com/youtube/v3/search?q=x", "search.list"},
		{"GET", "https://www.googleapis.com/youtube/v3/search?q=x", "search.list"},
		{"GET", "https://youtube.googleapis.com/youtube/v3/videos?chart=mostPopular", "videos.list"},
		{"POST", "https://www.googleapis.com/upload/youtube/v3/videos?uploadType=resumable", "videos.insert"},
		{"POST", "https://youtube.googleapis.com/upload/youtube/v3/videos", "videos.insert"},
		{"POST", "https://youtube.googleapis.com/youtube/v3/videos/rate?id=x&rating=like", "videos.rate"},
		{"GET", "https://youtube.googleapis.com/youtube/v3/videos/getRating?id=x", "videos.getRating"},
		{"PUT", "https://youtube.googleapis.com/youtube/v3/videos", "videos.update"},
		{"DELETE", "https://youtube.googleapis.com/youtube/v3/videos?id=x", "videos.delete"},
		{"POST", "https://www.googleapis.com/upload/youtube/v3/captions", "captions.insert"},
		{"PUT", "https://youtube.googleapis.com/youtube/v3/captions", "captions.update"},
		{"GET", "https://youtube.googleapis.com/youtube/v3/captions?videoId=x", "captions.list"},
		{"GET", "https://youtube.googleapis.com/youtube/v3/liveChat/messages?liveChatId=x", "liveChatMessages.list"},
		{"GET", "https://youtube.googleapis.com/youtube/v3/channels?id=UCx", "channels.list"},
		{"POST", "https://www.googleapis.com/upload/youtube/v3/thumbnails/set?videoId=x", "thumbnails.set"},
		{"GET", "https://youtube.googleapis.com/youtube/v3/videos:batchGetStats?ids=a,b", "videos.batchGetStats"},
	} {
		req, _ := http.NewRequest(c.verb, c.url, nil)
		e, err := classic.Resolve(req)
		if err != nil || e.Name != c.endpoint {
			t.Errorf("%s %s = %q (%v), want %s", c.verb, c.url, e.Name, err, c.endpoint)
		}
	}
	for _, m := range []string{"search.list", "videos.insert", "captions.insert", "captions.update", "captions.list", "liveChatMessages.list", "videos.list", "channels.list"} {
		if !seen[m] {
			t.Errorf("the table has no rule for %s", m)
		}
	}
}

func TestOtherHostsAndOverrides(t *testing.T) {
	spec := Classic("127.0.0.1:8080")
	spec, err := spec.Override("videos.insert", costs.Charge{Bucket: Pool, Units: 100}) // the 2025-12-04 price
	if err != nil {
		t.Fatal(err)
	}
	tab, err := costs.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://127.0.0.1:8080/upload/youtube/v3/videos", nil)
	if e, err := tab.Resolve(req); err != nil || e.Units() != 100 {
		t.Errorf("overridden videos.insert on a custom host = %d units (%v), want 100", e.Units(), err)
	}
	req, _ = http.NewRequest("GET", "https://youtube.googleapis.com/youtube/v3/videos", nil)
	if _, err := tab.Resolve(req); err == nil {
		t.Error("a table for one host matched another")
	}
}
