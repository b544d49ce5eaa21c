package costs_test

import (
	"fmt"
	"log"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/costs"
)

func Example() {
	table, err := costs.Load(strings.NewReader(`{
	  "buckets": ["pool"],
	  "rules": [
	    {"pattern": "GET api.example.com/v1/search", "endpoint": "search", "charges": [{"bucket": "pool", "units": 100}]},
	    {"pattern": "GET api.example.com/v1/items/{id}", "endpoint": "items.get", "charges": [{"bucket": "pool", "units": 1}]}
	  ]
	}`))
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range []string{
		"https://api.example.com/v1/search?q=go",
		"https://api.example.com/v1/items/42",
		"https://api.example.com/v1/unknown",
	} {
		req, _ := http.NewRequest("GET", u, nil)
		e, err := table.Resolve(req)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(e.Name, e.Charges)
	}
	// Output:
	// search [{pool 100}]
	// items.get [{pool 1}]
	// costs: unknown endpoint: GET api.example.com/v1/unknown
}

func ExampleSpec_Override() {
	spec := costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{
			{Pattern: "POST api.example.com/upload/videos", Endpoint: "videos.insert", Charges: []costs.Charge{{Bucket: "pool", Units: 1600}}},
		},
	}
	// The upstream lowered the price: override the entry, keep the rest.
	spec, err := spec.Override("videos.insert", costs.Charge{Bucket: "pool", Units: 100})
	if err != nil {
		log.Fatal(err)
	}
	table, err := costs.New(spec)
	if err != nil {
		log.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "https://api.example.com/upload/videos", nil)
	e, _ := table.Resolve(req)
	fmt.Println(e.Name, e.Units())
	// Output: videos.insert 100
}

func ExampleRule_func() {
	// A rule may compute its cost from the request.
	table, err := costs.New(costs.Spec{
		Buckets: []string{"pool"},
		Rules: []costs.Rule{{
			Pattern:  "GET api.example.com/v1/export",
			Endpoint: "export",
			Func: func(r *http.Request) (costs.Endpoint, error) {
				if r.URL.Query().Get("format") == "full" {
					return costs.Endpoint{Charges: []costs.Charge{{Bucket: "pool", Units: 25}}}, nil
				}
				return costs.Endpoint{Charges: []costs.Charge{{Bucket: "pool", Units: 5}}}, nil
			},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/export?format=full", nil)
	e, _ := table.Resolve(req)
	fmt.Println(e.Name, e.Units())
	// Output: export 25
}
