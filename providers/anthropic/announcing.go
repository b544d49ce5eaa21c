package anthropic

import (
	"net/http"

	"github.com/tollgate/tollgate/internal/provider"
)

// Whether a server announces its limits. Anthropic tells a class's limits
// in every response (anthropic-ratelimit-*-limit); a gateway or a
// compatible server may send nothing. A limit that is neither given nor
// announced cannot be learned; provider.Announcing (the Transport's
// states) sends a scope's requests through the unannounced Transport while
// its server announces too little.

// announces reads a response for whether its server announces every
// limit per minute of p that is to be learned: told reports that the
// response settles it (it announces them all, or it is a success that
// does not).
func (p *profile) announces(resp *http.Response) (told, all bool) {
	var need []string
	if p.limits.RPM == 0 {
		need = append(need, Requests)
	}
	if p.limits.ITPM == 0 {
		need = append(need, InputTokens)
	}
	if p.limits.OTPM == 0 {
		need = append(need, OutputTokens)
	}
	return provider.Announces(resp, "anthropic", need...)
}
