package shopify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/providers/shopify"
)

// standIn is a stand-in for https://acme.myshopify.com: its first query
// runs, costing 12 of the 52 points it requested; later ones are
// throttled, as Shopify answers them, with HTTP 200.
func standIn(calls *int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*calls++
		if *calls == 1 {
			io.WriteString(w, `{"data":{"products":{"nodes":[]}},"extensions":{"cost":{"requestedQueryCost":52,"actualQueryCost":12,
				"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":988.0,"restoreRate":50.0}}}}`)
			return
		}
		io.WriteString(w, `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":52,
			"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000.0,"currentlyAvailable":2.0,"restoreRate":50.0}}}}`)
	}))
}

func Example() {
	calls := 0
	api := standIn(&calls)
	defer api.Close()

	// nil: an in-process Redis, for one process. Shop names the shop, as
	// the stand-in's host is not acme.myshopify.com. Refuse rather than
	// wait, to show the refusal.
	tr, err := shopify.NewTransport(nil, &shopify.Options{Shop: "acme.myshopify.com",
		Tollgate: tollgate.Config{Policy: func(costs.Endpoint) tollgate.Policy { return tollgate.Policy{OnRefusal: tollgate.Refuse} }}})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	query := `{"query": "{ products(first: 50) { nodes { id title } } }"}`
	for i := range 3 {
		req, _ := http.NewRequest("POST", api.URL+"/admin/api/2025-10/graphql.json", strings.NewReader(query))
		req.Header.Set("X-Shopify-Access-Token", "shpat_example")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		var qe *tollgate.QuotaError
		if errors.As(err, &qe) { // errors.Is(err, tollgate.ErrQuotaExhausted) too
			if i == 1 { // Shopify's THROTTLED answer
				fmt.Println("refused:", qe.Bucket, "paused by Shopify:", qe.Cause == tollgate.PausedByUpstream)
			} else { // never sent: the pause, or the 2 points Shopify said are left, stops it
				fmt.Println("refused before sending:", qe.Bucket)
			}
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) // read to its end: the actual cost settles the charge
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	fmt.Println("Shopify was asked", calls, "times")

	usage, err := tr.Usage(context.Background(), shopify.Scope("acme.myshopify.com", "shpat_example"), shopify.Points)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("points bucket:", usage[0].Limit.Units, "in tollgate (1,000 less the 5% reserve and the transit)")
	// Output:
	// 200 OK
	// refused: points paused by Shopify: true
	// refused before sending: points
	// Shopify was asked 2 times
	// points bucket: 947 in tollgate (1,000 less the 5% reserve and the transit)
}
