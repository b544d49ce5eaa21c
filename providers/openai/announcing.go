package openai

import (
	"net/http"

	"github.com/tollgate/tollgate/internal/provider"
)

// Whether a server announces its limits. OpenAI tells a model's limits in
// every response (x-ratelimit-limit-requests, x-ratelimit-limit-tokens);
// Azure OpenAI may send only what remains, or -1
// (https://learn.microsoft.com/en-us/answers/questions/5625878/azure-openai-responses-api-x-ratelimit-headers-val);
// vLLM sends nothing. A limit that is neither given nor announced cannot
// be learned; provider.Announcing (the Transport's states) sends a scope's
// requests through the unannounced Transport while its server announces
// too little.

// announces reads a response for whether its server announces every
// limit per minute of p that is to be learned: told reports that the
// response settles it (it announces them all, or it is a success that
// does not).
func (p *profile) announces(resp *http.Response) (told, all bool) {
	var need []string
	if p.limits.RPM == 0 {
		need = append(need, Requests)
	}
	if p.limits.TPM == 0 {
		need = append(need, Tokens)
	}
	return provider.Announces(resp, "openai", need...)
}
