package announce

import (
	"net/http"
	"time"
)

// The IETF draft "RateLimit header fields for HTTP", in its two shapes.
// Section numbers are those of -10
// (https://www.ietf.org/archive/id/draft-ietf-httpapi-ratelimit-headers-10.txt);
// -11 (https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/)
// keeps the syntax and the numbering and changes what r and t mean.

// readRateLimit reads RateLimit-Policy and RateLimit (drafts -08 to -11):
// Lists of Strings naming policies, with parameters. Each field is read
// only if it parses whole (RFC 9651, section 4.2, and the draft's section 7:
// "Malformed RateLimit header fields MUST be ignored"); within it, a member
// that breaks the draft's rules is dropped and the others are kept.
//
// Members are matched by name. A RateLimit member with no policy is a
// quota of unknown Limit; a policy with no RateLimit member is a quota of
// unknown Remaining. The first member of a name wins in each field.
func readRateLimit(h http.Header, now time.Time, c *collector) {
	start := c.n
	var m member
	if v, ok := sfField(h, "Ratelimit-Policy"); ok && validList(v) {
		l := newList(v)
		for range maxQuotas {
			if more, _ := l.next(&m, true); !more {
				break
			}
			q, ok := policy(&m)
			if !ok || find(c, start, q.Name) >= 0 {
				continue
			}
			if !c.add(q) {
				return
			}
		}
	}
	if v, ok := sfField(h, "Ratelimit"); ok && validList(v) {
		l := newList(v)
		for range maxQuotas {
			if more, _ := l.next(&m, true); !more {
				break
			}
			lim, ok := limit(&m, now)
			if !ok {
				continue
			}
			i := find(c, start, lim.Name)
			if i < 0 {
				if !c.add(lim) {
					return
				}
				continue
			}
			q := &c.q[i]
			if q.Remaining >= 0 {
				continue // a member of that name came earlier
			}
			q.Remaining, q.Reset = lim.Remaining, lim.Reset
			if lim.Partition != "" {
				q.Partition = lim.Partition
			}
		}
	}
}

// find returns the index of the quota named name among c's quotas from
// start on, or -1.
func find(c *collector, start int, name string) int {
	for i := start; i < c.n; i++ {
		if c.q[i].Name == name {
			return i
		}
	}
	return -1
}

// policy reads a RateLimit-Policy member (section 3.1): "The Item{{SF}}
// value MUST be a String", "q" REQUIRED, "a non-negative Integer"; "qu"
// "MUST be a String", by default "requests"; "w" "MUST be a non-negative,
// non-zero, Integer"; "pk" "MUST be a Byte Sequence". A member that breaks
// one of these is dropped. A w more than a year long is dropped alone: the
// draft allows it, but it is beyond what Read takes at its word.
func policy(m *member) (Quota, bool) {
	if m.item.kind != kindString || m.item.str == "" {
		return Quota{}, false
	}
	q := Quota{Dialect: "ratelimit", Name: m.item.str, Remaining: -1, Used: -1, Unit: "requests"}
	switch v := m.params[paramQ]; {
	case v.kind == kindInteger && v.num >= 0:
		q.Limit = v.num
	default:
		return Quota{}, false
	}
	switch v := m.params[paramW]; {
	case v.kind == kindAbsent:
	case v.kind == kindInteger && v.num > 0:
		q.Window, _ = seconds(v.num)
	default:
		return Quota{}, false
	}
	switch v := m.params[paramQU]; {
	case v.kind == kindAbsent:
	case v.kind == kindString && v.str != "":
		q.Unit = v.str
		// The IANA registry of section 10.3 registers "request", while the
		// prose and the default say "requests": one unit, one name.
		if q.Unit == "request" {
			q.Unit = "requests"
		}
	default:
		return Quota{}, false
	}
	switch v := m.params[paramPK]; v.kind {
	case kindAbsent:
	case kindBinary:
		q.Partition = decodeBinary(v.str)
	default:
		return Quota{}, false
	}
	return q, true
}

