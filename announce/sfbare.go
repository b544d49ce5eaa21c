package announce

import (
	"encoding/base64"
	"unicode/utf8"
)

// Bare items (RFC 9651, section 4.2.3.1): a parser method for each type,
// and the checks and decoding their values need. sf.go describes the
// parser as a whole.

// bareItem dispatches on the first character (section 4.2.3.1).
func (p *parser) bareItem(b *bare, keep bool) bool {
	if p.i == len(p.s) {
		return false
	}
	switch c := p.s[p.i]; {
	case c == '-' || isDigit(c):
		return p.number(b)
	case c == '"':
		return p.str(b, keep)
	case isAlpha(c) || c == '*':
		return p.token(b)
	case c == ':':
		return p.binary(b)
	case c == '?':
		return p.boolean(b)
	case c == '@':
		return p.date(b)
	case c == '%':
		return p.display(b)
	}
	return false
}

// number parses an Integer or a Decimal (section 4.2.4): an Integer has at
// most 15 digits, so it always fits an int64 and never exceeds 2^53; a
// Decimal has at most 12 integer and 3 fractional digits.
func (p *parser) number(b *bare) bool {
	neg := false
	if p.s[p.i] == '-' {
		neg = true
		p.i++
	}
	if p.i == len(p.s) || !isDigit(p.s[p.i]) {
		return false
	}
	var v int64
	var intDigits, fracDigits int
	decimal := false
digits:
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case isDigit(c) && decimal:
			fracDigits++
		case isDigit(c):
			intDigits++
			v = v*10 + int64(c-'0')
		case c == '.' && !decimal:
			if intDigits > 12 {
				return false
			}
			decimal = true
		default:
			break digits
		}
		p.i++
		if !decimal && intDigits > 15 {
			return false
		}
		if decimal && intDigits+1+fracDigits > 16 {
			return false
		}
	}
	if decimal {
		if fracDigits == 0 || fracDigits > 3 {
			return false
		}
		b.kind = kindDecimal
		return true
	}
	if neg {
		v = -v
	}
	b.kind, b.num = kindInteger, v
	return true
}

// str parses a String (section 4.2.5): printable ASCII between double
// quotes, where only DQUOTE and backslash may be escaped.
func (p *parser) str(b *bare, keep bool) bool {
	p.i++ // DQUOTE
	start := p.i
	escaped := false
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '\\':
			if p.i+1 == len(p.s) || (p.s[p.i+1] != '"' && p.s[p.i+1] != '\\') {
				return false
			}
			escaped = true
			p.i += 2
		case c == '"':
			raw := p.s[start:p.i]
			p.i++
			b.kind = kindString
			if keep {
				b.str = raw
				if escaped {
					b.str = unescape(raw)
				}
			}
			return true
		case c < 0x20 || c > 0x7e:
			return false
		default:
			p.i++
		}
	}
	return false // no closing DQUOTE
}

// unescape drops the backslash of each escape in a String already checked
// by str.
func unescape(raw string) string {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' {
			i++
		}
		out = append(out, raw[i])
	}
	return string(out)
}

// token parses a Token (section 4.2.6).
func (p *parser) token(b *bare) bool {
	start := p.i
	p.i++
	for p.i < len(p.s) && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
		p.i++
	}
	b.kind, b.str = kindToken, p.s[start:p.i]
	return true
}

// binary parses a Byte Sequence (section 4.2.7), keeping its base64 text.
func (p *parser) binary(b *bare) bool {
	p.i++ // ":"
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ':' {
		p.i++
	}
	if p.i == len(p.s) {
		return false
	}
	text := p.s[start:p.i]
	p.i++
	if !validBase64(text) {
		return false
	}
	b.kind, b.str = kindBinary, text
	return true
}

// validBase64 reports whether decodeBinary will decode text. The alphabet
// is checked strictly ("parsers MUST fail"); padding may be absent and pad
// bits may be non-zero ("parsers SHOULD NOT fail"), both as RFC 9651,
// section 4.2.7, asks. Padding, when present, must be complete.
func validBase64(text string) bool {
	pad := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '=':
			pad++
		case pad > 0:
			return false // "=" before the end
		case !(isAlpha(c) || isDigit(c) || c == '+' || c == '/'):
			return false
		}
	}
	if pad == 0 {
		return len(text)%4 != 1
	}
	return pad <= 2 && len(text)%4 == 0
}

// decodeBinary decodes base64 text checked by validBase64. Go's decoders
// without Strict accept non-zero pad bits.
func decodeBinary(text string) string {
	enc := base64.StdEncoding
	if len(text)%4 != 0 || text == "" || text[len(text)-1] != '=' {
		enc = base64.RawStdEncoding
	}
	b, err := enc.DecodeString(text)
	if err != nil {
		return "" // unreachable after validBase64; TestBase64Agrees checks it
	}
	return string(b)
}

// boolean parses a Boolean (section 4.2.8): "?0" or "?1".
func (p *parser) boolean(b *bare) bool {
	if p.i+1 == len(p.s) || (p.s[p.i+1] != '0' && p.s[p.i+1] != '1') {
		return false
	}
	b.kind, b.num = kindBoolean, int64(p.s[p.i+1]-'0')
	p.i += 2
	return true
}

// date parses a Date (section 4.2.9): "@" and an Integer.
func (p *parser) date(b *bare) bool {
	p.i++ // "@"
	if p.i == len(p.s) || !p.number(b) || b.kind != kindInteger {
		return false
	}
	b.kind = kindDate
	return true
}

// display parses a Display String (section 4.2.10): %"...", where "%" is
// followed by two lowercase hex digits and the bytes must be UTF-8. It is
// checked as it is read, without a buffer.
func (p *parser) display(b *bare) bool {
	if p.i+1 == len(p.s) || p.s[p.i+1] != '"' {
		return false
	}
	p.i += 2
	var pending [utf8.UTFMax]byte
	n := 0
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		if c < 0x20 || c > 0x7e {
			return false
		}
		switch c {
		case '"':
			if n != 0 {
				return false // a truncated UTF-8 sequence
			}
			b.kind = kindDisplay
			return true
		case '%':
			if p.i+2 > len(p.s) || !isLowerHex(p.s[p.i]) || !isLowerHex(p.s[p.i+1]) {
				return false
			}
			c = hexValue(p.s[p.i])<<4 | hexValue(p.s[p.i+1])
			p.i += 2
		}
		pending[n] = c
		n++
		if utf8.FullRune(pending[:n]) {
			r, size := utf8.DecodeRune(pending[:n])
			if (r == utf8.RuneError && size == 1) || size != n {
				return false
			}
			n = 0
		}
	}
	return false // no closing DQUOTE
}
