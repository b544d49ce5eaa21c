package announce

// This file and sfbare.go are a strict parser for the parts of Structured
// Field Values (RFC 9651, https://www.rfc-editor.org/rfc/rfc9651) that the
// RateLimit fields use: Lists (section 4.2.1) of Items (section 4.2.3) with
// Parameters (section 4.2.3.2). Every bare item type is recognised, so that a
// value of a type Read has no use for (a Date in a vendor's parameter, say)
// does not make the whole field fail; Inner Lists are parsed only to be
// skipped. Failure anywhere fails the whole field, which the caller then
// ignores (RFC 9651, section 4.2: "the entire field value MUST be ignored").
//
// The parser walks an index over the field value and returns substrings of
// it: a String is copied only when it holds escapes, and a Byte Sequence is
// decoded only when asked (see decodeBinary).

// kind is the type of a bare item, or the absence of a parameter.
type kind uint8

const (
	kindAbsent kind = iota
	kindInteger
	kindDecimal
	kindString
	kindToken
	kindBinary
	kindBoolean
	kindDate
	kindDisplay
	kindInner // an Inner List; only ever a member, never a parameter value
)

// bare is a bare item: num holds an Integer, a Date or a Boolean (0 or 1);
// str holds a String (unescaped), a Token, or a Byte Sequence's base64 text.
// Decimals and Display Strings are validated but their values are not kept.
type bare struct {
	kind kind
	num  int64
	str  string
}

// The parameters Read looks at, as indexes into member.params. Any other
// parameter is parsed and dropped: the draft says "Other parameters are
// allowed and can be regarded as comments" (draft -10 and -11, sections 3.1
// and 4.1).
const (
	paramQ  = iota // RateLimit-Policy quota
	paramQU        // RateLimit-Policy quota unit
	paramW         // RateLimit-Policy window; also the old drafts' policies
	paramPK        // partition key, both fields
	paramR         // RateLimit remaining (draft -11: available) quota
	paramT         // RateLimit reset (draft -11: effective window)
	numParams
)

// paramIndex returns the index in member.params of a parameter key, or -1
// for a key Read ignores.
func paramIndex(key string) int {
	switch key {
	case "q":
		return paramQ
	case "qu":
		return paramQU
	case "w":
		return paramW
	case "pk":
		return paramPK
	case "r":
		return paramR
	case "t":
		return paramT
	}
	return -1
}

// member is one List member: an Item with the parameters Read looks at.
// Parameters that appear more than once keep their last value (RFC 9651,
// section 4.2.3.2: "overwrite its value").
type member struct {
	item   bare
	params [numParams]bare
}

// parser walks a field value. Its methods report false when parsing fails.
type parser struct {
	s string
	i int
}

// listParser yields the members of an sf-list one by one.
type listParser struct {
	p       parser
	started bool
}

// newList starts parsing s as an sf-list (RFC 9651, section 4.2.1). Leading
// SP is discarded first (section 4.2, step 2).
func newList(s string) listParser {
	l := listParser{p: parser{s: s}}
	l.p.skipSP()
	return l
}

// next parses the next member into m, keeping string values only if keep
// is set. It returns more=false at the end of the list, and ok=false when
// the list is malformed, from which point the whole field must be ignored.
func (l *listParser) next(m *member, keep bool) (more, ok bool) {
	p := &l.p
	if l.started {
		// After a member: OWS, then the end or a comma, OWS, and another
		// member; a trailing comma fails (section 4.2.1, steps 2.2 to 2.6).
		p.skipOWS()
		if p.i == len(p.s) {
			return false, true
		}
		if p.s[p.i] != ',' {
			return false, false
		}
		p.i++
		p.skipOWS()
		if p.i == len(p.s) {
			return false, false
		}
	} else if p.i == len(p.s) {
		return false, true // an empty list
	}
	l.started = true
	*m = member{}
	if p.s[p.i] == '(' {
		return true, p.innerList(m)
	}
	return true, p.item(m, keep)
}

// validList reports whether s is a well-formed sf-list, without keeping
// any value.
func validList(s string) bool {
	l := newList(s)
	var m member
	for {
		more, ok := l.next(&m, false)
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

// parseItem parses s as an sf-item field (RFC 9651, section 4.2, with
// field_type "item"): an Item, with SP allowed only before and after it.
func parseItem(s string, m *member) bool {
	p := parser{s: s}
	p.skipSP()
	if !p.item(m, true) {
		return false
	}
	p.skipSP()
	return p.i == len(p.s)
}

func (p *parser) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

// skipOWS skips optional whitespace, SP or HTAB (RFC 9110, section 5.6.3).
func (p *parser) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// item parses a bare item and its parameters (section 4.2.3).
func (p *parser) item(m *member, keep bool) bool {
	return p.bareItem(&m.item, keep) && p.params(m, keep)
}

// innerList parses an Inner List (section 4.2.1.2). Read has no use for
// one, so its items and parameters are checked and dropped.
func (p *parser) innerList(m *member) bool {
	p.i++ // "("
	var scratch member
	for p.i < len(p.s) {
		p.skipSP()
		if p.i < len(p.s) && p.s[p.i] == ')' {
			p.i++
			m.item.kind = kindInner
			return p.params(&scratch, false)
		}
		if !p.item(&scratch, false) {
			return false
		}
		if p.i == len(p.s) || (p.s[p.i] != ' ' && p.s[p.i] != ')') {
			return false
		}
	}
	return false // no closing ")"
}

// params parses Parameters (section 4.2.3.2) into m.params, dropping keys
// Read ignores. A key without "=" is Boolean true.
func (p *parser) params(m *member, keep bool) bool {
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, ok := p.key()
		if !ok {
			return false
		}
		idx := paramIndex(key)
		v := bare{kind: kindBoolean, num: 1}
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			if !p.bareItem(&v, keep && idx >= 0) {
				return false
			}
		}
		if idx >= 0 {
			m.params[idx] = v
		}
	}
	return true
}

// key parses a key (section 4.2.3.3): lcalpha or "*", then lcalpha, DIGIT,
// "_", "-", "." or "*". Upper case fails.
func (p *parser) key() (string, bool) {
	start := p.i
	if p.i == len(p.s) || !(isLower(p.s[p.i]) || p.s[p.i] == '*') {
		return "", false
	}
	p.i++
	for p.i < len(p.s) {
		c := p.s[p.i]
		if !(isLower(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], true
}
