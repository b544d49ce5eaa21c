package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/web"
	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// defaultListen is where `tollgate web` listens unless -listen says:
// loopback only, on a port of no well-known service.
const defaultListen = "127.0.0.1:7478"

// operatorTokenEnv names the environment variable holding the token that
// lets the page pause and resume; unset, the page is read-only.
const operatorTokenEnv = "TOLLGATE_OPERATOR_TOKEN"

// web serves the operators' page (tollgate web) until ctx ends.
func (c *cli) web(ctx context.Context, args []string) error {
	fs, conn := c.flags("web")
	listen := fs.String("listen", defaultListen, "the address to serve the page on (host:port; port 0 picks one)")
	scope := fs.String("scope", "", "show this scope only (a name, or the # hash status shows)")
	every := fs.Duration("every", 5*time.Second, "how often the page reloads itself")
	wait := fs.Duration("wait", 5*time.Second, "how long a pause or resume from the page waits for the processes listening to apply it")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	switch {
	case *every < time.Second:
		return usagef("web: -every %v: reload at most once a second", *every)
	case *wait <= 0:
		return usagef("web: -wait must be positive")
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return usagef("web: -listen %q: want host:port, e.g. %s", *listen, defaultListen)
	}
	lim, client, err := c.open(ctx, conn)
	if err != nil {
		return err
	}
	defer client.Close()
	token := c.getenv(operatorTokenEnv)
	log := slog.New(slog.NewTextHandler(c.stderr, nil))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("web: %v", err)
	}
	defer ln.Close()
	loopback := ln.Addr().(*net.TCPAddr).IP.IsLoopback()
	down := &outage{where: redact(conn.spec), log: log}
	srv, err := web.New(web.Options{
		Read: func(ctx context.Context) (*web.Page, error) {
			now := c.now()
			r, err := gather(ctx, lim, client, conn.prefix, *scope, c.clock, c.zoneOrUTC())
			if err != nil {
				return &web.Page{At: now, Prefix: conn.prefix}, down.says(err, now)
			}
			down.over()
			return page(r), nil
		},
		Control:  &webControl{lim: lim, conn: conn, wait: *wait},
		Token:    token,
		Record:   c.recorder(lim, client),
		Log:      log,
		Refresh:  *every,
		Loopback: loopback,
	})
	if err != nil {
		return err
	}
	mode := "read-only (set " + operatorTokenEnv + " to pause and resume from the page)"
	if token != "" {
		mode = "pause and resume need the operator token"
	}
	fmt.Fprintf(c.stderr, "tollgate web: listening on http://%s, quotas in %s, %s\n", ln.Addr(), redact(conn.spec), mode)
	if !loopback {
		fmt.Fprintln(c.stderr, "tollgate web: not on loopback: anyone who reaches this address reads the page; the operator token travels unencrypted unless a TLS proxy is in front")
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("web: %v", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("web: %v", err)
	}
	fmt.Fprintln(c.stderr, "tollgate web: stopped")
	return nil
}

// outage remembers since when Redis has not answered the page, to say so.
type outage struct {
	where string // the Redis, as -redis names it (no password)
	log   *slog.Logger
	mu    sync.Mutex
	since time.Time // zero while Redis answers
}

// says turns err, the page's failure to read at now, into what the page
// shows: for Redis unreachable, a sentence saying so, where and since when
// (the error itself goes to the log); other errors as they are.
func (o *outage) says(err error, now time.Time) error {
	if !unreachable(err) {
		return err
	}
	o.mu.Lock()
	if o.since.IsZero() {
		o.since = now
	}
	since := o.since
	o.mu.Unlock()
	o.log.Warn("tollgate web: redis does not answer", "redis", o.where, "err", err)
	return fmt.Errorf("Redis at %s does not answer, since %s (for %v): the page shows the quotas again once it does",
		o.where, since.UTC().Format("15:04:05 MST"), now.Sub(since).Round(time.Second))
}

// over notes that Redis answered.
func (o *outage) over() {
	o.mu.Lock()
	o.since = time.Time{}
	o.mu.Unlock()
}

// unreachable reports an error of a Redis that does not answer: refused,
// timed out, or gone mid-answer.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// webControl pauses and resumes for the page as the pause and resume
// commands do: the scope and bucket must exist, and the change is
// confirmed by the processes listening.
type webControl struct {
	lim  *quota.Limiter
	conn *connection
	wait time.Duration
}

