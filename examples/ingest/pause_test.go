package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/providers/youtube"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// TestPassesResumeAfterAPause: an operator pauses the project for an
// hour, far longer than -max-wait, and resumes it a second later. The
// regions' first passes are refused with the pause's reason; then, as a
// cron job would, the -duration run passes again once the pause has
// ended, rather than sleeping out the hour the refusal announced.
func TestPassesResumeAfterAPause(t *testing.T) {
	srv := redistest.Start(t)
	sim := ytsim.New(ytsim.Config{Quota: 100000, Window: time.Minute, Granular: true, SearchQuota: 1000})
	api := httptest.NewServer(sim)
	defer api.Close()
	lim, err := quota.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lim.PauseBecause(ctx, youtube.DefaultProject, "", time.Hour, "key rotation"); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		time.Sleep(time.Second)
		if _, err := ops.New(lim).Resume(ctx, youtube.DefaultProject, ""); err != nil {
			t.Error(err)
		}
	}()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{
		"-redis", "redis://" + srv.Addr, "-api", api.URL + "/youtube/v3", "-keys", "k", "-regions", "US,GB",
		"-quota", "100000", "-search-quota", "1000", "-window", "1m", "-max-wait", "200ms", "-duration", "5s",
	}, &stdout, &stderr, noEnv)
	<-resumed
	out := stdout.String()
	if code != 0 {
		t.Fatalf("exit %d; stderr %s\n%s", code, stderr.String(), out)
	}
	for _, region := range []string{"US", "GB"} {
		stoppedAt := strings.Index(out, "["+region+"] pass 1 stopped cleanly: videos.list refused: paused by an operator (key rotation)")
		if stoppedAt < 0 {
			t.Fatalf("[%s]'s first pass was not refused by the pause:\n%s", region, out)
		}
		if !regexp.MustCompile(`\[` + region + `\] pass \d+ done`).MatchString(out[stoppedAt:]) {
			t.Errorf("[%s] did not pass again once the pause had ended:\n%s", region, out)
		}
	}
}
