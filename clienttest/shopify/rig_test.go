package shopify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/clienttest/internal/rig"
	"github.com/tollgate/tollgate/providers/shopify"
)

// The load tests' worker processes: the test binary runs itself as them,
// each sending from several goroutines through its own Transport on one
// Redis (or, for the control run, straight) to the simulated shop the
// parent serves.

// childEnv carries a worker process's configuration (JSON); its presence
// makes the test binary a worker.
const childEnv = "TOLLGATE_SHOPIFY_CHILD"

// shop is the simulated shop's name.
const shop = "acme.myshopify.com"

// childConfig is what a worker process is told.
type childConfig = rig.Config

// workerResult is what one worker goroutine did.
type workerResult struct {
	Process, Worker int
	Queries         int    // answered with data
	Throttled       int    // answered THROTTLED or REST 429 (control run: what the app must handle)
	Refused         int    // refused by tollgate (a THROTTLED or 429 it turned into an error, or no room before the run's end)
	Cut             int    // 1 when tollgate refused its last call, whose turn came after the run's end
	Failed          int    // anything else
	FirstErr        string `json:",omitempty"`
}

func TestMain(m *testing.M) { rig.Main(m, childEnv, child) }

// The queries an app sends, as Shopify's documentation writes them: a
// catalogue page (52 points requested), an order page with a fragment
// (102), a product update (11).
var queries = []struct{ query, variables string }{
	{`query Products($first: Int!, $after: String) { products(first: $first, after: $after) { edges { cursor node { ...ProductParts } } pageInfo { hasNextPage endCursor } } } fragment ProductParts on Product { id title handle vendor }`, `{"first": 50}`},
	{`query Orders($n: Int = 20) { orders(first: $n, reverse: true) { nodes { id name lineItems(first: 3) { nodes { title quantity } } } } }`, ``},
	{`mutation Update($input: ProductInput!) { productUpdate(input: $input) { product { id } userErrors { field message } } }`, `{"input": {"id": "gid://shopify/Product/1", "title": "x"}}`},
}

// answer is what a worker reads of an answer.
type answer struct {
	Errors []struct {
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	} `json:"errors"`
}

// child is a worker process: it sends queries from cfg.Workers goroutines
// until the run ends and prints their results as JSON.
func child(raw string) int {
	return rig.Child(raw, func(cfg childConfig) (any, error) {
		base := rig.Base(cfg.Workers)
		var rt http.RoundTripper = base
		if cfg.Redis != "" {
			rdb := rig.Redis(cfg.Redis, cfg.Workers)
			defer rdb.Close()
			tr, err := shopify.NewTransport(rdb, &shopify.Options{Base: base, Shop: shop, Tollgate: rig.Tollgate(cfg.Minute, cfg.Transit)})
			if err != nil {
				return nil, err
			}
			defer tr.Close()
			rt = tr
		}
		client := &http.Client{Transport: rt}
		results := make([]workerResult, cfg.Workers)
		for w := range results {
			results[w].Process, results[w].Worker = cfg.Process, w
		}
		rig.Work(cfg.Start, cfg.Duration, cfg.Workers, cfg.Process, func(ctx context.Context, end time.Time, w int, rng *rand.Rand) bool {
			res := &results[w]
			throttled, err := send(ctx, client, cfg.API, cfg.Key, rng)
			var qe *tollgate.QuotaError
			switch {
			case err == nil && throttled:
				res.Throttled++
				time.Sleep(time.Second) // as Shopify's clients retry a THROTTLED answer
			case err == nil:
				res.Queries++
			case rig.Cut(ctx, err, end):
				res.Cut++
				return true
			case errors.As(err, &qe):
				res.Refused++
				select { // wait as a worker would, then ask again
				case <-ctx.Done():
				case <-time.After(qe.RetryAfter):
				}
			default:
				res.Failed++
				if res.FirstErr == "" {
					res.FirstErr = err.Error()
				}
			}
			return false
		})
		return results, nil
	})
}

// send posts one of the app's queries, drawn by rng, or one time in five
// asks the REST API for a page of products, and reads the answer to its
// end; throttled reports a THROTTLED answer or a REST 429.
func send(ctx context.Context, client *http.Client, api, token string, rng *rand.Rand) (throttled bool, err error) {
	if rng.IntN(5) == 0 {
		req, _ := http.NewRequestWithContext(ctx, "GET", api+"/admin/api/2025-10/products.json?limit=50", nil)
		req.Header.Set("X-Shopify-Access-Token", token)
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode == http.StatusTooManyRequests {
			return true, nil
		}
		if resp.StatusCode != http.StatusOK {
			return false, errors.New("REST: " + resp.Status)
		}
		return false, nil
	}
	q := queries[rng.IntN(len(queries))]
	if rng.IntN(10) < 6 {
		q = queries[0] // the catalogue sync is most of the load
	}
	body := map[string]any{"query": q.query}
	if q.variables != "" {
		body["variables"] = json.RawMessage(q.variables)
	}
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", api+"/admin/api/2025-10/graphql.json", bytes.NewReader(raw))
	req.Header.Set("X-Shopify-Access-Token", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	var a answer
	if err := json.Unmarshal(b, &a); err != nil || resp.StatusCode != http.StatusOK {
		return false, errors.New("an answer that is no GraphQL answer: " + resp.Status)
	}
	for _, e := range a.Errors {
		if e.Extensions.Code == "THROTTLED" {
			return true, nil
		}
	}
	if len(a.Errors) > 0 {
		return false, errors.New("an answer with errors: " + string(b))
	}
	return false, nil
}
