package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	yt "google.golang.org/api/youtube/v3"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/youtube"
)

// The polyglot test runs the test binary as the Go process: TestMain
// hands a process started with workerEnv set to runWorker.
const workerEnv = "TOLLGATE_POLYGLOT_GO_WORKER"

// workerConfig is what the Go process is told (JSON in workerEnv).
type workerConfig struct {
	Redis  string // the Redis the gateway uses too
	API    string // the simulated YouTube's URL, called directly
	Key    string // the same key as the gateway's YouTube upstream
	Passes int
	Start  time.Time // when to begin, at once with the other workers
}

// report is what a worker did, as each prints it (JSON): the PHP script,
// the Node script, and the Go process alike.
type report struct {
	Requests int            `json:"requests"`
	OK       int            `json:"ok"`
	Videos   int            `json:"videos"`   // videos.list calls answered
	Searches int            `json:"searches"` // search.list calls answered
	Status   map[string]int `json:"status"`   // answers by HTTP status; "0" for none
	Errors   []string       `json:"errors"`   // the first few failures

	Streamed         int `json:"streamed"`         // Node: calls streamed
	StreamsCompleted int `json:"streamsCompleted"` // Node: streams read to their end
}

// units is what the report's calls cost in the classic table.
func (r report) units() int64 { return int64(r.Videos) + 100*int64(r.Searches) }

// regions are the blog post's eight, as the PHP script has them too.
var regions = []string{"US", "GB", "DE", "FR", "JP", "BR", "IN", "KR"}

// youtubeOptions are the Go process's Transport options: the same quota,
// window and table as the gateway's YouTube upstream, so the same limits
// on the same keys in Redis. api is the simulator's URL.
func youtubeOptions(api string) *youtube.Options {
	host := api[len("http://"):]
	return &youtube.Options{Table: youtube.Classic(host), Quota: ytQuota, Window: ytWindow}
}

// runWorker is the Go process: Google's client through a youtube.Transport
// straight to the simulator, the same cron as the PHP script (the eight
// regions four at a time, a search every third pass). It prints its
// report as JSON.
func runWorker(cfgJSON string) error {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
	defer rdb.Close()
	tr, err := youtube.NewTransport([]string{cfg.Key}, rdb, youtubeOptions(cfg.API))
	if err != nil {
		return err
	}
	defer tr.Close()
	svc, err := yt.NewService(context.Background(),
		option.WithHTTPClient(&http.Client{Transport: tr}), option.WithEndpoint(cfg.API+"/"))
	if err != nil {
		return err
	}
	time.Sleep(time.Until(cfg.Start))

	var mu sync.Mutex
	r := report{Status: map[string]int{}}
	done := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		r.Requests++
		if err == nil {
			r.OK++
			r.Status["200"]++
			if what == "search" {
				r.Searches++
			} else {
				r.Videos++
			}
			return
		}
		status := "0" // not answered
		var qe *tollgate.QuotaError
		var ge *googleapi.Error
		switch {
		case errors.As(err, &qe):
			status = "refused" // by tollgate, before sending
		case errors.As(err, &ge):
			status = strconv.Itoa(ge.Code)
		}
		r.Status[status]++
		if len(r.Errors) < 5 {
			r.Errors = append(r.Errors, what+": "+err.Error())
		}
	}
	call := func(what string, f func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		done(what, f(ctx))
	}
	for pass := range cfg.Passes {
		var wg sync.WaitGroup
		for lane := range 4 {
			wg.Go(func() {
				for _, region := range regions[2*lane : 2*lane+2] {
					call("videos", func(ctx context.Context) error {
						_, err := svc.Videos.List([]string{"snippet", "statistics"}).Chart("mostPopular").
							RegionCode(region).MaxResults(10).Context(ctx).Do()
						return err
					})
				}
			})
		}
		wg.Wait()
		if pass%3 == 0 {
			call("search", func(ctx context.Context) error {
				_, err := svc.Search.List([]string{"snippet"}).Q("trending").Type("video").Context(ctx).Do()
				return err
			})
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Println(string(b))
	return err
}
