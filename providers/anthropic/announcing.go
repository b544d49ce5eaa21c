package anthropic

import (
	"net/http"

	"github.com/tollgate/tollgate/internal/provider"
)

// Whether a server announces its limits. Anthropic tells a class's limits
// in every response (anthropic-ratelimit-*-limit); a gateway or a
// compatible server may send nothing. A limit that is neither given nor
// announced cannot be learned, and the learning Transport would let one
// request at a time through forever. So the first request of each scope in
// a process goes alone through the learning Transport, the others of the
// scope waiting for its answer; a successful answer that does not announce
// every limit to be learned sends the scope's requests through the
// unannounced Transport from then on, which enforces the limits given and
// the announced ones, and no other. A later answer that announces them all
// sends them back.

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
