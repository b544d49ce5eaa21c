package anthropic_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/tollgate/tollgate/providers/anthropic"
)

func Example() {
	// A stand-in for https://api.anthropic.com, announcing the Sonnet 4.x
	// limits on every response as Anthropic does, and telling each
	// answer's usage.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reset := time.Now().Add(time.Second).UTC().Format(time.RFC3339)
		for name, limit := range map[string]string{"Requests": "50", "Input-Tokens": "30000", "Output-Tokens": "8000"} {
			w.Header().Set("Anthropic-Ratelimit-"+name+"-Limit", limit)
			w.Header().Set("Anthropic-Ratelimit-"+name+"-Remaining", limit)
			w.Header().Set("Anthropic-Ratelimit-"+name+"-Reset", reset)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"type":"message","content":[{"type":"text","text":"Hello!"}],"usage":{"input_tokens":12,"output_tokens":3}}`)
	}))
	defer api.Close()

	// nil: an in-process Redis, for one process; limits learned from the
	// headers.
	tr, err := anthropic.NewTransport(nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	// The first request of a class goes alone, to learn its limits, and
	// counts what the headers announce spent (nothing, here); the next
	// ones are charged 1 request, their body's 98 bytes of input and
	// their max_tokens of output, then settled to the usage told: 12
	// input and 3 output tokens.
	body := `{"model":"claude-sonnet-4-5","max_tokens":300,"messages":[{"role":"user","content":"Say hello."}]}`
	for range 3 {
		req, _ := http.NewRequest("POST", api.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Api-Key", "sk-ant-example")
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) // read to its end: the usage is settled there
		resp.Body.Close()
		fmt.Println(resp.Status)
	}

	// The buckets the Transport keeps for the key and the model's class:
	// the limits learned, less the 5% reserve, as token buckets refilled
	// at that rate a minute, whose capacity is the refill of Transit
	// (50ms) less, for the requests still on their way. Their level
	// (Usage's Remaining) refills with time, so it is not printed here.
	scope := anthropic.Scope("sk-ant-example", "claude-sonnet-4-5")
	fmt.Println(scope[strings.Index(scope, "/")+1:])
	for _, bucket := range []string{anthropic.Requests, anthropic.InputTokens, anthropic.OutputTokens} {
		usage, err := tr.Usage(context.Background(), scope, bucket)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d at once, refilled at %d a minute\n", bucket, usage[0].Limit.Units, usage[0].Limit.Refill)
	}
	// Output:
	// 200 OK
	// 200 OK
	// 200 OK
	// claude-sonnet-4
	// requests: 46 at once, refilled at 47 a minute
	// input-tokens: 28476 at once, refilled at 28500 a minute
	// output-tokens: 7593 at once, refilled at 7600 a minute
}
