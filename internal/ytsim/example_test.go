package ytsim_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate/tollgate/internal/ytsim"
)

// A project with 250 units a day affords two searches, not three; the
// refusal is YouTube's own 403 quotaExceeded, and costs nothing.
func ExampleServer() {
	sim := ytsim.New(ytsim.Config{Quota: 250})
	ts := httptest.NewServer(sim)
	defer ts.Close()
	base := ts.URL + "/youtube/v3"

	for range 3 {
		resp, err := http.Get(base + "/search?part=snippet&q=lofi&key=demo-key")
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	st := sim.Stats()["demo-key"]
	fmt.Printf("requests %d, units %d, quota errors %d\n", st.Requests, st.Units, st.QuotaErrors)
	// Output:
	// 200
	// 200
	// 403
	// requests 3, units 200, quota errors 1
}

// A test makes the simulated API answer the next videos.insert with the
// channel's upload limit; the refused call opens no upload and costs
// nothing, and the next one is served.
func ExampleServer_Inject() {
	sim := ytsim.New(ytsim.Config{})
	ts := httptest.NewServer(sim)
	defer ts.Close()
	if err := sim.Inject("videos.insert", ytsim.UploadLimitExceeded); err != nil {
		fmt.Println(err)
		return
	}
	open := ts.URL + "/upload/youtube/v3/videos?part=snippet&uploadType=resumable&key=demo-key"
	for range 2 {
		resp, err := http.Post(open, "application/json", strings.NewReader(`{"snippet":{"title":"Holiday"}}`))
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Location") != "")
	}
	st := sim.Stats()["demo-key"]
	fmt.Printf("requests %d, units %d\n", st.Requests, st.Units)
	// Output:
	// 400 false
	// 200 true
	// requests 2, units 100
}
