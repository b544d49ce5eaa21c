package youtube_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/providers/youtube"
	"github.com/tollgate/tollgate/quota"
)

func Example() {
	// A stand-in for https://youtube.googleapis.com.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"kind":"youtube#videoListResponse","items":[]}`)
	}))
	defer api.Close()
	host, _ := url.Parse(api.URL)

	// Two keys of one Cloud project: one quota. With a Redis client instead
	// of nil, every process using it shares the project's quota.
	tr, err := youtube.NewTransport([]string{"KEY-1", "KEY-2"}, nil, &youtube.Options{
		Table:     youtube.Granular(host.Host), // youtube.Granular() for the real API
		Smoothing: []quota.Limit{quota.PerWindow(420, time.Hour)},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	resp, err := client.Get(api.URL + "/youtube/v3/videos?part=snippet&chart=mostPopular&regionCode=GB")
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	// What the Transport counts: the day's quota less its 5% reserve, and
	// the hourly smoothing limit.
	usage, err := tr.Usage(resp.Request.Context(), youtube.DefaultPool, youtube.Pool)
	if err != nil {
		log.Fatal(err)
	}
	for _, u := range usage {
		fmt.Printf("%s: used %d of %d\n", u.Limit, u.Used, u.Limit.Units)
	}
	fmt.Println(resp.Status)
	// Output:
	// 9500/day@America/Los_Angeles: used 1 of 9500
	// 399/1h0m0.05s: used 1 of 399
	// 200 OK
}