// limit reads a RateLimit member (section 4.1): it "identifies the quota
// policy", which Read requires to be a String as RateLimit-Policy's must
// be; "r" is REQUIRED, "a non-negative Integer"; "t" is "a non-negative
// Integer" of seconds; "pk" a Byte Sequence. A member that breaks one of
// these is dropped; a t more than a year ahead is dropped alone.
//
// -10 reads t as the seconds "until additional quota ... is made
// available"; -11 as "the effective window ...: the number of seconds
// within which the client can use no more than the available quota", and
// adds that it "does not imply anything about when the server will
// increase the available quota". Both mean: spend at most r before now+t,
// which is what Quota.Reset says.
func limit(m *member, now time.Time) (Quota, bool) {
	if m.item.kind != kindString || m.item.str == "" {
		return Quota{}, false
	}
	q := Quota{Dialect: "ratelimit", Name: m.item.str, Limit: -1, Used: -1, Unit: "requests"}
	switch v := m.params[paramR]; {
	case v.kind == kindInteger && v.num >= 0:
		q.Remaining = v.num
	default:
		return Quota{}, false
	}
	switch v := m.params[paramT]; {
	case v.kind == kindAbsent:
	case v.kind == kindInteger && v.num >= 0:
		if d, ok := seconds(v.num); ok {
			q.Reset = now.Add(d)
		}
	default:
		return Quota{}, false
	}
	switch v := m.params[paramPK]; v.kind {
	case kindAbsent:
	case kindBinary:
		q.Partition = decodeBinary(v.str)
	default:
		return Quota{}, false
	}
	return q, true
}

// readTrio reads the older drafts' RateLimit-Limit, RateLimit-Remaining and
// RateLimit-Reset (-06, sections 5.1 to 5.3): each "an Item and its value
// is a non-negative Integer", parameters "MUST be ignored"; the reset is
// "the number of seconds until the quota associated with the
// expiring-limit resets". The three describe one unnamed quota, the
// "expiring-limit", here named "default". Its window comes from
// trioWindow.
func readTrio(h http.Header, now time.Time, c *collector) {
	q := Quota{Dialect: "ratelimit-trio", Name: "default", Limit: -1, Used: -1, Unit: "requests"}
	if v, ok := sfField(h, "Ratelimit-Limit"); ok && validList(v) {
		// -01 made RateLimit-Limit a List: the expiring limit first, then
		// its policies, e.g. "10, 10;w=1, 50;w=60"
		// (https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-01).
		// An Item is a List of one.
		l := newList(v)
		var m member
		if more, _ := l.next(&m, false); more && m.item.kind == kindInteger && m.item.num >= 0 {
			q.Limit = m.item.num
			q.Window = trioWindow(h, l, &m)
		}
	}
	q.Remaining = trioItem(h, "Ratelimit-Remaining")
	if q.Limit < 0 && q.Remaining < 0 {
		return
	}
	if d, ok := seconds(trioItem(h, "Ratelimit-Reset")); ok {
		q.Reset = now.Add(d)
	}
	c.add(q)
}

// trioWindow finds the window of the expiring limit first (its value in
// m, the rest of RateLimit-Limit in l) among the policies that state one:
// the limit's own w, those in the rest of RateLimit-Limit (-01), and the
// Integer members of RateLimit-Policy (-05 and -06, where w is REQUIRED),
// each counting when its value equals the limit. When they disagree, as
// in -06's own example of an invalid field "RateLimit-Policy: 10;w=1,
// 10;w=60", the window is unknown: 0.
func trioWindow(h http.Header, l listParser, m *member) time.Duration {
	limit := m.item.num
	var window time.Duration
	conflict := false
	vote := func(x *member) {
		w := x.params[paramW]
		if x.item.kind != kindInteger || x.item.num != limit || w.kind != kindInteger || w.num <= 0 {
			return
		}
		d, ok := seconds(w.num)
		switch {
		case !ok:
		case window == 0:
			window = d
		case window != d:
			conflict = true
		}
	}
	vote(m)
	for range maxQuotas {
		if more, _ := l.next(m, false); !more {
			break
		}
		vote(m)
	}
	if v, ok := sfField(h, "Ratelimit-Policy"); ok && validList(v) {
		p := newList(v)
		for range maxQuotas {
			if more, _ := p.next(m, false); !more {
				break
			}
			vote(m)
		}
	}
	if conflict {
		return 0
	}
	return window
}

// trioItem reads an Item field holding a non-negative Integer, or -1. A
// field on several lines is joined into a List, which is no Item, and so
// is ignored.
func trioItem(h http.Header, key string) int64 {
	var m member
	v, ok := sfField(h, key)
	if !ok || !parseItem(v, &m) || m.item.kind != kindInteger || m.item.num < 0 {
		return -1
	}
	return m.item.num
}
