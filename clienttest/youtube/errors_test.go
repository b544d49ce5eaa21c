package youtube_test

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	yt "google.golang.org/api/youtube/v3"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/providers/youtube"
)

// TestErrorsThroughTheClient: each error answer of the API, sent to
// Google's client through the Transport. The quota errors come back as a
// *tollgate.QuotaError from the upstream, and the calls they stop are
// refused without being sent; the others come back as Google's own
// *googleapi.Error, and stop nothing.
func TestErrorsThroughTheClient(t *testing.T) {
	list := func(svc *yt.Service) error {
		_, err := svc.Videos.List([]string{"id"}).Id("some-video").Do()
		return err
	}
	search := func(svc *yt.Service) error {
		_, err := svc.Search.List([]string{"id"}).Q("lofi").Do()
		return err
	}
	live := func(svc *yt.Service) error {
		_, err := svc.LiveBroadcasts.List([]string{"id"}).Mine(true).Do()
		return err
	}
	const day = 24 * time.Hour // the rig's Window stands for the Pacific day
	cases := []struct {
		name     string
		granular bool
		fault    ytsim.Fault
		method   string // the simulator's name of the method the fault answers
		call     func(*yt.Service) error
		quota    bool          // read as quota: a *tollgate.QuotaError from the upstream
		bucket   string        // the bucket it names; "" for the whole project
		pause    time.Duration // its RetryAfter
	}{
		{"quotaExceeded", false, ytsim.QuotaExceeded, "videos.list", list, true, youtube.Pool, day},
		{"quotaExceeded on a search, granular", true, ytsim.QuotaExceeded, "search.list", search, true, youtube.Search, day},
		{"dailyLimitExceeded", false, ytsim.DailyLimitExceeded, "videos.list", list, true, youtube.Pool, day},
		{"rateLimitExceeded", false, ytsim.RateLimitExceeded, "videos.list", list, true, "", youtube.DefaultRatePause},
		{"rateLimitExceeded as a 429", false, ytsim.RateLimitExceeded429, "videos.list", list, true, "", youtube.DefaultRatePause},
		{"userRateLimitExceeded", true, ytsim.UserRateLimitExceeded, "videos.list", list, true, "", youtube.DefaultRatePause},
		{"userRequestsExceedRateLimit", false, ytsim.UserRequestsExceedRateLimit, "liveBroadcasts.list", live, true, "", youtube.DefaultRatePause},
		{"forbidden", false, ytsim.Forbidden, "videos.list", list, false, "", 0},
		{"insufficientPermissions", true, ytsim.InsufficientPermissions, "liveBroadcasts.list", live, false, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.granular, rigOptions{})
			if err := r.sim.Inject(c.method, c.fault); err != nil {
				t.Fatal(err)
			}
			err := c.call(r.svc)
			var qe *tollgate.QuotaError
			var ge *googleapi.Error
			switch {
			case c.quota && !errors.As(err, &qe):
				t.Fatalf("%v, want a *tollgate.QuotaError", err)
			case c.quota && (qe.Cause != tollgate.PausedByUpstream || qe.Bucket != c.bucket || qe.RetryAfter < c.pause-2*time.Second || qe.RetryAfter > c.pause):
				t.Fatalf("%+v, want one from the upstream for bucket %q and %v", qe, c.bucket, c.pause)
			case !c.quota && (!errors.As(err, &ge) || ge.Code != http.StatusForbidden || len(ge.Errors) != 1 || ge.Errors[0].Reason != string(c.fault)):
				t.Fatalf("%v, want Google's *googleapi.Error 403 %s", err, c.fault)
			}
			calls, _ := r.requests(c.method)
			err = c.call(r.svc)
			again, _ := r.requests(c.method)
			if c.quota {
				if !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || again != calls {
					t.Errorf("the call again: %v, and %d more sent; want a *tollgate.QuotaError, none sent", err, again-calls)
				}
			} else if err != nil || again != calls+1 {
				t.Errorf("the call again: %v, and %d more sent; want it sent and answered", err, again-calls)
			}
		})
	}
}

// TestUploadLimitThroughTheClient: YouTube's 400 uploadLimitExceeded on a
// channel's upload stops that channel's uploads (its OAuth token's), and
// nothing else of the project.
func TestUploadLimitThroughTheClient(t *testing.T) {
	const token = "ya29.channel-token"
	r := newRig(t, true, rigOptions{token: token, wrap: func(base http.RoundTripper) http.RoundTripper {
		return &oauth2.Transport{Source: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token}), Base: base}
	}})
	upload := func() error {
		_, err := r.svc.Videos.Insert([]string{"snippet"}, &yt.Video{Snippet: &yt.VideoSnippet{Title: "Holiday"}}).
			Media(bytes.NewReader(make([]byte, 600<<10)), googleapi.ChunkSize(chunkSize)).Do()
		return err
	}
	if err := upload(); err != nil {
		t.Fatal(err)
	}
	if err := r.sim.Inject("videos.insert", ytsim.UploadLimitExceeded); err != nil {
		t.Fatal(err)
	}
	scope := "uploads-" + tollgate.HashCredential(token)
	var qe *tollgate.QuotaError
	if err := upload(); !errors.As(err, &qe) || qe.Cause != tollgate.PausedByUpstream || qe.Scope != scope || qe.RetryAfter != 24*time.Hour {
		t.Fatalf("the upload YouTube refused: %v, want a *tollgate.QuotaError from the upstream for %s, 24h (the Window)", err, scope)
	}
	calls, _ := r.requests("videos.insert")
	if err := upload(); !errors.As(err, &qe) || qe.Scope != scope {
		t.Errorf("the next upload: %v, want a *tollgate.QuotaError for %s", err, scope)
	}
	if again, _ := r.requests("videos.insert"); again != calls {
		t.Errorf("%d more uploads reached YouTube, want none", again-calls)
	}
	if _, err := r.svc.Thumbnails.Set("some-video").Media(bytes.NewReader([]byte{0xff, 0xd8, 0xff})).Do(); err != nil {
		t.Errorf("a thumbnail of the same channel: %v", err)
	}
	if _, err := r.svc.Videos.List([]string{"id"}).Id("some-video").Do(); err != nil {
		t.Errorf("a list call of the same channel: %v", err)
	}
	// tollgate counts both calls it sent: Google charges every request
	// (calculator: "including invalid requests"). The simulator charges no
	// refused call, Google's practice there being undocumented; tollgate
	// errs on the side of the quota.
	got, sim := r.charged()
	if got[youtube.Upload] != 2 || sim[youtube.Upload] != 1 {
		t.Errorf("upload bucket: tollgate counts %d, the simulator charged %d; want 2 and 1", got[youtube.Upload], sim[youtube.Upload])
	}
}
