package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
)

// chatOf is a chat completion's body for a model, padded to about size
// bytes.
func chatOf(model string, size int) string {
	b := fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "%%s"}], "max_tokens": 5}`, model)
	return fmt.Sprintf(b, strings.Repeat("x", max(size-len(b), 0)))
}

// TestModelsServed: an upstream serves the models its option "models"
// lists, and answers 400 naming the option for others, never reaching
// the upstream nor making a scope in Redis; without the option, a
// caller's flood of new models stops after maxNewModels, and another
// caller is still served the models already served and new ones.
func TestModelsServed(t *testing.T) {
	t.Run("listed", func(t *testing.T) {
		up := newEcho(t)
		cfg := fmt.Sprintf(`{"callers": [{"name": "php-cron", "token_env": "TOKEN_PHP"}],
		  "upstreams": [
		    {"name": "openai", "provider": "openai", "prefix": "/openai/", "target": %q, "key_env": "OAI_KEY", "options": {"models": ["gpt-4o-mini"]}},
		    {"name": "gemini", "provider": "gemini", "prefix": "/gemini/", "target": %q, "key_env": "YT_KEY", "options": {"models": ["gemini-2.0-flash"], "rpm": 100, "tpm": 100000, "rpd": 1000}}]}`,
			up.URL, up.URL)
		r := start(t, cfg, tollgate.Config{})
		php := map[string]string{"Authorization": "Bearer " + phpToken, "Content-Type": "application/json"}
		cases := []struct {
			path, body string
			want       int
		}{
			{"/openai/v1/chat/completions", chatOf("gpt-4o-mini", 0), 200},
			{"/openai/v1/chat/completions", chatOf("flood-1", 0), 400},
			{"/openai/v1/embeddings", `{"model": "flood-2", "input": "x"}`, 400},
			{"/openai/openai/deployments/flood-3/chat/completions", chatOf("gpt-4o-mini", 0), 400},
			{"/gemini/v1beta/models/gemini-2.0-flash:generateContent", `{"contents": [{"parts": [{"text": "hi"}]}]}`, 200},
			{"/gemini/v1beta/models/flood-4:generateContent", `{"contents": [{"parts": [{"text": "hi"}]}]}`, 400},
		}
		for _, c := range cases {
			n := len(up.requests())
			code, _, b := do(t, "POST", r.url+c.path, php, strings.NewReader(c.body))
			if code != c.want {
				t.Errorf("%s %.40s: %d %s, want %d", c.path, c.body, code, b, c.want)
				continue
			}
			if code == 400 {
				if e := errorBody(t, b); e.Cause != "model" || !strings.Contains(e.Message, `"models"`) || len(up.requests()) != n {
					t.Errorf("%s: %s; want cause model naming the option, not forwarded", c.path, b)
				}
			}
		}
		keys, err := r.rdb.Keys(t.Context(), "*flood*").Result()
		if err != nil || len(keys) != 0 {
			t.Errorf("Redis keys of refused models: %v %v", keys, err)
		}
	})
	t.Run("not listed", func(t *testing.T) {
		up := newEcho(t)
		r := start(t, openaiConfig(up.URL, `{"rpm": 1000}`), tollgate.Config{})
		php := map[string]string{"Authorization": "Bearer " + phpToken, "Content-Type": "application/json"}
		admitted := 0
		for i := range maxNewModels + 6 {
			code, _, b := do(t, "POST", r.url+"/openai/v1/chat/completions", php, strings.NewReader(chatOf(fmt.Sprintf("flood-%d", i), 0)))
			switch code {
			case 200:
				admitted++
			case 400:
				if e := errorBody(t, b); e.Cause != "model" || !strings.Contains(e.Message, `"models"`) {
					t.Errorf("flood-%d: %s; want cause model naming the option", i, b)
				}
			default:
				t.Fatalf("flood-%d: %d %s", i, code, b)
			}
		}
		if admitted != maxNewModels {
			t.Errorf("%d new models admitted, want %d", admitted, maxNewModels)
		}
		if code, _, b := do(t, "POST", r.url+"/openai/v1/chat/completions", php, strings.NewReader(chatOf("flood-0", 0))); code != 200 {
			t.Errorf("a model already served: %d %s", code, b)
		}
		node := map[string]string{"Authorization": "Bearer " + nodeToken, "Content-Type": "application/json"}
		for _, m := range []string{"flood-1", "gpt-4o-mini"} {
			if code, _, b := do(t, "POST", r.url+"/openai/v1/chat/completions", node, strings.NewReader(chatOf(m, 0))); code != 200 {
				t.Errorf("another caller, model %s: %d %s", m, code, b)
			}
		}
	})
}

// TestBufferedBytes: the bytes of bodies buffered at once are bounded
// per caller (429) and for the whole gateway (503), each with
// Retry-After; a body past max_body is 400, unread.
func TestBufferedBytes(t *testing.T) {
	arrived := make(chan struct{}, 4)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(up.Close)
	cfg := strings.Replace(openaiConfig(up.URL, `{"max_body": 4000}`), `"callers"`,
		`"limits": {"max_buffered": 1500, "max_buffered_per_caller": 1000}, "callers"`, 1)
	r := start(t, cfg, tollgate.Config{})
	path := r.url + "/openai/v1/chat/completions"
	php := map[string]string{"Authorization": "Bearer " + phpToken}
	node := map[string]string{"Authorization": "Bearer " + nodeToken}
	var wg sync.WaitGroup
	var held int
	wg.Go(func() { held, _, _ = do(t, "POST", path, php, strings.NewReader(chatOf("gpt-4o-mini", 800))) })
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never reached the upstream")
	}
	cases := []struct {
		who          map[string]string
		size, want   int
		cause, retry string
	}{
		{php, 800, 429, "caller_buffered", "1"},
		{node, 800, 503, "buffered", "1"},
		{node, 5000, 400, "body", ""},
	}
	for _, c := range cases {
		code, h, b := do(t, "POST", path, c.who, strings.NewReader(chatOf("gpt-4o-mini", c.size)))
		if code != c.want || errorBody(t, b).Cause != c.cause || h.Get("Retry-After") != c.retry {
			t.Errorf("%d bytes: %d Retry-After %q %s; want %d %s", c.size, code, h.Get("Retry-After"), b, c.want, c.cause)
		}
	}
	close(release)
	wg.Wait()
	if held != 200 {
		t.Errorf("the request holding the bytes: %d", held)
	}
	if code, _, b := do(t, "POST", path, php, strings.NewReader(chatOf("gpt-4o-mini", 800))); code != 200 {
		t.Errorf("after the bytes were given back: %d %s", code, b)
	}
}
