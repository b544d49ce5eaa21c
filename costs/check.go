package costs

import (
	"errors"
	"fmt"
	"strings"
)

// maxUnits is the largest number of units one charge may carry: the
// largest limit the quota engine accepts (quota.MaxUnits).
const maxUnits = 1 << 50

// check reports why an endpoint cannot be used: charges to undeclared or
// repeated buckets, units that are not positive (or, for a free endpoint,
// not zero) or too large, settle specs for buckets it does not charge.
func (t *Table) check(e Endpoint) error {
	if e.Continues && !e.Free {
		return errors.New("a continuation is free: Continues needs Free")
	}
	if len(e.Charges) == 0 && !e.Free {
		return errors.New("no charges")
	}
	seen := make(map[string]bool, len(e.Charges))
	for _, c := range e.Charges {
		switch {
		case !t.buckets[c.Bucket]:
			return fmt.Errorf("bucket %q is not declared in buckets %q", c.Bucket, t.spec.Buckets)
		case seen[c.Bucket]:
			return fmt.Errorf("bucket %q is charged twice", c.Bucket)
		case e.Free && c.Units != 0:
			return fmt.Errorf("bucket %q: a free request charges 0 units, not %d", c.Bucket, c.Units)
		case !e.Free && c.Units <= 0:
			return fmt.Errorf("bucket %q: units must be positive, got %d", c.Bucket, c.Units)
		case c.Units > maxUnits:
			return fmt.Errorf("bucket %q: %d units overflow the limit of %d", c.Bucket, c.Units, int64(maxUnits))
		}
		seen[c.Bucket] = true
	}
	type settledBy struct {
		bucket string
		status int // 0: a header or a field
	}
	settled := make(map[settledBy]bool, len(e.Settle))
	for _, st := range e.Settle {
		by := settledBy{st.Bucket, st.Status}
		switch {
		case e.Free:
			return errors.New("a free request has no cost to settle")
		case !seen[st.Bucket]:
			return fmt.Errorf("settle: bucket %q is not one the rule charges", st.Bucket)
		case settled[by] && st.Status != 0:
			return fmt.Errorf("settle: bucket %q is settled twice for status %d", st.Bucket, st.Status)
		case settled[by]:
			return fmt.Errorf("settle: bucket %q is settled twice", st.Bucket)
		case st.Status != 0 && (st.Status < 100 || st.Status > 599):
			return fmt.Errorf("settle: bucket %q: %d is not an HTTP status", st.Bucket, st.Status)
		case st.Status != 0 && (st.Header != "" || st.Field != ""):
			return fmt.Errorf("settle: bucket %q: a status's cost is its Units, not a header's or a field's", st.Bucket)
		case st.Status != 0 && (st.Units < 0 || st.Units > maxUnits):
			return fmt.Errorf("settle: bucket %q: status %d: units must be from 0 to %d, got %d", st.Bucket, st.Status, int64(maxUnits), st.Units)
		case st.Status != 0:
			settled[by] = true
			continue
		case st.Units != 0:
			return fmt.Errorf("settle: bucket %q: units %d without a status", st.Bucket, st.Units)
		case st.Header == "" && st.Field == "":
			return fmt.Errorf("settle: bucket %q: neither a header nor a field to read, nor a status", st.Bucket)
		case st.Header != "" && !validHeader(st.Header):
			return fmt.Errorf("settle: bucket %q: %q is not a header name", st.Bucket, st.Header)
		case st.Field != "" && !validField(st.Field):
			return fmt.Errorf("settle: bucket %q: %q is not a dotted path of field names", st.Bucket, st.Field)
		}
		settled[by] = true
	}
	return nil
}

// validHeader reports whether name is an HTTP header name (an RFC 9110
// token).
func validHeader(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return name != ""
}

// validField reports whether path is field names joined by dots, none
// empty.
func validField(path string) bool {
	if path == "" || len(path) > 256 {
		return false
	}
	for _, name := range strings.Split(path, ".") {
		if name == "" {
			return false
		}
	}
	return true
}
