// Command example runs regional ingestion jobs that share one YouTube
// quota through an instrumented tollgate Transport, and serves the
// Transport's metrics in Prometheus format.
//
// It runs offline: a simulated YouTube API (with its own quota and its
// real 403 quotaExceeded answers) in this process, the embedded Redis
// unless -redis names one, and a quota scaled down to a window of seconds,
// so that the regions run out of it and wait their turn:
//
//	go run ./example -metrics 127.0.0.1:9464
//	curl -s http://127.0.0.1:9464/metrics | grep tollgate_
//
// With -metrics it keeps serving after the run, until interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/tollgate/tollgate/extra/tollgateotel"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are what the flags say.
type options struct {
	metrics     string // serve metrics on this address; "" for none
	redis       string // a Redis URL; "" for the embedded one
	regions     []string
	quota       int64 // pool units per window
	searchQuota int64 // search calls per window
	window      time.Duration
}

// run is the whole program; it returns the exit code: 0 done, 1 failed,
// 2 bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "example:", err)
		return 2
	}
	if err := serve(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "example:", err)
		return 1
	}
	return 0
}

func parseOptions(args []string, usage io.Writer) (options, error) {
	o := options{}
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	fs.SetOutput(usage)
	regions := fs.String("regions", "US,GB,DE,FR,IN,BR,AU,CA", "the regions to ingest, `US,GB,...`")
	fs.StringVar(&o.metrics, "metrics", "", "serve the metrics in Prometheus format on `ADDR` (e.g. 127.0.0.1:9464), at /metrics")
	fs.StringVar(&o.redis, "redis", "", "Redis `URL` (redis:// or rediss://); empty runs an in-process Redis")
	fs.Int64Var(&o.quota, "quota", 20, "the simulated project's pool units per window `N`")
	fs.Int64Var(&o.searchQuota, "search-quota", 4, "its search.list calls per window `N`")
	fs.DurationVar(&o.window, "window", 10*time.Second, "the quota window `D`, instead of the Pacific day")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, r := range strings.Split(*regions, ",") {
		if r = strings.TrimSpace(r); r != "" {
			o.regions = append(o.regions, r)
		}
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case len(o.regions) == 0:
		return o, errors.New("-regions names no region")
	case o.quota <= 0 || o.searchQuota <= 0:
		return o, errors.New("-quota and -search-quota must be positive")
	case o.window <= 0:
		return o, errors.New("-window must be positive")
	}
	return o, nil
}

// serve runs the regions' jobs through an instrumented Transport, prints
// what the upstream received, and with -metrics serves the metrics until
// ctx ends.
func serve(ctx context.Context, o options, out io.Writer) error {
	// The OpenTelemetry SDK, read by the Prometheus exporter into a
	// registry of its own.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	metrics, err := tollgateotel.New(tollgateotel.WithMeterProvider(mp))
	if err != nil {
		return err
	}
	defer metrics.Close()

	var srv *http.Server
	if o.metrics != "" {
		ln, err := net.Listen("tcp", o.metrics)
		if err != nil {
			return fmt.Errorf("-metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		fmt.Fprintf(out, "metrics at http://%s/metrics\n", ln.Addr())
	}

	var rdb redis.UniversalClient
	if o.redis != "" {
		opt, err := redis.ParseURL(o.redis)
		if err != nil {
			return fmt.Errorf("-redis: %w", err)
		}
		client := redis.NewClient(opt)
		defer client.Close()
		rdb = client
	}
	j, err := newJobs(o, rdb, metrics)
	if err != nil {
		return err
	}
	defer j.close()
	j.run(ctx)
	j.report(out)

	if srv == nil {
		return nil
	}
	fmt.Fprintln(out, "serving the metrics until interrupted")
	<-ctx.Done()
	return nil
}
