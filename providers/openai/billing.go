package openai

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// isBilling reports whether a 429's body is insufficient_quota.
func isBilling(body []byte) bool {
	typ, code, _ := errorOf(body)
	return typ == "insufficient_quota" || code == "insufficient_quota"
}

// ErrInsufficientQuota matches a *BillingError.
var ErrInsufficientQuota = errors.New("openai: insufficient quota")

// BillingError reports OpenAI's 429 insufficient_quota: the credits of
// the organization or project are spent, or its monthly budget reached.
// It is not a rate limit: no wait mends it, nothing is paused, and
// CheckRetry never retries it. It matches ErrInsufficientQuota.
type BillingError struct {
	// Endpoint is the endpoint's name, e.g. "chat.completions".
	Endpoint string
	// Scope is the pool and model, e.g. "cred-3f1c.../gpt-4o"; never the key.
	Scope string
	// Message is the upstream's message, cut to 200 characters, e.g. "You
	// exceeded your current quota, please check your plan and billing
	// details."
	Message string
}

func (e *BillingError) Error() string {
	return fmt.Sprintf("openai: insufficient quota (billing, not a rate limit): endpoint %q scope %q: %q", e.Endpoint, e.Scope, e.Message)
}

// Is reports whether target is ErrInsufficientQuota.
func (e *BillingError) Is(target error) bool { return target == ErrInsufficientQuota }

// billingError builds the error for a 429 insufficient_quota body.
func billingError(endpoint, scope string, body []byte) *BillingError {
	_, _, message := errorOf(body)
	message = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, message)
	if r := []rune(message); len(r) > 200 {
		message = string(r[:200])
	}
	return &BillingError{Endpoint: endpoint, Scope: scope, Message: message}
}
