// Package jsonscan finds numbers at given paths of a JSON document fed to
// it piece by piece, as a response body is read: it holds no more of the
// document than the current key and number, so a body of any length is
// read in bounded memory, and nothing needs to be buffered for the caller.
//
// A path is field names joined by dots, e.g. "usage.output_tokens": it
// names a number reached through objects only; fields inside arrays are
// not paths. A path met twice keeps the last number.
package jsonscan

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds on what one document may ask of the scanner: past them it stops,
// as on malformed input, and keeps the numbers it found so far.
const (
	maxDepth  = 64
	maxKey    = 256 // bytes of one field name
	maxNumber = 64  // bytes of one number
)

// state is where the scanner is in the grammar.
type state int

const (
	stValue   state = iota // before a value
	stAfter                // after a value: ',' or a closing bracket
	stKey                  // in an object, before a field name or '}'
	stColon                // after a field name
	stString               // in a string (a value or a field name)
	stEscape               // after a backslash in a string
	stUnicode              // in the four hex digits of \u
	stNumber               // in a number
	stLiteral              // in true, false or null
	stDone                 // the document has ended, or scanning stopped
)

// frame is an object or array the scanner is inside.
type frame struct {
	array  bool
	key    string // the object's current field name
	fields int    // field names read so far
}

// Scanner finds numbers in one JSON document at a time. The zero value
// finds nothing; use New. A Scanner is not safe for concurrent use.
type Scanner struct {
	paths  map[string]int
	found  []int64
	ok     []bool
	stack  []frame
	st     state
	isKey  bool   // the string being read is a field name
	buf    []byte // the field name or number being read
	hex    []byte // the digits of a \u escape
	lit    string // what is left of a literal: "rue", "alse", "ull"
	failed bool
}

// New returns a Scanner for paths, each field names joined by dots.
func New(paths ...string) *Scanner {
	s := &Scanner{paths: make(map[string]int, len(paths)), found: make([]int64, len(paths)), ok: make([]bool, len(paths))}
	for i, p := range paths {
		s.paths[p] = i
	}
	return s
}

// Number returns the number found at the i-th path, when one was: an
// integer at least zero, rounded up when it had a fraction.
func (s *Scanner) Number(i int) (int64, bool) { return s.found[i], s.ok[i] }

// Failed reports whether the document was malformed or past the bounds,
// so that scanning stopped.
func (s *Scanner) Failed() bool { return s.failed }

// Reset readies the scanner for another document, forgetting where it was
// but keeping the numbers found, so that the last one met wins.
func (s *Scanner) Reset() {
	s.stack, s.st, s.isKey, s.buf, s.hex, s.lit, s.failed = s.stack[:0], stValue, false, s.buf[:0], s.hex[:0], "", false
}

// Write feeds the next bytes of the document. It never fails: malformed
// input stops the scan (see Failed).
func (s *Scanner) Write(p []byte) (int, error) {
	for i := 0; i < len(p) && s.st != stDone; i++ {
		s.step(p[i])
	}
	return len(p), nil
}

// fail stops the scan.
func (s *Scanner) fail() { s.st, s.failed = stDone, true }

