package openai

import (
	"context"
	"errors"
	"net/http"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/quota"
)

// CheckRetry wraps a go-retryablehttp retry policy (its CheckRetry field)
// as tollgate.CheckRetry does, and never retries a *BillingError or a 429
// insufficient_quota response, a request whose body cannot be counted
// (ErrBody), nor one that charges more tokens than a limit holds
// (quota.ErrCostExceedsLimit) either:
//
//	rc := retryablehttp.NewClient()
//	rc.HTTPClient.Transport = openaiTransport
//	rc.CheckRetry = openai.CheckRetry(retryablehttp.DefaultRetryPolicy)
func CheckRetry(base func(context.Context, *http.Response, error) (bool, error)) func(context.Context, *http.Response, error) (bool, error) {
	next := tollgate.CheckRetry(base)
	return func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if errors.Is(err, ErrInsufficientQuota) || errors.Is(err, ErrBody) || errors.Is(err, quota.ErrCostExceedsLimit) {
			return false, err
		}
		if err == nil && resp != nil && resp.StatusCode == http.StatusTooManyRequests {
			if body, _ := tollgate.PeekBody(resp, maxErrorBody); isBilling(body) {
				return false, nil
			}
		}
		return next(ctx, resp, err)
	}
}
