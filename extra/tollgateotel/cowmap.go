package tollgateotel

import (
	"maps"
	"sync"
	"sync/atomic"
)

// cowMap is a map that requests read without a lock: it is replaced by a
// copy, never changed, when a key is added. It suits what is added a few
// times (attribute sets, scope buckets) and read on every request.
type cowMap[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex // held while adding
}

// load returns k's value, and the number of keys.
func (c *cowMap[K, V]) load(k K) (v V, ok bool, n int) {
	if m := c.m.Load(); m != nil {
		v, ok = (*m)[k]
		return v, ok, len(*m)
	}
	return v, false, 0
}

// add stores v for k, unless k has a value already, which it returns, or
// the map holds limit keys.
func (c *cowMap[K, V]) add(k K, v V, limit int) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := make(map[K]V)
	if m := c.m.Load(); m != nil {
		if old, ok := (*m)[k]; ok {
			return old
		}
		if len(*m) >= limit {
			return v
		}
		next = maps.Clone(*m)
	}
	next[k] = v
	c.m.Store(&next)
	return v
}

// snapshot returns the map as it is now; the caller must not change it.
func (c *cowMap[K, V]) snapshot() map[K]V {
	if m := c.m.Load(); m != nil {
		return *m
	}
	return nil
}