// Pause pauses as `tollgate pause` does.
func (w *webControl) Pause(ctx context.Context, scope, bucket string, d time.Duration, reason string) error {
	if len(reason) > quotapath.MaxReason {
		return fmt.Errorf("the reason is %d bytes; at most %d", len(reason), quotapath.MaxReason)
	}
	_, reach, err := pauseConfirmed(ctx, w.lim, w.conn, scope, bucket, d, reason, w.wait)
	if err != nil {
		return err
	}
	return unreached(reach, w.wait, "pause")
}

// Resume resumes as `tollgate resume` does.
func (w *webControl) Resume(ctx context.Context, scope, bucket string) error {
	_, reach, err := resumeConfirmed(ctx, w.lim, w.conn, scope, bucket, w.wait)
	if err != nil {
		return err
	}
	return unreached(reach, w.wait, "resume")
}

// unreached is the failure of a pause or resume that some process
// listening did not apply in time.
func unreached(r ops.Reach, wait time.Duration, what string) error {
	if r.Applied < r.Listening {
		return fmt.Errorf("the %s is set in Redis, but only %d of %d processes listening applied it within %v", what, r.Applied, r.Listening, wait)
	}
	return nil
}

// page is the report as the page shows it.
func page(r *report) *web.Page {
	p := &web.Page{At: r.At, Prefix: r.Prefix, Actions: webActions(r)}
	for _, s := range r.Scopes {
		ws := web.Scope{Name: s.Scope, Hashed: s.Hashed, Pause: webPause(s.Pause), BackgroundWaiting: s.BackgroundWaiting, Err: s.Err}
		for _, b := range s.Buckets {
			wb := web.Bucket{Name: b.Bucket, Announced: b.Announced, Pause: webPause(b.Pause), Undescribed: b.Undescribed,
				Leases: b.Leases, Leased: b.Leased, InFlight: b.InFlight, InFlightCap: b.InFlightCap, SlotWaiting: b.SlotWaiting}
			if b.LeasedUntil != nil {
				wb.LeasedUntil = *b.LeasedUntil
			}
			whoSpends(&wb, b.Spending, r.At)
			for _, w := range b.Windows {
				ww := web.Window{Name: w.Window, Limit: w.Limit, Quota: w.Quota, Used: w.Used, Held: w.Held, Remaining: w.Remaining,
					Zone: w.zone, Refill: w.Refill, Period: w.Period}
				if w.NextFree != nil {
					ww.NextFree = *w.NextFree
				}
				if w.Reset != nil {
					ww.Reset = *w.Reset
				}
				ww.Start, ww.End = span(w.limit, r.At)
				ww.Sliding = w.limit.Refill == 0 && !w.limit.Calendar && !w.limit.Fixed
				ww.Series, ww.Forecast = webSeries(w)
				if w.PaceLine != nil {
					ww.Paced, ww.PaceBurst = true, w.paceBurst
				}
				for _, t := range w.Tenants {
					ww.Tenants = append(ww.Tenants, web.Tenant{Name: t.Name, Units: t.Units, Share: t.Share, Held: t.Held, Waiting: t.Waiting})
				}
				wb.Windows = append(wb.Windows, ww)
			}
			ws.Buckets = append(ws.Buckets, wb)
		}
		p.Scopes = append(p.Scopes, ws)
	}
	return p
}

// span is the extent of l's window holding now, for the chart: a
// calendar day's midnights, a fixed window's bounds, (now-W, now] for a
// sliding window; zero for a token bucket.
func span(l quota.Limit, now time.Time) (start, end time.Time) {
	switch {
	case l.Refill > 0 || l.Window <= 0 && !l.Calendar:
		return time.Time{}, time.Time{}
	case l.Calendar:
		t := now.In(l.Location)
		start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, l.Location)
		return start, start.AddDate(0, 0, 1)
	case l.Fixed && !l.Ends.IsZero():
		end = l.Ends
		if !now.Before(end) {
			end = end.Add((1 + now.Sub(end)/l.Window) * l.Window)
		}
		return end.Add(-l.Window), end
	}
	// A sliding window's chart ends at now: what is past it has not
	// happened, and its forecast is its sentence.
	return now.Add(-l.Window), now
}

func webPause(p *pauseReport) *web.Pause {
	if p == nil {
		return nil
	}
	return &web.Pause{Until: p.Until, Reason: p.Reason}
}
