package announce

// Byte classes, shared by the Structured Field parser and the readers of
// the other dialects.

func isDigit(c byte) bool    { return '0' <= c && c <= '9' }
func isLower(c byte) bool    { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool    { return isLower(c) || ('A' <= c && c <= 'Z') }
func isLowerHex(c byte) bool { return isDigit(c) || ('a' <= c && c <= 'f') }

func hexValue(c byte) byte {
	if isDigit(c) {
		return c - '0'
	}
	return c - 'a' + 10
}

// isTchar reports whether c is a tchar (RFC 9110, section 5.6.2).
func isTchar(c byte) bool {
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return isDigit(c) || isAlpha(c)
}
