package github

import (
	"context"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/ghsim"
)

func TestCredential(t *testing.T) {
	for _, c := range []struct{ header, want string }{
		{"Bearer tok", "tok"},
		{"bearer  tok ", "tok"},
		{"token tok", "tok"},
		{"Bearer\ttok", "tok"},
		{"Basic dXNlcjp0b2s=", "Basic dXNlcjp0b2s="},
		{"Bearer ", ""}, // go-github's WithAuthToken("")
		{"Bearer", ""},
		{"Bearer   ", ""},
		{"token ", ""},
		{"TOKEN\t", ""},
		{"Basic ", ""},
		{"", ""},
		{"   ", ""},
	} {
		req, _ := http.NewRequest("GET", "https://api.github.com/user", nil)
		req.Header["Authorization"] = []string{c.header}
		if got := credential(req); got != c.want {
			t.Errorf("credential(Authorization: %q) = %q, want %q", c.header, got, c.want)
		}
	}
}

// A request whose Authorization header carries no credential (go-github
// without a token sends "Bearer ") is anonymous: it spends
// AnonymousScope's 60 an hour, as GitHub counts it, and no credential
// scope is made of the scheme's name.
func TestNoCredentialIsAnonymous(t *testing.T) {
	r := newRig(t, ghsim.Config{})
	tr := r.transport(t, Options{})
	headers := []string{"Bearer ", "Bearer   ", "token ", "Basic ", "  ", ""}
	for _, h := range headers {
		req, _ := http.NewRequest("GET", r.api.URL+"/repos/o/r", nil)
		if h != "" {
			req.Header["Authorization"] = []string{h}
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("Authorization %q: %v", h, err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-RateLimit-Limit"); got != "60" {
			t.Errorf("Authorization %q: GitHub (simulated) counted it against a limit of %s, want the anonymous 60", h, got)
		}
	}
	ctx := context.Background()
	usage, err := tr.Usage(ctx, AnonymousScope, Core)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := usage[0].Used, int64(len(headers)); got != want {
		t.Errorf("the anonymous scope counts %d requests, want %d", got, want)
	}
	for _, scheme := range []string{"Bearer", "bearer", "token", "Basic"} {
		usage, err := tr.Usage(ctx, tollgate.HashCredential(scheme), Core)
		if err != nil {
			t.Fatal(err)
		}
		if usage[0].Used != 0 || usage[0].Limit.Units == 0 {
			t.Errorf("the scheme %q was metered as a credential: %+v", scheme, usage[0])
		}
	}
}
