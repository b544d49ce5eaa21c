package jsonscan

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// scan feeds doc to a scanner for paths in pieces of size n (0: whole).
func scan(doc string, n int, paths ...string) *Scanner {
	s := New(paths...)
	b := []byte(doc)
	if n == 0 {
		n = len(b) + 1
	}
	for len(b) > 0 {
		k := min(n, len(b))
		s.Write(b[:k])
		b = b[k:]
	}
	return s
}

func TestFindsNumbersAtPaths(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		path string
		want int64 // -1: not found
		bad  bool  // malformed: scanning stops
	}{
		{"OpenAI chat completion", `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`, "usage.total_tokens", 21, false},
		{"Anthropic message", `{"type":"message","usage":{"input_tokens":25,"output_tokens":7}}`, "usage.output_tokens", 7, false},
		{"Shopify cost", `{"data":{},"extensions":{"cost":{"requestedQueryCost":101,"actualQueryCost":46,"throttleStatus":{"maximumAvailable":1000.0}}}}`, "extensions.cost.actualQueryCost", 46, false},
		{"GitHub GraphQL", `{"data":{"viewer":{"login":"octocat"},"rateLimit":{"cost":1,"remaining":4999}}}`, "data.rateLimit.cost", 1, false},
		{"absent", `{"usage":null}`, "usage.total_tokens", -1, false},
		{"a string, not a number", `{"usage":{"total_tokens":"21"}}`, "usage.total_tokens", -1, false},
		{"inside an array: not a path", `{"choices":[{"usage":{"total_tokens":5}}]}`, "choices.usage.total_tokens", -1, false},
		{"the same name deeper", `{"a":{"cost":9},"cost":4}`, "cost", 4, false},
		{"met twice: the last", `{"cost":3,"cost":8}`, "cost", 8, false},
		{"a fraction rounds up", `{"cost":2.25}`, "cost", 3, false},
		{"an exponent", `{"cost":1.5e2}`, "cost", 150, false},
		{"negative: ignored", `{"cost":-4}`, "cost", -1, false},
		{"too large: ignored", `{"cost":1e300}`, "cost", -1, false},
		{"escapes in names and values", `{"a\"b":{"x\u0041":7},"s":"\\\"\u00e9\n"}`, `a"b.xA`, 7, false},
		{"empty containers", `{"a":{},"b":[],"c":[[],{}],"cost":5}`, "cost", 5, false},
		{"literals", `{"t":true,"f":false,"n":null,"cost":6}`, "cost", 6, false},
		{"whitespace", " {\n\t\"cost\" :\r 12 \n} ", "cost", 12, false},
		{"truncated", `{"usage":{"total_tokens":21`, "usage.total_tokens", -1, false},
		{"trailing comma", `{"a":1,}`, "a", 1, true},
		{"a bad literal", `{"a":tru,"cost":1}`, "cost", -1, true},
		{"not JSON", `data: [DONE]`, "cost", -1, true},
		{"what follows the document is not read", `{"cost":1} {"cost":2}`, "cost", 1, false},
		{"deep", strings.Repeat(`{"a":`, 100) + `1` + strings.Repeat(`}`, 100), "a", -1, true},
	}
	for _, c := range cases {
		for _, n := range []int{0, 1, 2, 7} {
			s := scan(c.doc, n, c.path)
			got, ok := s.Number(0)
			if !ok {
				got = -1
			}
			if got != c.want || s.Failed() != c.bad {
				t.Errorf("%s, pieces of %d: got %d, failed %v; want %d, failed %v", c.name, n, got, s.Failed(), c.want, c.bad)
			}
		}
	}
}

// TestResetKeepsTheLastFound: a stream of server-sent events is a document
// per event; the last event that names the path wins.
func TestResetKeepsTheLastFound(t *testing.T) {
	s := New("usage.total_tokens", "id")
	for _, ev := range []string{
		`{"id":1,"choices":[{"delta":{"content":"Hi"}}],"usage":null}`,
		`{"id":2,"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`,
		`[DONE]`,
	} {
		s.Reset()
		s.Write([]byte(ev))
	}
	if got, ok := s.Number(0); !ok || got != 21 {
		t.Errorf("usage.total_tokens = %d, %v; want 21", got, ok)
	}
	if got, _ := s.Number(1); got != 2 {
		t.Errorf("id = %d, want the last event's 2", got)
	}
}

// FuzzScan: whatever the bytes and however they are split, the scanner
// never panics; on valid JSON it never fails and finds what a full decode
// finds.
func FuzzScan(f *testing.F) {
	f.Add([]byte(`{"usage":{"total_tokens":21}}`), uint8(3))
	f.Add([]byte(`{"a":[1,{"usage":{"total_tokens":2}}],"usage":{"total_tokens":5.5}}`), uint8(1))
	f.Add([]byte(`{"usage":{"total_tokens":"x"},"u\u0073age":{"total_tokens":1e3}}`), uint8(5))
	f.Fuzz(func(t *testing.T, doc []byte, piece uint8) {
		s := scan(string(doc), int(piece), "usage.total_tokens")
		got, ok := s.Number(0)
		if !json.Valid(doc) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return
		}
		if s.Failed() && depth(doc) <= maxDepth && !longToken(doc) {
			t.Fatalf("valid JSON %q failed the scan", doc)
		}
		if s.Failed() {
			return
		}
		want, wantOK := lookup(v, "usage", "total_tokens")
		if ok != wantOK || ok && got != want {
			t.Fatalf("%q: got %d, %v; the decoder finds %d, %v", doc, got, ok, want, wantOK)
		}
	})
}

// lookup is the reference: the last number at the path, found by a full
// decode. A repeated field keeps its last value in both.
func lookup(v any, path ...string) (int64, bool) {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false
		}
		if v, ok = m[k]; !ok {
			return 0, false
		}
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<53 {
		return 0, false
	}
	return int64(math.Ceil(f)), true
}

// depth is how deeply doc nests, counting brackets outside strings.
func depth(doc []byte) int {
	d, most, inString, escaped := 0, 0, false, false
	for _, c := range doc {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == '{' || c == '['):
			d++
			most = max(most, d)
		case !inString && (c == '}' || c == ']'):
			d--
		}
	}
	return most
}

// longToken reports a string (which may be a field name) or a number
// longer than the scanner keeps, as written in doc.
func longToken(doc []byte) bool {
	str, num, inString, escaped := 0, 0, false, false
	for _, c := range doc {
		switch {
		case inString && escaped:
			escaped = false
			str++
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
			str++
		case c == '"':
			inString, str = true, 0
		case strings.IndexByte("0123456789+-.eE", c) >= 0:
			num++
		default:
			num = 0
		}
		if str > maxKey || num > maxNumber {
			return true
		}
	}
	return false
}
