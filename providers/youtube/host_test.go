package youtube_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/providers/youtube"
)

// TestAnotherHost: with the default table, a request to another host (a
// proxy, a simulator) fails saying which hosts the table knows and how to
// give it this one; given its host, the table meters it.
func TestAnotherHost(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer api.Close()
	u, _ := url.Parse(api.URL)
	call := func(opts *youtube.Options) error {
		tr, err := youtube.NewTransport([]string{"KEY"}, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		resp, err := (&http.Client{Transport: tr}).Get(api.URL + "/youtube/v3/videos?part=id&id=x")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	err := call(nil)
	want := `Get "` + api.URL + `/youtube/v3/videos?part=id&id=x": youtube: the cost table has rules for youtube.googleapis.com and www.googleapis.com, not 127.0.0.1: to meter calls sent there, give its host to the table, Options.Table: youtube.Granular("` + u.Host + `"): costs: unknown endpoint: GET ` + u.Host + `/youtube/v3/videos`
	if err == nil || err.Error() != want || !errors.Is(err, costs.ErrUnknownEndpoint) {
		t.Errorf("with the default table: %v\nwant %s", err, want)
	}
	if err := call(&youtube.Options{Table: youtube.Granular(u.Host)}); err != nil {
		t.Errorf("with the table given the host: %v", err)
	}
}
