package openai_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate/tollgate/providers/openai"
)

func Example() {
	// A stand-in for https://api.openai.com, announcing gpt-4o-mini's
	// limits as OpenAI does on every response.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Ratelimit-Limit-Requests", "500")
		w.Header().Set("X-Ratelimit-Limit-Tokens", "200000")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "499")
		w.Header().Set("X-Ratelimit-Remaining-Tokens", "199950")
		w.Header().Set("X-Ratelimit-Reset-Requests", "1m0s")
		w.Header().Set("X-Ratelimit-Reset-Tokens", "1m0s")
		io.WriteString(w, `{"object":"chat.completion","choices":[]}`)
	}))
	defer api.Close()

	// nil: an in-process Redis, for one process; limits learned from the
	// headers.
	tr, err := openai.NewTransport(nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	// 53 characters: 14 tokens of prompt, and 30 of output allowed. The
	// first request of a model goes alone and counts what the upstream
	// announces it counted (50); the next ones what OpenAI's rule charges.
	body := `{"model":"gpt-4o-mini","messages":[],"max_tokens":30}`
	for range 2 {
		req, _ := http.NewRequest("POST", api.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-example")
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}

	// What the Transport counts for the key and model: the limits learned,
	// less the 5% reserve.
	scope := openai.Scope("sk-example", "", "", "gpt-4o-mini")
	for _, bucket := range []string{openai.Requests, openai.Tokens} {
		usage, err := tr.Usage(context.Background(), scope, bucket)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: used %d of %d\n", bucket, usage[0].Used, usage[0].Limit.Units)
	}
	// Output:
	// 200 OK
	// 200 OK
	// requests: used 2 of 475
	// tokens: used 94 of 190000
}
