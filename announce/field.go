package announce

import (
	"net/http"
	"strings"
	"time"
)

// Field access. Keys are looked up as Go canonicalises them (as
// http.Header.Get does), so a header built by hand must use Set or Add.

// sfField returns the value of the Structured Field key, its lines joined
// as RFC 9651, section 4.2, says ("parsers MUST combine all field lines in
// the same section ... into one comma-separated field-value"). Each line is
// trimmed of OWS, as an HTTP parser leaves it, and an empty line, which
// holds no member, is skipped. It reports false for a field absent, empty,
// or longer than maxField.
func sfField(h http.Header, key string) (string, bool) {
	lines := h[key]
	n := fieldLength(lines)
	if n == 0 || n > maxField {
		return "", false
	}
	var first string
	count := 0
	for _, l := range lines {
		if l = trimOWS(l); l != "" {
			if count == 0 {
				first = l
			}
			count++
		}
	}
	switch count {
	case 0:
		return "", false
	case 1:
		return first, true
	}
	var b strings.Builder
	b.Grow(n)
	for _, l := range lines {
		if l = trimOWS(l); l != "" {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(l)
		}
	}
	return b.String(), true
}

// plainField returns the one value a field that is not a Structured Field
// holds. Every line, and every comma-separated value within a line (RFC
// 9110, section 5.3: a proxy may join lines so), trimmed of OWS, must say
// the same: a field repeated verbatim still reads, one that contradicts
// itself does not. Empty values are skipped (RFC 9110, section 5.6.1). It
// reports false for a field absent, empty, contradictory, or longer than
// maxField.
func plainField(h http.Header, key string) (string, bool) {
	lines := h[key]
	if n := fieldLength(lines); n == 0 || n > maxField {
		return "", false
	}
	var v string
	found := false
	for _, l := range lines {
		for l != "" {
			var part string
			part, l, _ = strings.Cut(l, ",")
			if part = trimOWS(part); part == "" {
				continue
			}
			if found && part != v {
				return "", false
			}
			v, found = part, true
		}
	}
	return v, found
}

// count reads a field holding a non-negative decimal integer, e.g. "4966",
// and returns -1 when it is absent or unusable: not all digits (a sign
// included: Azure OpenAI sends -1 to mean unknown), or above 2^53.
func count(h http.Header, key string) int64 {
	v, ok := plainField(h, key)
	if !ok {
		return -1
	}
	return digits(v, maxCount)
}

// digits returns the value of a string of decimal digits, or -1 when it
// is empty, holds anything else, or exceeds limit. It cannot overflow:
// it stops as soon as the value passes limit.
func digits(v string, limit int64) int64 {
	if v == "" {
		return -1
	}
	var n int64
	for i := 0; i < len(v); i++ {
		if !isDigit(v[i]) {
			return -1
		}
		n = n*10 + int64(v[i]-'0')
		if n > limit {
			return -1
		}
	}
	return n
}

// duration reads a field holding a Go-style duration such as "6m0s",
// "12ms" or "1m30.5s" (OpenAI's resets). The value is checked before
// time.ParseDuration sees it: at most 32 bytes, and only digits, "." and
// the letters of the units ("µ" and "μ" included), so no sign. It reports
// false for a value absent, unusable, or more than a year.
func duration(h http.Header, key string) (time.Duration, bool) {
	v, ok := plainField(h, key)
	if !ok || len(v) > 32 {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case isDigit(c), c == '.', strings.IndexByte("nsumh", c) >= 0:
		case c == 0xC2, c == 0xB5, c == 0xCE, c == 0xBC: // UTF-8 of µ and μ
		default:
			return 0, false
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxAhead {
		return 0, false
	}
	return d, true
}

// trimOWS trims SP and HTAB from both ends of s.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
