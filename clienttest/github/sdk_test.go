package github_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	gogithub "github.com/google/go-github/v75/github"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/ghsim"
	"github.com/tollgate/tollgate/providers/github"
)

// client is go-github on a Transport (in between, when cache is set, an
// HTTP cache), against the simulated API.
func client(t *testing.T, api *httptest.Server, tr *github.Transport, token string, cache bool) *gogithub.Client {
	t.Helper()
	var rt http.RoundTripper = tr
	if cache {
		rt = &etagCache{base: tr, bodies: map[string]cached{}}
	}
	c := gogithub.NewClient(&http.Client{Transport: rt}).WithAuthToken(token)
	var err error
	if c.BaseURL, err = url.Parse(api.URL + "/"); err != nil {
		t.Fatal(err)
	}
	return c
}

// go-github without a token (GITHUB_TOKEN unset: WithAuthToken("")) sends
// "Authorization: Bearer "; its requests are anonymous, 60 an hour, as
// GitHub counts them, not a credential named "Bearer" with 5,000.
func TestGoGitHubWithoutATokenIsAnonymous(t *testing.T) {
	api := httptest.NewServer(ghsim.New(ghsim.Config{}))
	defer api.Close()
	tr, err := github.NewTransport(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := client(t, api, tr, "", false)
	ctx := context.Background()
	for range 3 {
		if _, resp, err := c.Repositories.Get(ctx, "o", "r"); err != nil || resp.Rate.Limit != 60 {
			t.Fatalf("Repositories.Get: %v (GitHub's limit %d, want the anonymous 60)", err, resp.Rate.Limit)
		}
	}
	usage, err := tr.Usage(ctx, github.AnonymousScope, github.Core)
	if err != nil || usage[0].Used != 3 {
		t.Errorf("the anonymous scope: %+v %v; want 3 used", usage, err)
	}
	usage, err = tr.Usage(ctx, tollgate.HashCredential("Bearer"), github.Core)
	if err != nil || usage[0].Used != 0 {
		t.Errorf("a scope named by the scheme: %+v %v; want nothing used", usage, err)
	}
}

// go-github with an HTTP cache below it polls with ETags: the 304s cost
// no core unit, so a credential with 20 requests an hour polls 50 times
// without a refusal, from tollgate or from GitHub.
func TestGoGitHubPollingWithETagsKeepsTheHour(t *testing.T) {
	sim := ghsim.New(ghsim.Config{Core: 20})
	api := httptest.NewServer(sim)
	defer api.Close()
	tr, err := github.NewTransport(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := client(t, api, tr, "tok", true)
	ctx := context.Background()
	for i := range 50 {
		if _, _, err := c.Repositories.Get(ctx, "o", "r"); err != nil {
			t.Fatalf("poll %d: %v", i, err)
		}
	}
	usage, err := tr.Usage(ctx, tollgate.HashCredential("tok"), github.Core)
	if err != nil || usage[0].Used != 1 {
		t.Errorf("core: %+v %v; want the first request's unit only", usage, err)
	}
	if st := sim.Stats(); st.Primary+st.Secondary != 0 || st.Served != 50 {
		t.Errorf("the simulator: %+v; want 50 served, none refused", st)
	}
}

// etagCache is the least HTTP cache: it asks again with the last ETag of
// a URL, and answers a 304 with the body it kept.
type etagCache struct {
	base   http.RoundTripper
	mu     sync.Mutex
	bodies map[string]cached
}

type cached struct {
	etag   string
	header http.Header
	body   []byte
}

func (c *etagCache) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.URL.String()
	c.mu.Lock()
	kept, ok := c.bodies[key]
	c.mu.Unlock()
	if ok {
		req = req.Clone(req.Context())
		req.Header.Set("If-None-Match", kept.etag)
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && ok:
		resp.Body.Close()
		h := kept.header.Clone()
		for k, v := range resp.Header { // the rate-limit headers are the 304's
			h[k] = v
		}
		resp.StatusCode, resp.Status, resp.Header = http.StatusOK, "200 OK", h
		resp.Body = io.NopCloser(bytes.NewReader(kept.body))
	case resp.StatusCode == http.StatusOK && resp.Header.Get("ETag") != "":
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.bodies[key] = cached{resp.Header.Get("ETag"), resp.Header.Clone(), body}
		c.mu.Unlock()
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return resp, nil
}
