package anthropic

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/announce"
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

// maxStates bounds the scopes whose state a process keeps; past it, it
// starts afresh, which costs each scope one lone request again.
const maxStates = 1 << 14

// announcing is what this process knows of whether each scope's server
// announces the limits its profile must learn.
type announcing struct {
	mu     sync.Mutex
	known  map[string]bool          // by scope: announces them all
	probes map[string]chan struct{} // by scope: closed when its first answer is read
}

// silent reports whether a scope's server is known to announce too little.
func (a *announcing) silent(scope string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	all, ok := a.known[scope]
	return ok && !all
}

// enter returns what is known of a scope: known and all when it is known;
// otherwise mine when the caller is to send the scope's first request, or
// a channel closed when the request sent first is answered.
func (a *announcing) enter(scope string) (known, all, mine bool, wait <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if all, ok := a.known[scope]; ok {
		return true, all, false, nil
	}
	if ch, ok := a.probes[scope]; ok {
		return false, false, false, ch
	}
	if a.probes == nil {
		a.probes = make(map[string]chan struct{})
	}
	a.probes[scope] = make(chan struct{})
	return false, false, true, nil
}

// set records what an answer told of a scope, and ends its probe when
// the caller sent it.
func (a *announcing) set(scope string, told, all, probe bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if told {
		if a.known == nil || len(a.known) >= maxStates {
			a.known = make(map[string]bool)
		}
		a.known[scope] = all
	}
	if ch, ok := a.probes[scope]; ok && probe {
		close(ch)
		delete(a.probes, scope)
	}
}

// route returns the Transport that sends a request of scope with profile
// p, and a func to call with its response (nil when it failed).
func (t *Transport) route(ctx context.Context, p *profile, scope string) (*tollgate.Transport, func(*http.Response), error) {
	if p.unannounced == nil {
		return p.learned, func(*http.Response) {}, nil
	}
	for {
		known, all, mine, wait := t.states.enter(scope)
		if known || mine {
			tr := p.learned
			if known && !all {
				tr = p.unannounced
			}
			return tr, func(resp *http.Response) {
				told, all := p.announces(resp)
				t.states.set(scope, told, all, mine)
			}, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// announces reads a response for whether its server announces every
// limit per minute of p that is to be learned: told reports that the
// response settles it (it announces them all, or it is a success that
// does not).
func (p *profile) announces(resp *http.Response) (told, all bool) {
	if resp == nil {
		return false, false
	}
	need := map[string]bool{Requests: p.limits.RPM == 0, InputTokens: p.limits.ITPM == 0, OutputTokens: p.limits.OTPM == 0}
	for _, q := range announce.Read(resp.Header, time.Now()) {
		if q.Dialect == "anthropic" && q.Limit > 0 {
			delete(need, q.Name)
		}
	}
	all = !need[Requests] && !need[InputTokens] && !need[OutputTokens]
	return all || resp.StatusCode < 300, all
}
