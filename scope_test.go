package tollgate_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate"
)

// FuzzCredentialScope: whatever a credential holds, the scope derived from
// it is a fixed-size name that never shows the credential, and equal
// credentials give equal scopes.
//
//	go test . -run '^$' -fuzz FuzzCredentialScope -fuzztime 5m
func FuzzCredentialScope(f *testing.F) {
	for _, s := range []string{"AIzaSyA-0123456789abcdef", "ya29.a0Af", "k{e}y", "line\nbreak", "\xff\xfe", strings.Repeat("z", 10<<10), "", " ", "\t \n"} {
		f.Add(s)
	}
	scope := tollgate.CredentialScope(func(r *http.Request) string { return r.URL.Query().Get("key") })
	f.Fuzz(func(t *testing.T, secret string) {
		h := tollgate.HashCredential(secret)
		if len(h) != len("cred-")+32 || !strings.HasPrefix(h, "cred-") {
			t.Fatalf("HashCredential gave %q", h)
		}
		if len(secret) >= 6 && strings.Contains(h, secret) {
			t.Fatalf("the scope %q shows the credential", h)
		}
		req := &http.Request{URL: &url.URL{RawQuery: url.Values{"key": {secret}}.Encode()}, Header: http.Header{}}
		got, err := scope(req)
		if strings.TrimSpace(secret) == "" {
			if err == nil {
				t.Fatalf("a request whose credential is %q got the scope %q", secret, got)
			}
			return
		}
		if err != nil || got != h {
			t.Fatalf("CredentialScope = %q, %v; want %q", got, err, h)
		}
	})
}
