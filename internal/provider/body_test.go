package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/quota"
)

var errBody = errors.New("p: the body")

// TestReadAll: a body up to the limit is read; one past it, or failing,
// is an error wrapping errBody.
func TestReadAll(t *testing.T) {
	if b, err := ReadAll(strings.NewReader("abcd"), 4, errBody); err != nil || string(b) != "abcd" {
		t.Fatalf("at the limit: %q %v", b, err)
	}
	if _, err := ReadAll(strings.NewReader("abcde"), 4, errBody); !errors.Is(err, errBody) || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Fatalf("past the limit: %v", err)
	}
	if _, err := ReadAll(io.MultiReader(strings.NewReader("a"), failing{}), 4, errBody); !errors.Is(err, errBody) {
		t.Fatalf("failing: %v", err)
	}
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("broken") }

// TestReadBodyAndAgain: ReadBody reads and closes Body; ReadAgain reads
// through GetBody and refuses a body without it, naming NewTransport.
func TestReadBodyAndAgain(t *testing.T) {
	req, _ := http.NewRequest("POST", "http://127.0.0.1/", bytes.NewReader([]byte("{}")))
	if b, err := ReadAgain(req, 10, errBody, "p.NewTransport"); err != nil || string(b) != "{}" {
		t.Fatalf("ReadAgain: %q %v", b, err)
	}
	if b, err := ReadBody(req, 10, errBody); err != nil || string(b) != "{}" {
		t.Fatalf("ReadBody after ReadAgain: %q %v", b, err)
	}
	req.GetBody = nil
	req.Body = io.NopCloser(strings.NewReader("{}"))
	if _, err := ReadAgain(req, 10, errBody, "p.NewTransport"); !errors.Is(err, errBody) || !strings.Contains(err.Error(), "p.NewTransport's Transport") {
		t.Fatalf("without GetBody: %v", err)
	}
	for _, body := range []io.ReadCloser{nil, http.NoBody} {
		req.Body = body
		if b, err := ReadBody(req, 10, errBody); b != nil || err != nil {
			t.Fatalf("ReadBody of %v: %q %v", body, b, err)
		}
		if b, err := ReadAgain(req, 10, errBody, "p.NewTransport"); b != nil || err != nil {
			t.Fatalf("ReadAgain of %v: %q %v", body, b, err)
		}
		CloseBody(req)
	}
}

// TestCount: positive whole numbers as JSON writes them, capped at
// quota.MaxUnits; anything else -1.
func TestCount(t *testing.T) {
	for raw, want := range map[string]int64{
		"100": 100, " 1e2 ": 100, "100.0": 100, "1e300": quota.MaxUnits, "9223372036854775807": quota.MaxUnits,
		"0": -1, "-3": -1, "1.5": -1, `"7"`: -1, "null": -1, "": -1, "true": -1,
	} {
		if got := Count(json.RawMessage(raw)); got != want {
			t.Errorf("Count(%s) = %d, want %d", raw, got, want)
		}
	}
	if !IsTrue(json.RawMessage(" true")) || IsTrue(json.RawMessage(`"true"`)) || IsTrue(nil) {
		t.Error("IsTrue")
	}
}

// TestReadParsed: the body and what parse read of it come back; a body
// past the limit or one parse refuses is an error naming the request,
// wrapping the reader's or the parser's.
func TestReadParsed(t *testing.T) {
	errParse := errors.New("p: not an object")
	parse := func(b []byte) (int, error) {
		if !bytes.HasPrefix(b, []byte("{")) {
			return 0, errParse
		}
		return len(b), nil
	}
	req := func(body string) *http.Request {
		r, _ := http.NewRequest("POST", "http://x/v1/send", strings.NewReader(body))
		return r
	}
	if b, n, err := ReadParsed(req("{}"), 4, errBody, "POST", parse); err != nil || string(b) != "{}" || n != 2 {
		t.Fatalf("a body that parses: %q %d %v", b, n, err)
	}
	for _, c := range []struct {
		name, body string
		want       error
	}{
		{"past the limit", "{1234}", errBody},
		{"refused by parse", "[]", errParse},
	} {
		_, n, err := ReadParsed(req(c.body), 4, errBody, "send", parse)
		if !errors.Is(err, c.want) || !strings.HasSuffix(err.Error(), " (send /v1/send)") || n != 0 {
			t.Errorf("%s: %d %v, want an error wrapping %q and naming the request", c.name, n, err, c.want)
		}
	}
}
