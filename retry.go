package tollgate

import (
	"context"
	"errors"
	"net/http"

	"github.com/tollgate/tollgate/costs"
)

// CheckRetry wraps a go-retryablehttp retry policy (its CheckRetry field,
// e.g. retryablehttp.DefaultRetryPolicy) so that it never retries a request
// tollgate refused: retrying a *QuotaError would only spin until the quota
// returns, and an unknown endpoint never becomes known. Other errors and
// responses go to base; a nil base retries nothing.
//
// Put retries above the throttler, so that every attempt is charged (the
// upstream charges every attempt too):
//
//	rc := retryablehttp.NewClient()
//	rc.HTTPClient.Transport = tollgateTransport
//	rc.CheckRetry = tollgate.CheckRetry(retryablehttp.DefaultRetryPolicy)
func CheckRetry(base func(context.Context, *http.Response, error) (bool, error)) func(context.Context, *http.Response, error) (bool, error) {
	return func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if errors.Is(err, ErrQuotaExhausted) || errors.Is(err, costs.ErrUnknownEndpoint) || errors.Is(err, ErrConfig) {
			return false, err
		}
		if base == nil {
			return false, err
		}
		return base(ctx, resp, err)
	}
}
