package tollgate_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// scriptCalls counts the scripts a client runs, less those refused with
// NOSCRIPT (a script's first run on a server is sent twice).
type scriptCalls struct{ n atomic.Int64 }

func (c *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); (name == "evalsha" || name == "eval") && (err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT")) {
			c.n.Add(1)
		}
		return err
	}
}

func (c *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if name := cmd.Name(); name == "evalsha" || name == "eval" {
				if e := cmd.Err(); e == nil || !strings.HasPrefix(e.Error(), "NOSCRIPT") {
					c.n.Add(1)
				}
			}
		}
		return err
	}
}

// TestSettleEveryBucketInOneRoundTrip: an LLM call charged requests, input
// and output tokens (token buckets) and settled from its answer's usage
// settles both token counts in one script call.
func TestSettleEveryBucketInOneRoundTrip(t *testing.T) {
	tab, err := costs.New(costs.Spec{
		Buckets: []string{"requests", "input", "output"},
		Rules: []costs.Rule{{
			Pattern: "POST /v1/messages", Endpoint: "messages",
			Charges: []costs.Charge{{Bucket: "requests", Units: 1}, {Bucket: "input", Units: 1000}, {Bucket: "output", Units: 1000}},
			Settle:  []costs.Settle{{Bucket: "input", Field: "usage.input_tokens"}, {Bucket: "output", Field: "usage.output_tokens"}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rdb := inProcessClient(t)
	calls := &scriptCalls{}
	rdb.AddHook(calls)
	perMinute := func(n int64) tollgate.Bucket {
		return tollgate.Bucket{Limits: []quota.Limit{quota.TokenBucket(n, n, time.Minute)}}
	}
	noon := time.Date(2026, 8, 2, 12, 0, 0, 0, time.UTC) // a still clock: the levels read are the settled ones
	tr := newTransport(t, tollgate.Config{
		Transit: -1, Limiter: limiterOn(t, rdb, quota.WithClock(func() time.Time { return noon })), Costs: tab,
		Buckets: map[string]tollgate.Bucket{"requests": perMinute(50), "input": perMinute(40000), "output": perMinute(8000)},
	})
	up := newUpstream(t)
	doc := `{"id":"msg_1","content":[{"type":"text","text":"` + strings.Repeat("word ", 500) + `"}],"usage":{"input_tokens":412,"output_tokens":96}}`
	up.setRespond(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, doc)
	})
	req, _ := http.NewRequest("POST", up.URL+"/v1/messages", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	before := calls.n.Load()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := calls.n.Load() - before; got != 1 {
		t.Errorf("settling the input and output tokens ran %d scripts, want 1", got)
	}
	for bucket, want := range map[string]int64{"requests": 1, "input": 412, "output": 96} {
		u, err := tr.Usage(context.Background(), tollgate.DefaultScope, bucket)
		if err != nil {
			t.Fatal(err)
		}
		if u[0].Used != want {
			t.Errorf("%s: used %d after the answer, want %d", bucket, u[0].Used, want)
		}
	}
}
