package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSimulationCountsInWords: the simulated API, asked once, says "1
// request" and "1 pool unit" when it stops, not "1 requests".
func TestSimulationCountsInWords(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lockedBuffer{}
	var errs strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-simulate", "127.0.0.1:0", "-window", "10s", "-quota", "600", "-table", "classic"}, out, &errs, noEnv)
	}()
	listening := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/youtube/v3)`)
	var base string
	for range 500 {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if base == "" {
		t.Fatalf("the simulation is not listening after 5s: %s", out.String())
	}
	resp, err := http.Get(base + "/videos?part=snippet&chart=mostPopular&regionCode=GB&key=demo")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	text := out.String()
	if !strings.Contains(text, ": 1 request, 1 pool unit, 0 quota errors;") {
		t.Errorf("the simulation's summary does not count in words:\n%s", text)
	}
}

// lockedBuffer is a buffer the command writes to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
