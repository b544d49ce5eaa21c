package gemini

import (
	"context"
	"errors"
	"net/http"

	"github.com/tollgate/tollgate/costs"
)

// tableRules are the paths the table names, on any host: the v1beta API
// the SDKs call, and v1 (https://ai.google.dev/gemini-api/docs/api-versions).
// The model and the method share the last segment
// ("gemini-2.5-flash:generateContent"), which the rule's Func reads.
var tableRules = []string{
	"POST /v1beta/models/{call}",
	"POST /v1/models/{call}",
}

// Table returns the cost table of NewTransport's Transport. Every request
// to a model's generateContent, streamGenerateContent or embedContent
// spends 1 of the RPM and RPD buckets, and a batchEmbedContents of n
// requests n of them ("a batch of N texts counts N requests", as users
// report Google counting it); each spends its estimated input tokens of
// the TPM bucket (see Counting), settled, for the generate methods, to
// the answer's usageMetadata.promptTokenCount. countTokens is free: "The
// countTokens method doesn't count against the rate limits of the model"
// is what its free use by the Transport relies on
// (https://ai.google.dev/api/tokens). Every other request (listing models,
// uploading files) is "other": free. The default rule reads the same
// methods under any other prefix (a gateway's). The spec is data: keep
// it, change a rule with Spec.Override, or add rules of your own.
//
// Its rules count tokens from what NewTransport's Transport read of the
// request: the table serves only that Transport.
func Table() costs.Spec {
	spec := costs.Spec{Catalog: true, Buckets: []string{RPM, RPD, TPM}}
	for _, p := range tableRules {
		spec.Rules = append(spec.Rules, costs.Rule{Pattern: p, Endpoint: "model", Func: charge})
	}
	spec.Default = &costs.Rule{Endpoint: methodNames[other], Func: charge}
	return spec
}

// errNotRead is the error of the table's rules for a request that did not
// come through NewTransport's Transport.
var errNotRead = errors.New("gemini: the request did not come through the Transport's RoundTrip, which counts its tokens")

// charge is the Func of every rule: the method's charges, from what the
// Transport read of the request.
func charge(req *http.Request) (costs.Endpoint, error) {
	m, _ := methodOf(req.Method, req.URL.Path)
	e := costs.Endpoint{Name: methodNames[m]}
	if m == other || m == countTokensFor {
		e.Free = true
		return e, nil
	}
	r, ok := req.Context().Value(readKey{}).(*read)
	if !ok {
		return costs.Endpoint{}, errNotRead
	}
	e.Charges = []costs.Charge{{Bucket: RPM, Units: r.facts.requests}, {Bucket: RPD, Units: r.facts.requests}, {Bucket: TPM, Units: r.tokens}}
	if m == generate || m == stream {
		e.Settle = []costs.Settle{{Bucket: TPM, Field: "usageMetadata.promptTokenCount"}}
	}
	return e, nil
}

// readKey carries, in a request's context, what the Transport read of
// its body.
type readKey struct{}

// read is a request body read once, and its estimated input tokens.
type read struct {
	facts  facts
	tokens int64
}

// withRead returns ctx carrying r.
func withRead(ctx context.Context, r *read) context.Context {
	return context.WithValue(ctx, readKey{}, r)
}
