package tollgate_test

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/quota"
)

// fakeAPI stands in for the upstream.
func fakeAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
}

func Example() {
	api := fakeAPI()
	defer api.Close()

	// Share the quota through Redis: quota.New(redis.NewClient(...)) in every
	// process. NewEmbedded runs an in-process Redis for a single process.
	lim, err := quota.NewEmbedded()
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	table, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{
			{Pattern: "GET /v1/search", Endpoint: "search", Charges: []costs.Charge{{Bucket: "pool", Units: 100}}},
			{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: &tollgate.Transport{
		Limiter: lim,
		Costs:   table,
		Buckets: map[string]tollgate.Bucket{
			// The upstream allows 260 units an hour; keep 10 in reserve.
			"pool": {Limits: []quota.Limit{quota.PerWindow(260, time.Hour)}, ReserveUnits: 10},
		},
		Scope:  tollgate.Scope("project-a"),
		Policy: tollgate.Policies(tollgate.Policy{OnRefusal: tollgate.Error}, nil),
	}}

	for range 3 {
		resp, err := client.Get(api.URL + "/v1/search?q=tollgate")
		var qe *tollgate.QuotaError
		switch {
		case errors.As(err, &qe):
			fmt.Printf("refused: %d units of %q, retry in about %v\n", qe.Cost, qe.Bucket, qe.RetryAfter.Round(time.Hour))
		case err != nil:
			log.Fatal(err)
		default:
			resp.Body.Close()
			fmt.Println(resp.Status)
		}
	}
	// Output:
	// 200 OK
	// 200 OK
	// refused: 100 units of "pool", retry in about 1h0m0s
}

// While Redis is down, let cheap calls through unmetered but stop the
// expensive ones, which could drain the quota unseen.
func ExamplePolicyFunc() {
	api := fakeAPI()
	defer api.Close()
	table, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{
			{Pattern: "GET /v1/search", Endpoint: "search", Charges: []costs.Charge{{Bucket: "pool", Units: 100}}},
			{Pattern: "GET /v1/items", Endpoint: "items.list", Charges: []costs.Charge{{Bucket: "pool", Units: 1}}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 1, MaxRetries: -1}) // nothing listens here
	defer down.Close()

	client := &http.Client{Transport: &tollgate.Transport{
		Limiter: quota.New(down),
		Costs:   table,
		Buckets: map[string]tollgate.Bucket{"pool": {Limits: []quota.Limit{quota.PerWindow(10000, 24*time.Hour)}}},
		Policy: func(e costs.Endpoint) tollgate.Policy {
			if e.Units() >= 100 {
				return tollgate.Policy{OnOutage: tollgate.FailClosed}
			}
			return tollgate.Policy{OnOutage: tollgate.FailOpen}
		},
	}}

	resp, err := client.Get(api.URL + "/v1/items")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("items.list:", resp.Status)
	_, err = client.Get(api.URL + "/v1/search")
	fmt.Println("search: unavailable:", errors.Is(err, tollgate.ErrUnavailable))
	// Output:
	// items.list: 200 OK
	// search: unavailable: true
}
