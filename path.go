package tollgate

import (
	"context"
	"errors"
	"net/http"

	"github.com/tollgate/tollgate/quota"
)

// The path of a request, declared: New builds it from the Config, and
// RoundTrip runs it. The package doc tells it stage by stage.

// A stage is one step of a request's admission: it admits the request
// (true, nil), refuses it (an error), or passes it on to the next stage
// (false, nil).
type stage func(ctx context.Context, r *request) (done bool, err error)

// A reader is one reader of a request's response, in order: it passes the
// response on, or ends the request with an error, the response closed.
type reader func(ctx context.Context, r *request, resp *http.Response) (*http.Response, error)

// path is the ordered list of what a request passes before it is sent.
type path struct {
	before    []stage    // before Redis: a remembered pause of a free request, a lease in hand
	outages   *outages   // whether to ask Redis; while it does not answer, the outage mode decides
	onRedis   []stage    // on Redis: a lease renewed, a remembered refusal, the decision
	described *described // after a decision Redis answered: its buckets described for operators
}

// admit runs the request through the stages until one admits or refuses
// it. A Redis failure on the way switches to the outage modes, and the
// request's own decides it.
func (p *path) admit(ctx context.Context, r *request) error {
	if r.background {
		ctx = quota.WithPriority(ctx, quota.Background)
	}
	if done, err := run(ctx, p.before, r); done || err != nil {
		return err
	}
	if p.outages.ask(ctx, r) {
		_, err := run(ctx, p.onRedis, r)
		if err == nil || isQuotaError(err) {
			p.described.describe(ctx, r)
		}
		if !errors.Is(err, quota.ErrRedis) {
			return err
		}
		p.outages.failed(ctx, r, err)
	}
	return p.outages.admit(ctx, r)
}

// run runs stages until one admits or refuses the request, and reports
// whether one did.
func run(ctx context.Context, stages []stage, r *request) (bool, error) {
	for _, s := range stages {
		if done, err := s(ctx, r); done || err != nil {
			return done, err
		}
	}
	return false, nil
}

// onRedis is the decision's stage on Redis: the last, it always decides.
func (p *decision) onRedis(ctx context.Context, r *request) (bool, error) {
	return true, p.apply(ctx, p.redis, r)
}
