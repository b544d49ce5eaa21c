package costs

import (
	"errors"
	"fmt"
)

// ErrUnknownEndpoint is returned by Resolve for a request that no rule
// matches, in a table without a default.
var ErrUnknownEndpoint = errors.New("costs: unknown endpoint")

// ErrInvalid matches every error about a spec that cannot be loaded, and
// about charges a rule's func computed that cannot be used.
var ErrInvalid = errors.New("costs: invalid table")

// UnknownError reports a request that no rule matches. It matches
// ErrUnknownEndpoint. The query is left out: it may hold credentials.
type UnknownError struct {
	Method, Host, Path string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("costs: unknown endpoint: %s %s%s", e.Method, e.Host, e.Path)
}

// Is reports whether target is ErrUnknownEndpoint.
func (e *UnknownError) Is(target error) bool { return target == ErrUnknownEndpoint }

// invalidError is a spec or charge problem; it matches ErrInvalid.
type invalidError struct{ msg string }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: "costs: " + fmt.Sprintf(format, args...)}
}

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }
