package youtube_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/costs"
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
	// What the Transport counts, in the order of the pool's limits: the
	// day's quota less its 5% reserve, and the hourly smoothing limit.
	// (Usage's Limit is as enforced: its Window holds the Transit that
	// tollgate adds to sliding windows, 1h0m0.05s; say the windows as
	// configured.)
	usage, err := tr.Usage(resp.Request.Context(), youtube.DefaultProject, youtube.Pool)
	if err != nil {
		log.Fatal(err)
	}
	for i, window := range []string{"the Pacific day", "the hour"} {
		fmt.Printf("%s: used %d of %d\n", window, usage[i].Used, usage[i].Limit.Units)
	}
	fmt.Println(resp.Status)
	// Output:
	// the Pacific day: used 1 of 9500
	// the hour: used 1 of 399
	// 200 OK
}

// The classic table charges an upload once: the request that opens the
// session, not the chunks sent to it. The price before 2025-12-04 is one
// Override away.
func ExampleClassic() {
	show := func(spec costs.Spec) {
		table, err := costs.New(spec)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range []struct{ method, url string }{
			{"POST", "https://youtube.googleapis.com/upload/youtube/v3/videos?part=snippet&uploadType=resumable"},
			{"PUT", "https://youtube.googleapis.com/upload/youtube/v3/videos?uploadType=resumable&upload_id=xa298sd_f"},
			{"GET", "https://youtube.googleapis.com/youtube/v3/videos:batchGetStats?id=dQw4w9WgXcQ"},
		} {
			req, _ := http.NewRequest(r.method, r.url, nil)
			e, err := table.Resolve(req)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(r.method, e.Name, e.Charges, "continues:", e.Continues)
		}
	}
	show(youtube.Classic())
	old, err := youtube.Classic().Override("videos.insert", costs.Charge{Bucket: youtube.Pool, Units: 1600})
	if err != nil {
		log.Fatal(err)
	}
	table, _ := costs.New(old)
	req, _ := http.NewRequest("POST", "https://youtube.googleapis.com/upload/youtube/v3/videos?uploadType=multipart", nil)
	e, _ := table.Resolve(req)
	fmt.Println("before 2025-12-04:", e.Name, e.Charges)
	// Output:
	// POST videos.insert [{pool 100}] continues: false
	// PUT videos.upload [] continues: true
	// GET videos.batchGetStats [{batchGetStats 1}] continues: false
	// before 2025-12-04: videos.insert [{pool 1600}]
}
