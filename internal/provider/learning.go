package provider

import (
	"context"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate"
)

// Learning is the Transports of a provider that learns its limits per
// minute from the headers of its answers (openai, anthropic), per set of
// limits: a set is named (a model, a class; "" for the default one) and has
// a learned Transport and, when some limit of it is not given, an
// unannounced one; Announcing says which decides a scope's requests (see
// Announcing). Build it with Learn; it is safe for concurrent use.
type Learning struct {
	kit     *Kit
	dialect string                   // the dialect of the announced limits (announce.Quota)
	label   func(name string) string // a set's name as scopes spell it
	sets    map[string]*learningSet
	states  Announcing
}

// learningSet is one set's Transports and the buckets its answers must
// announce for learned to be the one that decides.
type learningSet struct {
	learned, unannounced *tollgate.Transport
	need                 []string
}

// Learn returns a Learning whose Transports the kit builds from cfg, one
// set per entry of sets (limits by name; "" for the default set), reading
// the limits announced in dialect: buckets returns a set's buckets (for
// unannounced: a bucket whose limit is not given is not limited), need
// names those whose limits are not given, to be learned (none: no
// unannounced Transport). label spells a set's name as it stands in
// scopes, after their "/". The kit's Usage, Record and Pause then find a
// scope's Transport through it. On an error the kit is closed.
func Learn[L any](k *Kit, cfg tollgate.Config, dialect string, label func(name string) string, sets map[string]L,
	buckets func(limits L, unannounced bool) map[string]tollgate.Bucket, need func(L) []string) (*Learning, error) {
	l := &Learning{kit: k, dialect: dialect, label: label, sets: make(map[string]*learningSet)}
	k.Pick(l.forScope)
	for name, limits := range sets {
		s := &learningSet{need: need(limits)}
		l.sets[name] = s
		var err error
		cfg.Buckets = buckets(limits, false)
		if s.learned, err = k.New(cfg); err != nil {
			return nil, k.Fail(err)
		}
		if len(s.need) > 0 {
			cfg.Buckets = buckets(limits, true)
			if s.unannounced, err = k.New(cfg); err != nil {
				return nil, k.Fail(err)
			}
		}
	}
	return l, nil
}

// of returns the set named name, or the default one.
func (l *Learning) of(name string) *learningSet {
	if s, ok := l.sets[name]; ok && name != "" {
		return s
	}
	return l.sets[""]
}

// Route returns the Transport that sends a request of the set named name
// in scope, and the func to call with its response (nil when it failed),
// as Announcing.Route does.
func (l *Learning) Route(ctx context.Context, name, scope string) (*tollgate.Transport, func(*http.Response), error) {
	s := l.of(name)
	return l.states.Route(ctx, s.learned, s.unannounced, scope, func(resp *http.Response) (told, all bool) {
		return Announces(resp, l.dialect, s.need...)
	})
}

// forScope returns the Transport that decides a scope's requests now.
func (l *Learning) forScope(scope string) (*tollgate.Transport, error) {
	s := l.sets[""]
	if _, label, ok := strings.Cut(scope, "/"); ok {
		for name, q := range l.sets {
			if name != "" && l.label(name) == label {
				s = q
				break
			}
		}
	}
	return l.states.Pick(s.learned, s.unannounced, scope), nil
}
