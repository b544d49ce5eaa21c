package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/web"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/quota/ops"
)

// The record of operators' actions: pause, resume and spend (and the
// page's pause and resume) each leave who, when, what and why in Redis
// (ops.Operator.Record); status and the page show them.

const (
	// actionsRead is how many actions status and the page read: all of
	// them are in status -json.
	actionsRead = 50
	// actionsShown is how many the text of status shows.
	actionsShown = 5
)

// byFlag adds the -by flag of a command that acts.
func byFlag(fs *flag.FlagSet) *string {
	return fs.String("by", "", "who does it, for the record of operators' actions (default: the OS user); never a secret")
}

// actor is who does a command's action: -by when given, checked, else
// the OS user.
func actor(fs *flag.FlagSet, by string) (string, error) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "by" })
	name := command(fs)
	if !set {
		return osUser(), nil
	}
	switch {
	case strings.TrimSpace(by) == "":
		return "", usagef("%s: -by is empty: name who does it, or leave -by out for the OS user", name)
	case len(by) > ops.MaxBy:
		return "", usagef("%s: -by is %d bytes; at most %d", name, len(by), ops.MaxBy)
	case !plainText(by):
		return "", usagef("%s: -by must be plain text: no control characters, valid UTF-8", name)
	}
	return by, nil
}

// osUser names the user running the command: the login name, or the
// user id when the system cannot name it.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		if len(u.Username) <= ops.MaxBy && plainText(u.Username) {
			return u.Username
		}
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}

// plainText reports valid UTF-8 with no control characters.
func plainText(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, unicode.IsControl) < 0
}

// record keeps an action done by a command in the record of operators'
// actions, at the instant the decisions use.
func (c *cli) record(ctx context.Context, lim *quota.Limiter, client redis.UniversalClient, a ops.Action) error {
	at, err := serverNow(ctx, client, c.clock)
	if err != nil {
		return fmt.Errorf("the %s is done, but recording it failed: %w", a.What, err)
	}
	a.At = at
	if a.Via == "" {
		a.Via = "cli"
	}
	if err := ops.New(lim).Record(ctx, a); err != nil {
		return fmt.Errorf("the %s is done, but recording it failed: %w", a.What, err)
	}
	return nil
}

// both returns the failure to reach the processes and the failure to
// record, whichever happened; both in one line when both did.
func both(reach, rec error) error {
	switch {
	case reach == nil:
		return rec
	case rec == nil:
		return reach
	}
	return fmt.Errorf("%v; and %v", reach, rec)
}

// recorder is the page's Recorder: its pauses and resumes go to the
// record of operators' actions as the commands' do.
func (c *cli) recorder(lim *quota.Limiter, client redis.UniversalClient) web.Recorder {
	return func(ctx context.Context, a web.Action) error {
		return c.record(ctx, lim, client, ops.Action{By: a.By, Via: a.Via, What: a.What, Scope: a.Scope, Bucket: a.Bucket, For: a.For, Why: a.Why})
	}
}

// actionReport is an action as status -json shows it.
type actionReport struct {
	At     time.Time `json:"at"`
	By     string    `json:"by"`
	Via    string    `json:"via,omitempty"`
	What   string    `json:"what"`
	Scope  string    `json:"scope"`
	Bucket string    `json:"bucket,omitempty"`
	For    string    `json:"for,omitempty"`
	Units  int64     `json:"units,omitempty"`
	Why    string    `json:"why,omitempty"`
}

// gatherActions reads the newest actions, of scope only when it is not "".
func gatherActions(ctx context.Context, lim *quota.Limiter, scope string) ([]actionReport, error) {
	got, err := ops.New(lim).Actions(ctx, actionsRead)
	if err != nil {
		return nil, err
	}
	var out []actionReport
	for _, a := range got {
		if scope != "" && a.Scope != scope {
			continue
		}
		ar := actionReport{At: a.At.UTC(), By: a.By, Via: a.Via, What: a.What, Scope: a.Scope, Bucket: a.Bucket, Units: a.Units, Why: a.Why}
		if a.For > 0 {
			ar.For = a.For.String()
		}
		out = append(out, ar)
	}
	return out, nil
}

// writeActions writes the newest actions for people, after the scopes;
// nothing when there are none.
func writeActions(b *strings.Builder, r *report) {
	if len(r.Actions) == 0 {
		return
	}
	b.WriteString("\noperators' actions, newest first")
	if len(r.Actions) > actionsShown {
		fmt.Fprintf(b, " (the last %d; -json shows %d)", actionsShown, len(r.Actions))
	}
	b.WriteString(":\n")
	for _, a := range r.Actions[:min(len(r.Actions), actionsShown)] {
		b.WriteString("  " + agoText(a.At, r.At) + "  " + a.By)
		if a.Via != "" {
			b.WriteString(" (" + a.Via + ")")
		}
		b.WriteString("  " + actionText(a))
		if a.Why != "" {
			b.WriteString(": " + a.Why)
		}
		b.WriteString("\n")
	}
}

// actionText says what an action did, e.g. `pause bucket "search" of
// scope "project-a" for 30m0s`, `spend 200 units in bucket "pool" of
// scope "project-a"`.
func actionText(a actionReport) string {
	s := a.What + " "
	if a.Units > 0 {
		s += fmt.Sprintf("%d units in ", a.Units)
	}
	s += target(a.Scope, a.Bucket)
	if a.For != "" {
		s += " for " + a.For
	}
	return s
}

// agoText shows a past instant in UTC and how long ago it was, e.g.
// "17:00:02 UTC (4s ago)"; with its date when not on now's day.
func agoText(t, now time.Time) string {
	layout := "15:04:05 MST"
	lt, ln := t.UTC(), now.UTC()
	if lt.YearDay() != ln.YearDay() || lt.Year() != ln.Year() {
		layout = "2006-01-02 15:04:05 MST"
	}
	d := now.Sub(t).Round(time.Second)
	if d <= 0 {
		return lt.Format(layout) + " (now)"
	}
	return lt.Format(layout) + " (" + d.String() + " ago)"
}

// webActions are the actions as the page shows them.
func webActions(r *report) []web.Action {
	var out []web.Action
	for _, a := range r.Actions {
		d, _ := time.ParseDuration(a.For)
		out = append(out, web.Action{At: a.At, By: a.By, Via: a.Via, What: a.What, Scope: a.Scope, Bucket: a.Bucket, For: d, Units: a.Units, Why: a.Why})
	}
	return out
}
