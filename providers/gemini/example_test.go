package gemini_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate/tollgate/providers/gemini"
)

func Example() {
	// A stand-in for https://generativelanguage.googleapis.com, telling
	// the input tokens it counted as the API does.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"candidates":[],"usageMetadata":{"promptTokenCount":4,"totalTokenCount":9}}`)
	}))
	defer api.Close()

	// nil: an in-process Redis, for one process; the free tier's limits.
	tr, err := gemini.NewTransport(nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	body := `{"contents":[{"parts":[{"text":"Say hello in five words."}]}]}`
	req, _ := http.NewRequest("POST", api.URL+"/v1beta/models/gemini-2.5-flash:generateContent", strings.NewReader(body))
	req.Header.Set("X-Goog-Api-Key", "AIza-example")
	resp, err := client.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) // the estimate settles to promptTokenCount at the body's end
	resp.Body.Close()
	fmt.Println(resp.Status)

	// What the Transport counts for the key's project and the model: the
	// free tier's limits, less the 5% reserve.
	scope := gemini.Scope("AIza-example", "gemini-2.5-flash")
	for _, bucket := range []string{gemini.RPM, gemini.TPM, gemini.RPD} {
		usage, err := tr.Usage(context.Background(), scope, bucket)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: used %d of %d\n", bucket, usage[0].Used, usage[0].Limit.Units)
	}
	// Output:
	// 200 OK
	// rpm: used 1 of 9
	// tpm: used 4 of 237500
	// rpd: used 1 of 237
}
