package provider

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
)

// TestAnnounces: told and all follow the need, the dialect and the status.
func TestAnnounces(t *testing.T) {
	h := http.Header{}
	h.Set("X-Ratelimit-Limit-Requests", "60")
	ok := &http.Response{StatusCode: 200, Header: h}
	busy := &http.Response{StatusCode: 429, Header: h}
	for _, c := range []struct {
		name      string
		resp      *http.Response
		dialect   string
		need      []string
		told, all bool
	}{
		{"nil response", nil, "openai", nil, false, false},
		{"nothing needed", busy, "openai", nil, true, true},
		{"needed and announced", busy, "openai", []string{"requests"}, true, true},
		{"one not announced, success", ok, "openai", []string{"requests", "tokens"}, true, false},
		{"one not announced, refusal", busy, "openai", []string{"requests", "tokens"}, false, false},
		{"other dialect", busy, "anthropic", []string{"requests"}, false, false},
	} {
		told, all := Announces(c.resp, c.dialect, c.need...)
		if told != c.told || all != c.all {
			t.Errorf("%s: told %v all %v, want %v %v", c.name, told, all, c.told, c.all)
		}
	}
}

// TestRoute: a scope's first request goes alone through learned, the
// others waiting; an answer that announces too little sends the scope to
// unannounced, one that announces all sends it back; a waiter's context
// ends its wait.
func TestRoute(t *testing.T) {
	learned, unannounced := &tollgate.Transport{}, &tollgate.Transport{}
	var a Announcing
	told, all := true, false
	read := func(*http.Response) (bool, bool) { return told, all }
	ctx := context.Background()

	tr, done, err := a.Route(ctx, learned, unannounced, "s", read)
	if err != nil || tr != learned {
		t.Fatalf("first request: %p %v, want learned", tr, err)
	}
	waited := make(chan *tollgate.Transport)
	go func() {
		tr, done, err := a.Route(ctx, learned, unannounced, "s", read)
		if err == nil {
			done(nil)
		}
		waited <- tr
	}()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, _, err := a.Route(short, learned, unannounced, "s", read); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past its context: %v", err)
	}
	select {
	case <-waited:
		t.Fatal("a second request went before the first was answered")
	default:
	}
	done(&http.Response{StatusCode: 200})
	if tr := <-waited; tr != unannounced {
		t.Fatalf("after a silent answer: %p, want unannounced", tr)
	}
	if !a.Silent("s") || a.Pick(learned, unannounced, "s") != unannounced || a.Pick(learned, nil, "s") != learned {
		t.Fatal("Silent or Pick do not see the silent scope")
	}
	if a.Silent("other") || a.Pick(learned, unannounced, "other") != learned {
		t.Fatal("an unknown scope is taken as silent")
	}

	all = true
	_, done, _ = a.Route(ctx, learned, unannounced, "s", read)
	done(&http.Response{StatusCode: 200})
	if tr, _, _ := a.Route(ctx, learned, unannounced, "s", read); tr != learned {
		t.Fatalf("after an answer announcing all: %p, want learned", tr)
	}

	if tr, done, err := a.Route(ctx, learned, nil, "t", read); tr != learned || err != nil {
		t.Fatalf("without unannounced: %p %v", tr, err)
	} else {
		done(nil)
	}
}
