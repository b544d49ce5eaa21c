package quota

import (
	"encoding/binary"
	"sync"
	"time"
)

// A decision's keys and arguments depend only on its scope, buckets and
// limits, which repeat from call to call: the limiter prepares them once,
// boxed as the script arguments they become, so that a decision allocates
// little beyond what go-redis does.

// maxPrepared bounds the cache; past it the cache starts afresh, which
// costs only the preparing again.
const maxPrepared = 1 << 16

// window is one bucket window of a scope, ready for the scripts.
type window struct {
	log, meta  string
	pause      string // the bucket's pause
	scopePause string // the scope's pause
	units      any    // Limit.Units, boxed
	length     any    // the window in µs (0 for a calendar day), boxed
}

type windowID struct {
	scope, bucket string
	limit         Limit
}

// prepared caches windows.
type prepared struct {
	mu      sync.RWMutex
	windows map[windowID]*window
}

// window returns a bucket window of a scope, prepared.
func (l *Limiter) window(scope, bucket string, lim Limit) *window {
	lim.Ends = time.Time{} // a fixed window's end changes; its keys do not
	id := windowID{scope, bucket, lim}
	p := &l.prepared
	p.mu.RLock()
	w, ok := p.windows[id]
	p.mu.RUnlock()
	if ok {
		return w
	}
	prefix := l.scopeKey(scope)
	log, meta := windowKeys(prefix, bucket, lim)
	w = &window{
		log: log, meta: meta,
		pause: pauseKey(prefix, bucket), scopePause: pauseKey(prefix, ""),
		units: lim.Units, length: int64(0),
	}
	if !lim.Calendar {
		w.length = lim.Window.Microseconds() // sliding, or fixed with no end known
	}
	if lim.refilling() {
		// A token bucket's span (bucket.lua's SPAN): "r", then its period,
		// its refill, and the lengths of its key's start that name its
		// bucket and its scope, 8 bytes each, big-endian; then how it
		// refunds, a byte: 1 as its upstream does (Limit.AsUpstream).
		span := []byte{'r'}
		for _, v := range []int{int(lim.Window.Microseconds()), int(lim.Refill), len(prefix) + len(keyPart(bucket)) + 1, len(prefix)} {
			span = binary.BigEndian.AppendUint64(span, uint64(v))
		}
		var refunds byte
		if lim.AsUpstream {
			refunds = 1
		}
		w.length = string(append(span, refunds))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.windows == nil || len(p.windows) >= maxPrepared {
		p.windows = make(map[windowID]*window)
	}
	p.windows[id] = w
	return w
}

// cancelling returns the span of a token bucket that refunds as its
// upstream, marked for a cancel (its last byte 2): the call never reached
// the upstream, which gives nothing back for it (bucket.lua).
func cancelling(span string) string {
	return span[:len(span)-1] + "\x02"
}
