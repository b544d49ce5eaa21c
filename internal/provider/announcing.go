package provider

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate/tollgate"
	"github.com/tollgate/tollgate/announce"
)

// maxStates bounds the scopes whose state an Announcing keeps; past it,
// it starts afresh, which costs each scope one lone request again.
const maxStates = 1 << 14

// Announcing is what a process knows of whether each scope's server
// announces the limits per minute that a provider (openai, anthropic) is
// to learn from its responses. Such a provider holds two Transports per
// set of limits: learned, which learns the limits not given from the
// responses, and unannounced, which enforces only the limits given and
// the announced ones, for servers that announce too little (a limit
// neither given nor announced cannot be learned, and learned would let one
// request at a time through forever). The first request of each scope
// goes alone through learned, the others of the scope waiting for its
// answer; a successful answer that does not announce every limit to be
// learned sends the scope's requests through unannounced from then on,
// and a later answer that announces them all sends them back.
//
// The zero Announcing knows nothing; it must not be copied once used.
type Announcing struct {
	mu     sync.Mutex
	known  map[string]bool          // by scope: announces them all
	probes map[string]chan struct{} // by scope: closed when its first answer is read
}

// Silent reports whether a scope's server is known to announce too little.
func (a *Announcing) Silent(scope string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	all, ok := a.known[scope]
	return ok && !all
}

// Pick returns the Transport that decides a scope's requests now, for a
// provider's Usage, Record and Pause: unannounced when it is not nil and
// the scope's server is known to announce too little, learned otherwise.
func (a *Announcing) Pick(learned, unannounced *tollgate.Transport, scope string) *tollgate.Transport {
	if unannounced != nil && a.Silent(scope) {
		return unannounced
	}
	return learned
}

// enter returns what is known of a scope: known and all when it is known;
// otherwise mine when the caller is to send the scope's first request, or
// a channel closed when the request sent first is answered.
func (a *Announcing) enter(scope string) (known, all, mine bool, wait <-chan struct{}) {
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
func (a *Announcing) set(scope string, told, all, probe bool) {
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

// Route returns the Transport that sends a request of scope (learned, or
// unannounced once the scope's server is known to announce too little),
// and a func to call with its response (nil when it failed), which reads
// it with announces (see Announces). With a nil unannounced it is always
// learned. A request of a scope not yet known waits for the scope's first
// answer, or returns ctx's error when ctx ends first.
func (a *Announcing) Route(ctx context.Context, learned, unannounced *tollgate.Transport, scope string, announces func(*http.Response) (told, all bool)) (*tollgate.Transport, func(*http.Response), error) {
	if unannounced == nil {
		return learned, func(*http.Response) {}, nil
	}
	for {
		known, all, mine, wait := a.enter(scope)
		if known || mine {
			tr := learned
			if known && !all {
				tr = unannounced
			}
			return tr, func(resp *http.Response) {
				told, all := announces(resp)
				a.set(scope, told, all, mine)
			}, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// Announces reads a response for whether its server announces, in
// dialect (see announce.Quota), a limit above 0 for each bucket named in
// need (the limits per minute to be learned): told reports that the
// response settles it (it announces them all, or it is a success that
// does not). A nil response tells nothing.
func Announces(resp *http.Response, dialect string, need ...string) (told, all bool) {
	if resp == nil {
		return false, false
	}
	missing := make(map[string]bool, len(need))
	for _, n := range need {
		missing[n] = true
	}
	for _, q := range announce.Read(resp.Header, time.Now()) {
		if q.Dialect == dialect && q.Limit > 0 {
			delete(missing, q.Name)
		}
	}
	all = len(missing) == 0
	return all || resp.StatusCode < 300, all
}
