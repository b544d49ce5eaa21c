package github_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/providers/github"
)

func Example() {
	// A stand-in for https://api.github.com, announcing the core resource
	// as GitHub does on every response: another program has already spent
	// 100 requests of the token's hour.
	used := 100
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used++
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(5000-used))
		w.Header().Set("X-RateLimit-Used", strconv.Itoa(used))
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
		w.Header().Set("X-RateLimit-Resource", "core")
		io.WriteString(w, `{"full_name":"golang/go"}`)
	}))
	defer api.Close()

	// nil: an in-process Redis, for one process, and GitHub's documented
	// limits. With a Redis client, every process using it shares them.
	tr, err := github.NewTransport(nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	for range 2 {
		req, _ := http.NewRequest("GET", api.URL+"/repos/golang/go", nil)
		req.Header.Set("Authorization", "Bearer ghp_example")
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}

	// The token's core hour as the Transport counts it: its own two
	// requests and what the other program spent, less the 5% reserve.
	usage, err := tr.Usage(context.Background(), tollgate.HashCredential("ghp_example"), github.Core)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("core: used %d of %d\n", usage[0].Used, usage[0].Limit.Units)
	// Output:
	// 200 OK
	// 200 OK
	// core: used 102 of 4750
}
