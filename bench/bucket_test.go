package bench

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/tollgate/tollgate/quota"
)

// BenchmarkBucketPaired measures a decision on a token bucket
// (quota.TokenBucket) beside one on a sliding window of the same size, as
// BenchmarkScopesPaired measures tollgate beside redis_rate: each of 50
// callers alternates a decision on a one-minute sliding window and one
// on a bucket refilled a minute's worth a minute, each on a redis-server
// of its own, over 10,000 scopes, cost 1, one round trip per decision
// (WithPipelines(0)), every decision admitting. It reports each server's
// main-thread CPU time per decision (INFO cpu), their ratio
// (bucket/window), and the script time per call (commandstats). The
// redis_rate case pairs the bucket with redis_rate's GCRA, which decides
// one limit alone; the day cases charge a Pacific day beside each; the
// three-buckets case charges three of each kind (a model's requests,
// input and output tokens, the tokens 100 a call); the gemini case pairs
// redis_rate with Gemini's shape as token buckets: requests a minute and
// a Pacific day, and input tokens a minute (100 a call), three charges.
func BenchmarkBucketPaired(b *testing.B) {
	pacific, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	scopes := make([]string, n)
	for i := range scopes {
		scopes[i] = "scope-" + strconv.Itoa(i)
	}
	// Never reached: a million a minute per scope.
	bucket := quota.TokenBucket(1_000_000, 1_000_000, time.Minute)
	day := quota.PerDay(quota.MaxUnits, pacific)
	peerLimit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}
	for _, v := range []struct {
		name           string
		window, bucket []quota.Limit
		peer           bool // the window's side is redis_rate's GCRA
	}{
		{"window-vs-bucket/cost=1", []quota.Limit{never(time.Minute)}, []quota.Limit{bucket}, false},
		{"window-vs-bucket/with-a-day", []quota.Limit{never(time.Minute), day}, []quota.Limit{bucket, day}, false},
		{"redis_rate-vs-bucket/cost=1", nil, []quota.Limit{bucket}, true},
		{"redis_rate-vs-bucket/with-a-day", nil, []quota.Limit{bucket, day}, true},
		{"redis_rate-vs-bucket/gemini", nil, []quota.Limit{bucket}, true},
		{"window-vs-bucket/three-buckets", []quota.Limit{never(time.Minute)}, []quota.Limit{bucket}, false},
	} {
		b.Run(v.name, func(b *testing.B) {
			ws, bs := server(b), server(b)
			wlim := limiter(b, ws, quota.WithPipelines(0))
			blim := limiter(b, bs, quota.WithPipelines(0))
			peer := redis_rate.NewLimiter(ws)
			wc := []quota.Demand{{Bucket: "pool", Units: 1, Limits: v.window}}
			bc := []quota.Demand{{Bucket: "pool", Units: 1, Limits: v.bucket}}
			if strings.HasSuffix(v.name, "three-buckets") {
				// A model's requests, input and output tokens: three charges.
				for _, name := range []string{"input", "output"} {
					wc = append(wc, quota.Demand{Bucket: name, Units: 100, Limits: v.window})
					bc = append(bc, quota.Demand{Bucket: name, Units: 100, Limits: v.bucket})
				}
			}
			if strings.HasSuffix(v.name, "gemini") {
				bc = append(bc, quota.Demand{Bucket: "day", Units: 1, Limits: []quota.Limit{day}},
					quota.Demand{Bucket: "input", Units: 100, Limits: v.bucket})
			}
			var next atomic.Int64
			pair := func(ctx context.Context, _ int) error {
				s := scopes[int(next.Add(1))%n]
				if v.peer {
					if _, err := peer.AllowN(ctx, s, peerLimit, 1); err != nil {
						return err
					}
				} else if r, err := wlim.Allow(ctx, s, wc...); err != nil || !r.OK() {
					return refusedOr(err)
				}
				r, err := blim.Allow(ctx, s, bc...)
				if err != nil || !r.OK() {
					return refusedOr(err)
				}
				return nil
			}
			w, bk := pairedCPU(b, n, ws, bs, pair)
			b.ReportMetric(w, "window-cpu-µs/op")
			b.ReportMetric(bk, "bucket-cpu-µs/op")
			b.ReportMetric(bk/w, "cpu-ratio")
			b.ReportMetric(serverMicros(b, ws, "evalsha"), "window-redis-µs/op")
			b.ReportMetric(serverMicros(b, bs, "evalsha"), "bucket-redis-µs/op")
		})
	}
}

// refusedOr returns err, or an error for a refusal where every decision
// of the benchmark must admit.
func refusedOr(err error) error {
	if err != nil {
		return err
	}
	return errRefused
}

var errRefused = errorString("bench: a decision was refused where every one must admit")

type errorString string

func (e errorString) Error() string { return string(e) }
