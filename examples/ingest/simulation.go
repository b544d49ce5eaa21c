package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/internal/ytsim"
	"github.com/tollgate/tollgate/providers/youtube"
)

// newSimulation returns the simulated YouTube API with the quota the flags
// give the upstream: -quota pool units (and -search-quota search units in
// the granular model) per -window, or per Pacific day.
func newSimulation(c *config) *ytsim.Server {
	return ytsim.New(ytsim.Config{
		Quota:       c.quota,
		Window:      c.window,
		Granular:    c.table == "granular",
		SearchQuota: c.searchQuota,
	})
}

// serveSimulation serves only the simulated API on -simulate, for several
// ingest processes to share as their upstream, until interrupted.
func serveSimulation(ctx context.Context, c *config, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", c.simulate)
	if err != nil {
		fmt.Fprintln(stderr, "ingest: -simulate:", err)
		return 1
	}
	sim := newSimulation(c)
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "simulated YouTube API at http://%s/youtube/v3: %d pool units per %s per key (%s table); Ctrl-C to stop\n",
		ln.Addr(), c.quota, c.windowName(), c.table)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = srv.Shutdown(sctx)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "ingest: -simulate:", err)
		return 1
	}
	for project, st := range sim.Stats() {
		if project == "" {
			continue
		}
		fmt.Fprintf(stdout, "project %s: %s, %s, %s; most in one window: %d of %d\n",
			redactKey(project), counted(int64(st.Requests), "request"), counted(int64(st.Units), "pool unit"), counted(int64(st.QuotaErrors), "quota error"),
			mostInAWindow(sim.Arrivals(), ytsim.Pool, c.window), c.quota)
	}
	return 0
}

// counted says n of what, e.g. "1 request", "2 requests".
func counted(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// simulatedQuotaErrors counts the 403 quotaExceeded the simulation answered.
func simulatedQuotaErrors(sim *ytsim.Server) int {
	n := 0
	for _, a := range sim.Arrivals() {
		if a.Status == http.StatusForbidden {
			n++
		}
	}
	return n
}

// mostInAWindow returns the most units of a bucket the simulation charged
// in one of its fixed windows (the Pacific day when window is 0).
func mostInAWindow(arrivals []ytsim.Arrival, bucket string, window time.Duration) int64 {
	sums := map[time.Time]int64{}
	var most int64
	for _, a := range arrivals {
		if a.Bucket != bucket {
			continue
		}
		var start time.Time
		if window > 0 {
			start = time.Unix(0, a.At.UnixNano()/int64(window)*int64(window))
		} else {
			start = youtube.NextReset(a.At) // one per Pacific day
		}
		sums[start] += a.Units
		most = max(most, sums[start])
	}
	return most
}

// mostReceived describes the most units of each bucket the simulation
// charged in one of its windows, against the bucket's quota, the binding
// bucket first, e.g. "4 of 4 search units (the binding bucket); 55 of 60
// pool units". The binding bucket is refused, the one tollgate refused
// the most calls for; when it refused none, the one that came nearest to
// what tollgate lets through (enforced: the quota less the reserve).
func mostReceived(arrivals []ytsim.Arrival, buckets []string, quotas, enforced map[string]int64, window time.Duration, refused string) string {
	most := make(map[string]int64, len(buckets))
	binding, nearest := refused, -1.0
	for _, b := range buckets {
		most[b] = mostInAWindow(arrivals, b, window)
		if near := float64(most[b]) / float64(max(enforced[b], 1)); refused == "" && near > nearest {
			binding, nearest = b, near
		}
	}
	var parts []string
	for _, b := range buckets {
		part := fmt.Sprintf("%d of %d %s units", most[b], quotas[b], b)
		if b == binding && len(buckets) > 1 {
			parts = append([]string{part + " (the binding bucket)"}, parts...)
			continue
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// redactKey shows only the end of a key: the simulation names projects by
// their key when given none.
func redactKey(k string) string {
	if len(k) <= 4 {
		return "…"
	}
	return "…" + k[len(k)-4:]
}
