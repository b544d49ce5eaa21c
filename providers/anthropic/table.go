package anthropic

import (
	"context"
	"net/http"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/provider"
)

// endpointNames names the endpoints of each kind, in the cost table, the
// policies and the errors.
var endpointNames = map[kind]string{
	messages:    "messages",
	countTokens: "messages.count_tokens",
	other:       "other",
}

// refusedStatuses are the answers given before any output was generated
// (errors page, https://docs.anthropic.com/en/api/errors): 400
// invalid_request_error, 401 authentication_error, 403 permission_error,
// 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 529
// overloaded_error. Their output tokens settle to 0. A 500 api_error may
// come after some output, and keeps max_tokens.
var refusedStatuses = []int{400, 401, 403, 404, 413, 429, 529}

// Table returns the cost table, counting tokens as c says: "messages"
// (POST /v1/messages, and a path ending in /messages under any other
// prefix) spends 1 of Requests and its estimates of InputTokens and
// OutputTokens, settled from the answer (see Counting);
// "messages.count_tokens" is free: token counting has rate limits of its
// own, apart from the Messages API's (token counting page,
// https://docs.anthropic.com/en/docs/build-with-claude/token-counting);
// every other request is "other": 1 request, no tokens. The spec is data:
// keep it, change a rule with Spec.Override, or add rules of your own.
//
// Its rules read the request body to count tokens: through the request's
// GetBody when it was not sent through NewTransport's Transport (which
// reads each body once for the table and for the scope).
func Table(c Counting) costs.Spec {
	return costs.Spec{
		Catalog: true,
		Buckets: []string{Requests, InputTokens, OutputTokens},
		Rules: []costs.Rule{
			{Pattern: "POST /v1/messages", Endpoint: endpointNames[messages], Func: charge(messages, c)},
			{Pattern: "POST /v1/messages/count_tokens", Endpoint: endpointNames[countTokens], Func: charge(countTokens, c)},
		},
		Default: &costs.Rule{Endpoint: endpointNames[other], Func: charge(other, c)},
	}
}

// charge returns the Func of a rule for requests of kind k; other reads
// the kind from the path.
func charge(k kind, c Counting) func(*http.Request) (costs.Endpoint, error) {
	return func(req *http.Request) (costs.Endpoint, error) {
		k := k
		if k == other {
			k = kindOf(req.Method, req.URL.Path)
		}
		switch k {
		case countTokens:
			return costs.Endpoint{Name: endpointNames[k], Free: true}, nil
		case other:
			return costs.Endpoint{Name: endpointNames[k], Charges: []costs.Charge{{Bucket: Requests, Units: 1}}}, nil
		}
		f, err := factsOf(req, DefaultMaxBody)
		if err != nil {
			return costs.Endpoint{}, err
		}
		r, _ := req.Context().Value(readKey{}).(*read)
		return endpoint(c, f, r != nil && r.settleCache), nil
	}
}

// endpoint is what a Messages request with these facts is charged, and
// where its answer tells the truth of it. A request that uses the prompt
// cache settles its input only when cache says that its cache tokens are
// counted besides (by NewTransport's Transport: see cacheCounter).
func endpoint(c Counting, f facts, cache bool) costs.Endpoint {
	e := costs.Endpoint{Name: endpointNames[messages], Charges: []costs.Charge{
		{Bucket: Requests, Units: 1},
		{Bucket: InputTokens, Units: c.input(f)},
	}}
	if out := c.output(f); out > 0 {
		e.Charges = append(e.Charges, costs.Charge{Bucket: OutputTokens, Units: out})
		// The JSON answer's usage.output_tokens, or the stream's last
		// event that tells it: message_delta, whose usage is cumulative
		// (streaming page, https://docs.anthropic.com/en/api/messages-streaming).
		e.Settle = append(e.Settle, costs.Settle{Bucket: OutputTokens, Field: "usage.output_tokens"})
		for _, s := range refusedStatuses {
			e.Settle = append(e.Settle, costs.Settle{Bucket: OutputTokens, Status: s})
		}
	}
	if !f.cached || cache {
		field := "usage.input_tokens"
		if f.stream {
			field = "message.usage.input_tokens" // message_start
		}
		e.Settle = append(e.Settle, costs.Settle{Bucket: InputTokens, Field: field})
	}
	return e
}

// readKey carries, in a request's context, its body as NewTransport's
// Transport read it.
type readKey struct{}

// read is a request body read once, and what it tells.
type read struct {
	facts facts
	err   error
	// settleCache reports a request that uses the prompt cache whose
	// input is settled to input_tokens plus the cache tokens that count;
	// cacheReads that its class counts cache reads.
	settleCache, cacheReads bool
}

// withRead returns ctx carrying r.
func withRead(ctx context.Context, r *read) context.Context {
	return context.WithValue(ctx, readKey{}, r)
}

// factsOf returns what the request's body tells: as the Transport read
// it, or read now through GetBody (leaving Body to be sent), reading at
// most limit bytes.
func factsOf(req *http.Request, limit int64) (facts, error) {
	if r, ok := req.Context().Value(readKey{}).(*read); ok {
		return r.facts, r.err
	}
	b, err := provider.ReadAgain(req, limit, ErrBody, "anthropic.NewTransport")
	if err != nil {
		return facts{}, err
	}
	return parse(b)
}
