package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/providers/anthropic"
	"github.com/tollgate/tollgate/providers/gemini"
	"github.com/tollgate/tollgate/providers/github"
	"github.com/tollgate/tollgate/providers/openai"
)

// BenchmarkProvidersPaired measures a provider's own request through its
// Transport, against a local upstream that answers as the provider does
// (usage in the body, no quota headers), as BenchmarkScopesPaired
// measures a plain decision: each of 50 callers alternates a request
// through the Transport and a redis_rate decision (writing its state),
// each on a redis-server of its own, over 10,000 API keys (each its own
// scope), every request admitted. It reports Redis's main-thread CPU per
// request (INFO cpu: the decision, the settlement, a cap's slot taken and
// released, whatever the Transport does) against redis_rate's per
// decision. The Transports run as they ship (shared pipelines), with
// limits no run reaches. Cases: openai (a chat completion: requests and
// tokens a minute, settled from usage), anthropic (a message: requests,
// input and output tokens a minute as token buckets, settled from
// usage), gemini (a generateContent: requests a minute and a Pacific day,
// input tokens a minute, settled from usageMetadata), github (a REST read:
// the core hour, the REST points a minute and the cap of 100 in flight).
func BenchmarkProvidersPaired(b *testing.B) {
	const n = 10_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	api := httptest.NewServer(http.HandlerFunc(upstreamAnswer))
	b.Cleanup(api.Close)
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = callers
	b.Cleanup(base.CloseIdleConnections)
	limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Minute}

	for _, v := range []struct {
		name    string
		start   func(rdb *redis.Client) (http.RoundTripper, error)
		request func(ctx context.Context, key string) *http.Request
	}{
		{"openai", func(rdb *redis.Client) (http.RoundTripper, error) {
			return openai.NewTransport(rdb, &openai.Options{Base: base, Limits: openai.Limits{RPM: 1_000_000, TPM: 30_000_000}})
		}, func(ctx context.Context, key string) *http.Request {
			r := post(ctx, api.URL+"/v1/chat/completions", `{"model":"gpt-4o-mini","max_tokens":100,"messages":[{"role":"user","content":"Say hello."}]}`)
			r.Header.Set("Authorization", "Bearer sk-"+key)
			return r
		}},
		{"anthropic", func(rdb *redis.Client) (http.RoundTripper, error) {
			return anthropic.NewTransport(rdb, &anthropic.Options{Base: base, Limits: anthropic.Limits{RPM: 1_000_000, ITPM: 30_000_000, OTPM: 30_000_000}})
		}, func(ctx context.Context, key string) *http.Request {
			r := post(ctx, api.URL+"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"Say hello."}]}`)
			r.Header.Set("X-Api-Key", "sk-ant-"+key)
			r.Header.Set("Anthropic-Version", "2023-06-01")
			return r
		}},
		{"gemini", func(rdb *redis.Client) (http.RoundTripper, error) {
			return gemini.NewTransport(rdb, &gemini.Options{Base: base, Limits: gemini.Limits{RPM: 1_000_000, TPM: 30_000_000, RPD: 1_000_000_000}})
		}, func(ctx context.Context, key string) *http.Request {
			r := post(ctx, api.URL+"/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[{"role":"user","parts":[{"text":"Say hello."}]}]}`)
			r.Header.Set("X-Goog-Api-Key", "AIza"+key)
			return r
		}},
		{"github", func(rdb *redis.Client) (http.RoundTripper, error) {
			return github.NewTransport(rdb, &github.Options{Base: base})
		}, func(ctx context.Context, key string) *http.Request {
			r, _ := http.NewRequestWithContext(ctx, "GET", api.URL+"/repos/octo/hello", nil)
			r.Header.Set("Authorization", "Bearer ghp_"+key)
			return r
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			tg, rr := server(b), server(b)
			rt, err := v.start(tg)
			if err != nil {
				b.Fatal(err)
			}
			if c, ok := rt.(interface{ Close() error }); ok {
				b.Cleanup(func() { c.Close() })
			}
			peer := redis_rate.NewLimiter(rr)
			var next atomic.Int64
			pair := func(ctx context.Context, _ int) error {
				key := keys[int(next.Add(1))%n]
				resp, err := rt.RoundTrip(v.request(ctx, key))
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return errorString("bench: the upstream answered " + resp.Status)
				}
				_, err = peer.AllowN(ctx, key, limit, 1)
				return err
			}
			mine, theirs := pairedCPU(b, n, tg, rr, pair)
			b.ReportMetric(mine, "tollgate-cpu-µs/op")
			b.ReportMetric(theirs, "redis_rate-cpu-µs/op")
			b.ReportMetric(mine/theirs, "cpu-ratio")
		})
	}
}

// post returns a POST of a JSON body.
func post(ctx context.Context, url, body string) *http.Request {
	r, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// upstreamAnswer answers as each provider does, its usage in the body.
func upstreamAnswer(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/chat/completions":
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":3,"total_tokens":14}}`)
	case r.URL.Path == "/v1/messages":
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","usage":{"input_tokens":11,"output_tokens":3}}`)
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello."}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":11,"candidatesTokenCount":3,"totalTokenCount":14}}`)
	default:
		io.WriteString(w, `{"id":1,"name":"hello","full_name":"octo/hello"}`)
	}
}
