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
	u, err := tr.Limiter().Usage(resp.Request.Context(), youtube.DefaultPool, youtube.Pool, quota.PerDay(9500, youtube.Pacific()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, "- pool units used today:", u.Used, "of", 9500)
	// Output: 200 OK - pool units used today: 1 of 9500
}
