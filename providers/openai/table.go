package openai

import (
	"context"
	"net/http"

	"github.com/tollgate/tollgate/costs"
	"github.com/tollgate/tollgate/internal/provider"
)

// endpointNames names the endpoints of each kind, in the cost table, the
// policies and the errors.
var endpointNames = map[kind]string{
	chat:        "chat.completions",
	responses:   "responses",
	embeddings:  "embeddings",
	completions: "completions",
	other:       "other",
}

// tableRules are the paths the table names, on any host: OpenAI's
// (https://platform.openai.com/docs/api-reference), and Azure OpenAI's,
// by deployment and under its v1 API
// (https://learn.microsoft.com/en-us/azure/ai-services/openai/reference).
var tableRules = []struct {
	pattern string
	kind    kind
}{
	{"POST /v1/chat/completions", chat},
	{"POST /v1/responses", responses},
	{"POST /v1/embeddings", embeddings},
	{"POST /v1/completions", completions},
	{"POST /openai/deployments/{deployment}/chat/completions", chat},
	{"POST /openai/deployments/{deployment}/embeddings", embeddings},
	{"POST /openai/deployments/{deployment}/completions", completions},
	{"POST /openai/v1/chat/completions", chat},
	{"POST /openai/v1/responses", responses},
	{"POST /openai/v1/embeddings", embeddings},
	{"POST /openai/v1/completions", completions},
	{"POST /openai/responses", responses},
}

// Table returns the cost table, counting tokens as c says. Every request
// spends 1 of the Requests bucket; those of the endpoints that count
// tokens spend their estimate of the Tokens bucket too (see Counting):
// "chat.completions", "responses", "embeddings" and "completions" (the
// legacy API), on OpenAI's paths and Azure OpenAI's, on any host. The
// default rule reads the same endpoints by the end of their path under
// any other prefix (a gateway's, a vLLM server mounted elsewhere); every
// other request is "other": 1 request, no tokens. The spec is data: keep
// it, change a rule with Spec.Override, or add rules of your own (e.g. for
// images: {"POST /v1/images/generations", ...}).
//
// Its rules read the request body to count tokens: through the
// request's GetBody when it was not sent through NewTransport's
// Transport (which reads each body once for the table and for the scope).
func Table(c Counting) costs.Spec {
	spec := costs.Spec{Catalog: true, Buckets: []string{Requests, Tokens}}
	for _, r := range tableRules {
		spec.Rules = append(spec.Rules, costs.Rule{Pattern: r.pattern, Endpoint: endpointNames[r.kind], Func: charge(r.kind, c)})
	}
	spec.Default = &costs.Rule{Endpoint: endpointNames[other], Func: charge(other, c)}
	return spec
}

// charge returns the Func of a rule for requests of kind k; other reads
// the kind from the path.
func charge(k kind, c Counting) func(*http.Request) (costs.Endpoint, error) {
	return func(req *http.Request) (costs.Endpoint, error) {
		k := k
		if k == other {
			k = kindOf(req.Method, req.URL.Path)
		}
		e := costs.Endpoint{Name: endpointNames[k], Charges: []costs.Charge{{Bucket: Requests, Units: 1}}}
		if k == other {
			return e, nil
		}
		f, err := factsOf(req, DefaultMaxBody)
		if err != nil {
			return costs.Endpoint{}, err
		}
		e.Charges = append(e.Charges, costs.Charge{Bucket: Tokens, Units: c.tokens(k, f)})
		if c.Usage {
			if field := usageField(k, f); field != "" {
				e.Settle = []costs.Settle{{Bucket: Tokens, Field: field}}
			}
		}
		return e, nil
	}
}

// usageField is where the response to a request tells the tokens it
// used, or "" when it will not: a Chat Completions or legacy Completions
// stream tells only when asked (stream_options.include_usage), in its
// last chunk; a Responses stream in its response.completed event.
func usageField(k kind, f facts) string {
	switch {
	case !f.stream:
		return "usage.total_tokens"
	case k == responses:
		return "response.usage.total_tokens"
	case (k == chat || k == completions) && f.includeUsage:
		return "usage.total_tokens"
	}
	return ""
}

// readKey carries, in a request's context, its body as NewTransport's
// Transport read it.
type readKey struct{}

// read is a request body read once, and what it tells.
type read struct {
	facts facts
	err   error
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
	b, err := provider.ReadAgain(req, limit, ErrBody, "openai.NewTransport")
	if err != nil {
		return facts{}, err
	}
	return parse(b)
}
