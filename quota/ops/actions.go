package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/quotapath"
	"github.com/tollgate/tollgate/quota"
)

// MaxBy is the longest name of who acted that the record keeps, in bytes.
const MaxBy = 64

// The record of operators' actions: <prefix>actions, a list of versioned
// JSON entries, oldest first, at most actionsKept of them, dropped
// actionsTTL after the newest was written.
const (
	actionsKept   = 1000
	actionsTTL    = 30 * 24 * time.Hour
	actionsFormat = 1
	maxField      = 256 // a name's longest spelling in an entry, bytes
)

// An Action is one operator's action, as the record of operators' actions
// keeps it ([Operator.Record], [Operator.Actions]). It names who, never
// with a secret: an operator token is not who.
type Action struct {
	// At is when it was done; Record keeps it to the millisecond.
	At time.Time
	// By is who did it: the OS user, or the name the operator gave, e.g.
	// "alice".
	By string
	// Via is where from, e.g. "cli" or "web 127.0.0.1:53412".
	Via string
	// What is what was done, e.g. "pause", "resume", "spend".
	What string
	// Scope and Bucket are what it was done to; Bucket "" is the whole
	// scope.
	Scope, Bucket string
	// For is a pause's length; Units the units a spend recorded.
	For   time.Duration
	Units int64
	// Why is the reason given, e.g. "runaway job".
	Why string
}

// entry is an Action as stored: compact JSON, instants in Unix ms,
// durations in ms, e.g.
//
//	{"v":1,"at":1795694400000,"by":"alice","via":"cli","what":"pause","scope":"project-a","bucket":"search","for":1800000,"why":"deploy rollback"}
type entry struct {
	V      int    `json:"v"`
	At     int64  `json:"at"`
	By     string `json:"by"`
	Via    string `json:"via,omitempty"`
	What   string `json:"what"`
	Scope  string `json:"scope"`
	Bucket string `json:"bucket,omitempty"`
	For    int64  `json:"for,omitempty"`
	Units  int64  `json:"units,omitempty"`
	Why    string `json:"why,omitempty"`
}

// actionsKey is where the record is kept: one key of its own, outside
// every scope's hash tag.
func (o *Operator) actionsKey() string { return o.op.Prefix + "actions" }

// Record appends a to the record of operators' actions in Redis (the key
// <prefix>actions): a list that keeps the newest 1000 actions, and is
// dropped 30 days after the newest was recorded. A zero At is the local
// clock's now. By, What and Scope are required; every field is plain
// text (no control characters), By at most MaxBy bytes, Why at most
// quota.MaxReason, the others 256: an error matching quota.ErrInvalid
// otherwise. It runs RPUSH, LTRIM and PEXPIRE, which the README's ACL
// lines grant.
func (o *Operator) Record(ctx context.Context, a Action) error {
	if err := checkAction(a); err != nil {
		return err
	}
	if a.At.IsZero() {
		a.At = time.Now()
	}
	b, err := json.Marshal(entry{V: actionsFormat, At: a.At.UnixMilli(), By: a.By, Via: a.Via, What: a.What,
		Scope: a.Scope, Bucket: a.Bucket, For: a.For.Milliseconds(), Units: a.Units, Why: a.Why})
	if err != nil {
		return fmt.Errorf("ops: recording the action: %w", err)
	}
	key := o.actionsKey()
	// Not a transaction (MULTI is not granted): should the trim or the
	// expiry fail, the next action's does them.
	_, err = o.op.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, key, b)
		p.LTrim(ctx, key, -actionsKept, -1)
		p.PExpire(ctx, key, actionsTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("ops: recording the action: %w", err)
	}
	return nil
}

// checkAction checks what Record keeps.
func checkAction(a Action) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("ops: an action %s: %w", fmt.Sprintf(format, args...), quota.ErrInvalid)
	}
	switch {
	case strings.TrimSpace(a.By) == "":
		return bad("with no one who did it (By)")
	case len(a.By) > MaxBy:
		return bad("by a name of %d bytes; at most %d", len(a.By), MaxBy)
	case strings.TrimSpace(a.What) == "":
		return bad("with nothing done (What)")
	case a.Scope == "":
		return bad("on no scope")
	case len(a.Why) > quotapath.MaxReason:
		return bad("with a reason of %d bytes; at most %d", len(a.Why), quotapath.MaxReason)
	case a.For < 0 || a.Units < 0:
		return bad("of a negative length or count")
	}
	for _, f := range []struct{ name, s string }{{"By", a.By}, {"Via", a.Via}, {"What", a.What}, {"Scope", a.Scope}, {"Bucket", a.Bucket}, {"Why", a.Why}} {
		if len(f.s) > maxField {
			return bad("with a %s of %d bytes; at most %d", f.name, len(f.s), maxField)
		}
		if !plain(f.s) {
			return bad("with a %s that is not plain text (control characters or invalid UTF-8)", f.name)
		}
	}
	return nil
}

// Actions reads the newest n actions of the record of operators' actions
// (all it keeps when n <= 0), newest first; none, and no error, when
// there are none. An entry this version cannot read (of a later record
// format, or not an entry) is left out.
func (o *Operator) Actions(ctx context.Context, n int) ([]Action, error) {
	start := int64(0)
	if n > 0 {
		start = -int64(n)
	}
	raw, err := o.op.Client.LRange(ctx, o.actionsKey(), start, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("ops: reading the operators' actions: %w", err)
	}
	var out []Action
	for _, s := range slices.Backward(raw) {
		var e entry
		if json.Unmarshal([]byte(s), &e) != nil || e.V != actionsFormat || e.At <= 0 || e.By == "" || e.What == "" {
			continue
		}
		out = append(out, Action{At: time.UnixMilli(e.At).UTC(), By: e.By, Via: e.Via, What: e.What, Scope: e.Scope,
			Bucket: e.Bucket, For: time.Duration(e.For) * time.Millisecond, Units: e.Units, Why: e.Why})
	}
	return out, nil
}

// plain reports valid UTF-8 with no control characters.
func plain(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, unicode.IsControl) < 0
}
