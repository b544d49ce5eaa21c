package tollgate

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/meter"
	"github.com/tollgate/tollgate/quota"
)

// settling is the last reader of a response: its true cost
// (costs.Rule.Settle), read by internal/meter, replaces its estimate, and
// the slots the request holds are given back. Costs told by the status or
// in headers are settled at once; costs told in the body are read as the
// caller reads it, and settled when the caller reaches its end. A body
// closed before its end, or that never tells, keeps the estimate. Slots
// are given back when the body ends or is closed, whichever comes first
// (request.Ended).
type settling struct {
	gates *gates
	hooks *hooks
}

// meter settles what the status and headers tell now, and wraps resp's
// body when something waits for its end.
func (s *settling) meter(ctx context.Context, r *request, resp *http.Response) (*http.Response, error) {
	if r.res == nil && len(r.slots()) == 0 {
		return resp, nil
	}
	var fields []costs.Settle
	if r.res != nil {
		var told []meter.Cost
		told, fields = meter.Told(r.endpoint.Settle, resp)
		s.settle(ctx, r, told)
	}
	if len(fields) == 0 && len(r.slots()) == 0 {
		return resp, nil
	}
	meter.Wrap(resp, fields, r)
	return resp, nil
}

// settle replaces the estimates the response told the truth of, and
// reports each to the hook and the log. It frees slots in the same round
// trip (the request's, when its response ended), whatever its outcome;
// with nothing told it frees none.
func (s *settling) settle(ctx context.Context, r *request, told []meter.Cost, free ...*quota.Slot) {
	if len(told) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	charges := append([]costs.Charge(nil), r.endpoint.Charges...)
	// Every bucket told is settled in one round trip.
	units := make(map[string]int64, len(told))
	var errs []error
	for _, c := range told {
		if c.Err != nil {
			errs = append(errs, c.Err)
			continue
		}
		units[c.Bucket] = c.Units
	}
	if err := r.res.SettleAndRelease(sctx, units, free...); errors.Is(err, quota.ErrInvalid) {
		// One bucket or count is refused, and SettleAll settled none: the
		// others are settled one by one.
		for b, n := range units {
			if err := r.res.Settle(sctx, b, n); err != nil {
				errs = append(errs, err)
				delete(units, b)
			}
		}
	} else if err != nil {
		errs = append(errs, err)
		units = nil // none settled
	}
	for _, c := range told {
		if _, ok := units[c.Bucket]; !ok || c.Err != nil {
			continue
		}
		for i := range charges {
			if charges[i].Bucket == c.Bucket {
				s.hooks.corrected(r, c.Bucket, c.Units-charges[i].Units)
				charges[i].Units = c.Units
			}
		}
	}
	err := errors.Join(errs...)
	s.hooks.settled(ctx, r, charges, err)
	if err != nil {
		s.hooks.log(ctx, slog.LevelWarn, "tollgate: could not settle a request's true cost; it keeps its estimate",
			slog.String("endpoint", r.endpoint.Name), slog.String("scope", r.spending()), slog.Any("err", err))
		return
	}
	s.hooks.log(ctx, slog.LevelDebug, "tollgate: settled", slog.String("endpoint", r.endpoint.Name),
		slog.String("scope", r.spending()), slog.Any("charges", charges))
}
