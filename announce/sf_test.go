package announce

import (
	"encoding/base64"
	"net/http"
	"testing"
)

// TestValidList checks the parser against RFC 9651's algorithms
// (https://www.rfc-editor.org/rfc/rfc9651#section-4.2), one rule a case.
func TestValidList(t *testing.T) {
	cases := []struct {
		in   string
		want bool
	}{
		{``, true},                      // 4.2.1: no members
		{`   `, true},                   // 4.2: leading SP discarded
		{`"a"`, true},                   // 4.2.5
		{`"a",`, false},                 // 4.2.1: trailing comma
		{`,"a"`, false},                 // 4.2.3.1: no bare item starts with ","
		{`"a" , "b"`, true},             // 4.2.1: OWS around ","
		{"\"a\"\t,\t\"b\"", true},       // OWS includes HTAB
		{"\t\"a\"", false},              // 4.2: only SP is discarded before the field
		{`"a" "b"`, false},              // 4.2.1: members need ","
		{`"a`, false},                   // 4.2.5: no closing DQUOTE
		{`"a\`, false},                  // 4.2.5: escape at the end
		{`"a\b"`, false},                // 4.2.5: only \" and \\ escape
		{"\"a\x7f\"", false},            // 4.2.5: DEL is not printable
		{`abc`, true},                   // 4.2.6: Token
		{`*a:b/c!#$%&'*+-.^_|~9`, true}, // 4.2.6: every tchar, ":" and "/"
		{`a;b;c=?0;d=?1`, true},         // 4.2.3.2: Boolean parameters
		{`a;b=?2`, false},               // 4.2.8
		{`a;B=1`, false},                // 4.2.3.3: keys are lower case
		{`a;*k_-.*9=1`, true},           // 4.2.3.3: key characters
		{`a;_k=1`, false},               // 4.2.3.3: not first
		{`a; k=1`, true},                // 4.2.3.2: SP after ";"
		{`a ;k=1`, false},               // nor before it
		{`a;k=`, false},                 // a value after "="
		{`1`, true},                     // 4.2.4
		{`-1`, true},                    //
		{`-`, false},                    //
		{`-a`, false},                   //
		{`123456789012345`, true},       // 15 digits
		{`1234567890123456`, false},     // 16
		{`123456789012.123`, true},      // Decimal: 12 and 3 digits
		{`1234567890123.1`, false},      // 13 integer digits
		{`1.1234`, false},               // 4 fraction digits
		{`1.`, false},                   // no fraction digit
		{`1.2.3`, false},                // a second "." ends the number; "." begins no member
		{`:QUJD:`, true},                // 4.2.7
		{`:QUI=:`, true},                // padded
		{`:QUI:`, true},                 // unpadded
		{`:QQ==:`, true},                //
		{`:QQ=:`, false},                // padding must be whole when present
		{`:Q:`, false},                  // one character is no byte
		{`:Q=UI:`, false},               // "=" before the end
		{`:QU I:`, false},               // outside the alphabet
		{`:QUJD`, false},                // no closing ":"
		{`::`, true},                    // empty
		{`@1659578233`, true},           // 4.2.9: Date
		{`@-1`, true},                   //
		{`@1.5`, false},                 // a Decimal is no Date
		{`@`, false},                    //
		{`%"abc"`, true},                // 4.2.10: Display String
		{`%"f%c3%bc"`, true},            // UTF-8
		{`%"%c3"`, false},               // truncated UTF-8
		{`%"%ff"`, false},               // not UTF-8
		{`%"%ed%a0%80"`, false},         // a surrogate is not UTF-8
		{`%"%C3%BC"`, false},            // hex is lower case
		{`%"%ff%ff%ff%ff%ff"`, false},   // never a rune
		{`%"%c3%bc%ff"`, false},         // a rune, then none
		{`%"%c"`, false},                // two hex digits
		{`%abc`, false},                 // %"
		{`("a" b 1);p=1, c`, true},      // 4.2.1.2: Inner List with parameters
		{`()`, true},                    // empty
		{`(  "a"  )`, true},             // SP inside
		{`("a","b")`, false},            // items are separated by SP
		{`("a"b)`, false},               // and SP is required
		{`("a"`, false},                 // no ")"
		{`(("a"))`, false},              // no nesting
		{`("a";x=1 "b")`, true},         // items' parameters
		{`"a";x=(1)`, false},            // no Inner List as a parameter value
		{"\"é\"", false},                // not ASCII
		{`é`, false},                    //
	}
	for _, c := range cases {
		if got := validList(c.in); got != c.want {
			t.Errorf("validList(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestBase64Agrees: validBase64 accepts exactly what Go's decoders decode,
// padded or not, over every string of up to 7 characters of a small
// alphabet, so decodeBinary never fails after it.
func TestBase64Agrees(t *testing.T) {
	const alphabet = "AQ+/="
	var walk func(s string)
	walk = func(s string) {
		_, errStd := base64.StdEncoding.DecodeString(s)
		_, errRaw := base64.RawStdEncoding.DecodeString(s)
		if got, want := validBase64(s), errStd == nil || errRaw == nil; got != want {
			t.Errorf("validBase64(%q) = %v, want %v", s, got, want)
		}
		if validBase64(s) {
			b, _ := base64.StdEncoding.DecodeString(s)
			if errStd != nil {
				b, _ = base64.RawStdEncoding.DecodeString(s)
			}
			if got := decodeBinary(s); got != string(b) {
				t.Errorf("decodeBinary(%q) = %q, want %q", s, got, b)
			}
		}
		if len(s) < 7 {
			for i := range len(alphabet) {
				walk(s + alphabet[i:i+1])
			}
		}
	}
	walk("")
}

// TestOpenAIKeys: the keys are in the canonical form that a response's
// header map holds.
func TestOpenAIKeys(t *testing.T) {
	for _, k := range openAIQuotas {
		for _, key := range []string{k.limit, k.remaining, k.reset} {
			if got := http.CanonicalHeaderKey(key); got != key {
				t.Errorf("key %q is canonically %q", key, got)
			}
		}
	}
}
