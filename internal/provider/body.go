package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/quota"
)

// ReadAll reads a request body of at most limit bytes (the provider's
// Options.MaxBody); its errors wrap errBody, the provider's ErrBody.
func ReadAll(body io.Reader, limit int64, errBody error) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading it: %v", errBody, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: it is larger than %d bytes (Options.MaxBody)", errBody, limit)
	}
	return b, nil
}

// ReadBody reads and closes the body of a request about to be sent, as
// ReadAll does; nil when it has none.
func ReadBody(req *http.Request, limit int64, errBody error) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	return ReadAll(req.Body, limit, errBody)
}

// ReadParsed reads and closes the body of a request about to be sent, as
// ReadBody does, and parses it: the body and what parse read of it. Either
// error names the request (method, as the provider names it, and path),
// for the user to tell which of many failed.
func ReadParsed[F any](req *http.Request, limit int64, errBody error, method string, parse func([]byte) (F, error)) ([]byte, F, error) {
	var f F
	body, err := ReadBody(req, limit, errBody)
	if err == nil {
		f, err = parse(body)
	}
	if err != nil {
		var none F
		return nil, none, fmt.Errorf("%w (%s %s)", err, method, req.URL.Path)
	}
	return body, f, nil
}

// ReadAgain reads a request's body through GetBody, leaving Body to be
// sent, as ReadAll does; nil when it has none. newTransport names the
// provider's NewTransport (e.g. "openai.NewTransport") in the error for a
// body that can be read only once.
func ReadAgain(req *http.Request, limit int64, errBody error, newTransport string) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.GetBody == nil {
		return nil, fmt.Errorf("%w: the body can be read only once, and must be sent: give the request a GetBody (http.NewRequest does for bytes and strings readers), or send it through %s's Transport", errBody, newTransport)
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBody, err)
	}
	defer body.Close()
	return ReadAll(body, limit, errBody)
}

// CloseBody closes the body of a request that is not sent.
func CloseBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// Count reads a positive whole number, as JSON writes it (100, 1e2,
// 100.0), or returns -1. Numbers past quota.MaxUnits are read as
// quota.MaxUnits.
func Count(raw json.RawMessage) int64 {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s[0] == '"' || s == "null" {
		return -1
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 1 {
			return -1
		}
		return min(n, quota.MaxUnits)
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || x < 1 || x != math.Trunc(x) || math.IsNaN(x) {
		return -1
	}
	if x >= quota.MaxUnits {
		return quota.MaxUnits
	}
	return int64(x)
}

// IsTrue reports whether raw is the JSON literal true.
func IsTrue(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "true" }
