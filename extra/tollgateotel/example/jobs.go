package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/extra/tollgateotel"
	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/providers/youtube"
)

// chartPages is how many pages of a region's trending chart a job reads.
const chartPages = 2

// jobs are the regions' ingestion jobs, their Transport and the simulated
// API they call.
type jobs struct {
	o      options
	sim    *ytsim.Server
	api    *httptest.Server
	tr     *youtube.Transport
	client *http.Client
	waits  atomic.Int64 // the Transport's waits for a turn, as its hook saw them
	failed atomic.Int64 // jobs that ended on an error
}

// newJobs starts the simulated API and builds the instrumented Transport:
// rdb nil means the embedded Redis.
func newJobs(o options, rdb redis.UniversalClient, metrics *tollgateotel.Metrics) (*jobs, error) {
	j := &jobs{o: o}
	j.sim = ytsim.New(ytsim.Config{Quota: o.quota, Window: o.window, Granular: true, SearchQuota: o.searchQuota})
	j.api = httptest.NewServer(j.sim)
	host, _ := url.Parse(j.api.URL)
	tr, err := youtube.NewTransport([]string{"offline-demo-key"}, rdb, &youtube.Options{
		Table: youtube.Granular(host.Host), Quota: o.quota, SearchQuota: o.searchQuota, Window: o.window,
		// The Config the metrics instrument; a hook of its own still runs.
		Tollgate: metrics.Instrument(tollgate.Config{
			Policy: tollgate.Policies(tollgate.Policy{MaxWait: 3 * o.window}, nil),
			Trace:  tollgate.Trace{WaitStarted: func(context.Context, tollgate.Decision) { j.waits.Add(1) }},
		}),
	})
	if err != nil {
		j.api.Close()
		return nil, err
	}
	metrics.Observe(tr)
	j.tr, j.client = tr, &http.Client{Transport: tr}
	return j, nil
}

func (j *jobs) close() {
	j.tr.Close()
	j.api.Close()
}

// run runs one job per region, side by side.
func (j *jobs) run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, region := range j.o.regions {
		wg.Go(func() {
			if err := j.ingest(ctx, region); err != nil {
				j.failed.Add(1)
			}
		})
	}
	wg.Wait()
}

// ingest reads a region's trending chart, the channels in it, and one
// search.
func (j *jobs) ingest(ctx context.Context, region string) error {
	var channels []string
	token := ""
	for range chartPages {
		var page struct {
			NextPageToken string
			Items         []struct{ Snippet struct{ ChannelID string } }
		}
		q := url.Values{"part": {"snippet"}, "chart": {"mostPopular"}, "regionCode": {region}, "maxResults": {"50"}, "pageToken": {token}}
		if err := j.call(ctx, "videos", q, &page); err != nil {
			return err
		}
		for _, v := range page.Items {
			if !slices.Contains(channels, v.Snippet.ChannelID) {
				channels = append(channels, v.Snippet.ChannelID)
			}
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	for batch := range slices.Chunk(channels, 50) {
		q := url.Values{"part": {"statistics"}, "id": {strings.Join(batch, ",")}}
		if err := j.call(ctx, "channels", q, nil); err != nil {
			return err
		}
	}
	q := url.Values{"part": {"snippet"}, "q": {"trending"}, "regionCode": {region}, "type": {"video"}}
	return j.call(ctx, "search", q, nil)
}

// call sends one API call and decodes its answer into v (nil: skip it).
func (j *jobs) call(ctx context.Context, resource string, q url.Values, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", j.api.URL+"/youtube/v3/"+resource+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resource, resp.Status)
	}
	if v == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// report prints what the simulated API received, per method and bucket,
// and what the Transport saw: the numbers the metrics must agree with.
func (j *jobs) report(out io.Writer) {
	type sums struct{ calls, units, refused int64 }
	by := map[[2]string]*sums{}
	var keys [][2]string
	for _, a := range j.sim.Arrivals() {
		k := [2]string{a.Method, a.Bucket}
		if by[k] == nil {
			by[k] = &sums{}
			keys = append(keys, k)
		}
		by[k].calls++
		by[k].units += a.Units
		if a.Status == http.StatusForbidden {
			by[k].refused++
		}
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "upstream received\tbucket\tcalls\tunits\tquota errors")
	for _, k := range keys {
		s := by[k]
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\n", k[0], k[1], s.calls, s.units, s.refused)
	}
	w.Flush()
	fmt.Fprintf(out, "waits for a turn: %d; failed jobs: %d\n", j.waits.Load(), j.failed.Load())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, bucket := range []string{youtube.Pool, youtube.Search} {
		if u, err := j.tr.Usage(ctx, youtube.DefaultProject, bucket); err == nil && len(u) > 0 {
			fmt.Fprintf(out, "%s: %d of %d left\n", bucket, u[0].Remaining, u[0].Limit.Units)
		}
	}
}
