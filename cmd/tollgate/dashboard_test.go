package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestWebMalformedKey: one scope whose description, window meta or pause
// holds a value no process wrote (anything with access to Redis can)
// shows its error in its place; the page answers 200 and shows every
// other scope as usual.
func TestWebMalformedKey(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	tr := e.process(t, lim, nil)
	e.spend(t, tr, "project-a", "/v1/items", 3)
	e.spend(t, tr, "project-b", "/v1/items", 3)
	described(t, lim, "pool", "project-a", "project-b")
	if code, out, errs := cmd(t, nil, "pause", "-scope", "project-b", "-bucket", "pool", "-for", "1h", "-reason", "test", "-redis", e.url); code != 0 {
		t.Fatalf("pause: exit %d: %s%s", code, out, errs)
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.server.Addr})
	defer rdb.Close()
	ctx := context.Background()
	keyOf := func(pattern string) string {
		t.Helper()
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("no key matches %q: %v", pattern, err)
		}
		return keys[0]
	}
	base, _ := startWeb(t, e, "tok")
	for _, c := range []struct {
		name, key, bad, healthy string
	}{
		{"a description", keyOf("*{project-a}*:about"), `{"not": "a description"`, "project-b"},
		{"a window's meta", keyOf("*{project-a}*:meta"), "#9:garbage", "project-b"},
		{"a pause", keyOf("*{project-b}*:pause"), "garbage", "project-a"},
	} {
		good, err := rdb.Get(ctx, c.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		rdb.Set(ctx, c.key, c.bad, time.Hour)
		code, page := fetch(t, base+"/")
		rdb.Set(ctx, c.key, good, time.Hour)
		if code != http.StatusOK {
			t.Errorf("%s malformed: the page answers %d, want 200\n%s", c.name, code, page)
			continue
		}
		if !strings.Contains(page, `data-scope="`+c.healthy+`"`) || !strings.Contains(page, `<svg class="chart"`) {
			t.Errorf("%s malformed: the page does not show %s as usual", c.name, c.healthy)
		}
		if !strings.Contains(page, `class="scope-error"`) {
			t.Errorf("%s malformed: the page shows no error in the scope's place", c.name)
		}
	}
}

// TestPauseCapped: a pause is at most 7 days, from the command and from
// the page.
func TestPauseCapped(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	e.spend(t, e.process(t, lim, nil), "project-a", "/v1/items", 3)
	described(t, lim, "pool", "project-a")
	for _, d := range []string{"2562047h", "169h", "8d"} {
		if code, out, errs := cmd(t, nil, "pause", "-scope", "project-a", "-bucket", "pool", "-for", d, "-reason", "x", "-redis", e.url); code == 0 {
			t.Errorf("pause -for %s: exit 0 (%s), want a refusal", d, out+errs)
		}
	}
	if code, out, errs := cmd(t, nil, "pause", "-scope", "project-a", "-bucket", "pool", "-for", "168h", "-reason", "x", "-redis", e.url); code != 0 {
		t.Errorf("pause -for 168h: exit %d: %s%s", code, out, errs)
	}
	cmd(t, nil, "resume", "-scope", "project-a", "-bucket", "pool", "-redis", e.url)

	const token = "op-secret-7f3a"
	base, _ := startWeb(t, e, token)
	_, body := fetch(t, base+"/")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no form token")
	}
	for _, c := range []struct {
		d    string
		want int
	}{{"2562047h", http.StatusBadRequest}, {"169h", http.StatusBadRequest}, {"168h", http.StatusSeeOther}} {
		v := url.Values{"csrf": {m[1]}, "token": {token}, "by": {"alice"}, "scope": {"project-a"}, "bucket": {"pool"}, "for": {c.d}, "reason": {"x"}}
		if code := post(t, base+"/pause", v); code != c.want {
			t.Errorf("pause for %s from the page: %d, want %d", c.d, code, c.want)
		}
	}
}

// TestWebTokenGuessing: wrong operator tokens are limited: after a few,
// even the right one is refused 429 with Retry-After for a while.
func TestWebTokenGuessing(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter(t, nil)
	e.spend(t, e.process(t, lim, nil), "project-a", "/v1/items", 3)
	described(t, lim, "pool", "project-a")
	const token = "op-secret-7f3a"
	base, _ := startWeb(t, e, token)
	_, body := fetch(t, base+"/")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no form token")
	}
	form := func(tok string) url.Values {
		return url.Values{"csrf": {m[1]}, "token": {tok}, "by": {"alice"}, "scope": {"project-a"}, "bucket": {"pool"}, "for": {"1m"}, "reason": {"x"}}
	}
	refused := 0
	for i := range 20 {
		if code := post(t, base+"/pause", form("guess-"+string(rune('a'+i)))); code == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused == 0 {
		t.Error("20 wrong operator tokens in a row, none refused 429")
	}
	if code := post(t, base+"/pause", form(token)); code != http.StatusTooManyRequests {
		t.Errorf("the right token right after 20 wrong ones: %d, want 429 until the wait passes", code)
	}
}

// post sends a form to the page and returns the status, redirects not
// followed.
func post(t *testing.T, u string, v url.Values) int {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(u, v)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