// step reads one byte.
func (s *Scanner) step(c byte) {
	switch s.st {
	case stValue:
		s.value(c)
	case stAfter:
		s.after(c)
	case stKey:
		switch {
		case space(c):
		case c == '"':
			s.st, s.isKey, s.buf = stString, true, s.buf[:0]
		case c == '}' && s.top().fields == 0:
			s.close() // an empty object
		default:
			s.fail()
		}
	case stColon:
		switch {
		case space(c):
		case c == ':':
			s.st = stValue
		default:
			s.fail()
		}
	case stString:
		switch {
		case c == '"':
			s.endString()
		case c == '\\':
			s.st = stEscape
		case c < 0x20:
			s.fail()
		default:
			s.keep(c)
		}
	case stEscape:
		s.st = stString
		switch c {
		case '"', '\\', '/':
			s.keep(c)
		case 'b', 'f', 'n', 'r', 't':
			s.keep(' ') // stands for a control character no path names
		case 'u':
			s.st, s.hex = stUnicode, s.hex[:0]
		default:
			s.fail()
		}
	case stUnicode:
		s.hex = append(s.hex, c)
		if len(s.hex) == 4 {
			r, err := strconv.ParseUint(string(s.hex), 16, 16)
			if err != nil {
				s.fail()
				return
			}
			s.st = stString
			if s.isKey {
				s.buf = utf8.AppendRune(s.buf, rune(r))
				if len(s.buf) > maxKey {
					s.fail()
				}
			}
		}
	case stNumber:
		if strings.IndexByte("0123456789+-.eE", c) >= 0 {
			s.buf = append(s.buf, c)
			if len(s.buf) > maxNumber {
				s.fail()
			}
			return
		}
		s.endNumber()
		if s.st != stDone {
			s.step(c)
		}
	case stLiteral:
		if c != s.lit[0] {
			s.fail()
			return
		}
		if s.lit = s.lit[1:]; s.lit == "" {
			s.endValue()
		}
	}
}

// value reads the first byte of a value.
func (s *Scanner) value(c byte) {
	switch {
	case space(c):
	case c == '{':
		s.open(false)
	case c == '[':
		s.open(true)
	case c == ']' && len(s.stack) > 0 && s.top().array:
		s.close() // an empty array
	case c == '"':
		s.st, s.isKey = stString, false
	case c == '-' || '0' <= c && c <= '9':
		s.st, s.buf = stNumber, append(s.buf[:0], c)
	case c == 't':
		s.st, s.lit = stLiteral, "rue"
	case c == 'f':
		s.st, s.lit = stLiteral, "alse"
	case c == 'n':
		s.st, s.lit = stLiteral, "ull"
	default:
		s.fail()
	}
}

// after reads what follows a value.
func (s *Scanner) after(c byte) {
	switch {
	case space(c):
	case len(s.stack) == 0:
		s.fail() // something after the document
	case c == ',' && s.top().array:
		s.st = stValue
	case c == ',':
		s.st = stKey // a field name must follow: '}' may not
	case c == ']' && s.top().array, c == '}' && !s.top().array:
		s.close()
	default:
		s.fail()
	}
}

func (s *Scanner) top() *frame { return &s.stack[len(s.stack)-1] }

// open enters an object or array.
func (s *Scanner) open(array bool) {
	if len(s.stack) == maxDepth {
		s.fail()
		return
	}
	s.stack = append(s.stack, frame{array: array})
	if array {
		s.st = stValue
	} else {
		s.st = stKey
	}
}

// close leaves the innermost object or array.
func (s *Scanner) close() {
	s.stack = s.stack[:len(s.stack)-1]
	s.st = stAfter
	if len(s.stack) == 0 {
		s.st = stDone
	}
}

// keep adds a byte of a field name; a value's string is not kept.
func (s *Scanner) keep(c byte) {
	if s.isKey {
		s.buf = append(s.buf, c)
		if len(s.buf) > maxKey {
			s.fail()
		}
	}
}

// endString ends a string: a field name becomes the object's current key.
func (s *Scanner) endString() {
	if s.isKey {
		f := s.top()
		f.key, f.fields = string(s.buf), f.fields+1
		s.st = stColon
		return
	}
	s.endValue()
}

// endNumber ends a number and records it when its path is asked for.
func (s *Scanner) endNumber() {
	f, err := strconv.ParseFloat(string(s.buf), 64)
	if err != nil {
		s.fail()
		return
	}
	if i, ok := s.paths[s.path()]; ok && f >= 0 && f <= 1<<53 && !math.IsInf(f, 0) {
		s.found[i], s.ok[i] = int64(math.Ceil(f)), true
	}
	s.endValue()
}

// endValue moves past a scalar value.
func (s *Scanner) endValue() {
	s.st = stAfter
	if len(s.stack) == 0 {
		s.st = stDone
	}
}

// path is the dotted path of the value being read, or "" inside an array.
func (s *Scanner) path() string {
	var b strings.Builder
	for i, f := range s.stack {
		if f.array {
			return ""
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.key)
	}
	return b.String()
}

func space(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
