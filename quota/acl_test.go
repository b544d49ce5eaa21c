package quota

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

// The passwords of the tests' Redis users.
const (
	adminPassword = "admin-secret"
	userPassword  = "tollgate-secret"
)

// runSuiteUnderACL runs the suite's tests of every kind of call
// (decisions, holds, cancels, leases, settlements, slots and background
// turns with their wake-ups, announcements, pauses, records, a flushed
// script cache, an upgrade from format 1) on b, but for the tests named in
// skip. The runs under load and the randomized ones stay with TestSuite
// and TestSuiteCluster: they measure the limiter, not its rights. So does
// SlicedMatchesUnsliced, which compares decisions with those of format 1,
// an earlier tollgate whose scripts run commands the line no longer
// grants (INCRBY, DECRBY, LREM, EXISTS).
func runSuiteUnderACL(t *testing.T, b *backend, skip ...string) {
	skip = append(skip, "ExactUnderConcurrency", "ExactWithLeases", "ExactWithSettlement", "ExpensiveWaiterUnderLoad",
		"FastPathAgreesWithGeneral", "SlotsUnderLoad", "RandomOperationsKeepTheLimit",
		"SlicedMatchesUnsliced")
	for _, tc := range suite {
		if !slices.Contains(skip, tc.name) {
			t.Run(tc.name, func(t *testing.T) { tc.run(t, b) })
		}
	}
}

// TestSuiteUnderACL runs the behaviour suite with limiters logged in over
// TLS as a user holding only the README's ACL line, on a server whose
// default user has a password: everything works, and Redis refused
// nothing along the way.
func TestSuiteUnderACL(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Password: adminPassword, TLS: true})
	s.SetUser(t, redistest.ACL(t, "tollgate", userPassword, DefaultPrefix)...)
	runSuiteUnderACL(t, &backend{name: "redis-acl", client: s.Client(t), user: s.UserClient(t, "tollgate", userPassword), real: true})
	if refused := s.ACLRefusals(t); len(refused) > 0 {
		t.Errorf("Redis refused the suite's user %d times:\n%s", len(refused), strings.Join(refused, "\n"))
	}
}

// TestSuiteClusterUnderACL runs the behaviour suite on a cluster, as the
// README's user.
func TestSuiteClusterUnderACL(t *testing.T) {
	c := redistest.StartClusterWith(t, 3, 0, redistest.Options{Password: adminPassword})
	c.SetUser(t, redistest.ACL(t, "tollgate", userPassword, DefaultPrefix)...)
	opt := c.ClientOptions()
	opt.Username, opt.Password = "tollgate", userPassword
	user := redis.NewClusterClient(opt)
	t.Cleanup(func() { user.Close() })
	runSuiteUnderACL(t, &backend{name: "cluster-acl", client: c.Client(t), user: user, real: true}, "LaterFormatRefused")
	for _, n := range c.Nodes {
		if refused := n.ACLRefusals(t); len(refused) > 0 {
			t.Errorf("node %s refused the suite's user %d times:\n%s", n.Addr, len(refused), strings.Join(refused, "\n"))
		}
	}
}

// TestPermissionRefused: whatever Redis's access control refuses (a key,
// a command a script runs, a command the limiter sends, a password) is an
// error matching ErrPermission, not ErrRedis, that says what was refused.
func TestPermissionRefused(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Password: adminPassword})
	s.SetUser(t, redistest.ACL(t, "tollgate", userPassword, DefaultPrefix)...)
	without := func(name, rule string) string {
		rules := redistest.ACL(t, name, userPassword, DefaultPrefix)
		s.SetUser(t, slices.DeleteFunc(rules, func(r string) bool { return r == rule })...)
		return name
	}
	ctx := context.Background()
	c := charge("b", 1, PerWindow(10, time.Minute))
	allow := func(l *Limiter) error { _, err := l.Allow(ctx, "s", c); return err }
	slot := func(l *Limiter) error { _, err := l.TakeSlot(ctx, "s", "b", 2, 0); return err }
	for _, tc := range []struct {
		name, user, password string
		opts                 []Option
		call                 func(*Limiter) error
		want                 []string // in the error's text
	}{
		{"a key outside the prefix", "tollgate", userPassword, []Option{WithPrefix("other:")}, allow,
			[]string{"quota: reserve: redis refuses a permission tollgate needs: NOPERM", "keys", "under the limiter's prefix"}},
		{"a command a script runs", without("nozadd", "+zadd"), userPassword, nil, slot,
			[]string{"quota: slot: redis refuses a permission tollgate needs: ERR The user executing the script can't run this command or subcommand: zadd",
				"grant the user +zadd"}},
		{"a command the limiter sends", without("noevalsha", "+evalsha"), userPassword, nil, allow,
			[]string{"NOPERM this user has no permissions to run the 'evalsha' command"}},
		{"a wrong password", "tollgate", "not-the-password", nil, allow,
			[]string{"WRONGPASS", "check the user and password"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustNew(t, s.UserClient(t, tc.user, tc.password), append(tc.opts, WithPipelines(0))...)
			err := tc.call(l)
			t.Log(err)
			if !errors.Is(err, ErrPermission) || errors.Is(err, ErrRedis) {
				t.Fatalf("got %v, want an error matching ErrPermission and not ErrRedis", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), userPassword) || strings.Contains(err.Error(), "not-the-password") {
				t.Errorf("the error %q shows a password", err)
			}
		})
	}
}

// TestACLLineGrantsWhatTheScriptsRun: the README's line grants exactly the
// commands the limiter sends, those its go-redis clients send for it, and
// those its scripts run, so that a script that starts running another
// command fails here rather than on a server run under the line.
func TestACLLineGrantsWhatTheScriptsRun(t *testing.T) {
	var granted []string
	for _, r := range redistest.ACL(t, "tollgate", userPassword, DefaultPrefix)[1:] {
		if cmd, ok := strings.CutPrefix(r, "+"); ok {
			granted = append(granted, cmd)
		}
	}
	want := append([]string{
		"evalsha", "eval", // the scripts
		"ping",                     // Ping, the outage probe, and go-redis's pub/sub health checks
		"subscribe", "unsubscribe", // the slot and background watchers
		"wait",                     // WithReplicas
		"cluster|slots", "command", // a ClusterClient's slot map and command table
		"info", // the check of what the Redis keeps (internal/redisneeds)
	}, scriptCommands()...)
	slices.Sort(granted)
	slices.Sort(want)
	if !slices.Equal(granted, want) {
		t.Errorf("the README's ACL line grants\n%v\nwant\n%v", granted, want)
	}
	if len(scriptCommands()) < 20 {
		t.Errorf("found %d commands in the scripts: %v; the reading of the scripts is broken", len(scriptCommands()), scriptCommands())
	}
}

// TestPermissionRefusedInAnUnknownScript: a refusal inside a script that
// is not the limiter's, or at a line with no command, names every command
// the limiter's scripts run, since Redis 7.0 names none.
func TestPermissionRefusedInAnUnknownScript(t *testing.T) {
	for _, script := range []string{strings.Repeat("0", 40) + ", on @user_script:3", reserveScript.Hash() + ", on @user_script:1"} {
		err := asPermissionError("reserve", serverError("ERR The user executing the script can't run this command or subcommand script: "+script+"."))
		if err == nil || !errors.Is(err, ErrPermission) {
			t.Fatalf("%s: %v, want an error matching ErrPermission", script, err)
		}
		if !strings.HasSuffix(err.Error(), "run "+strings.Join(scriptCommands(), " ")+")") || strings.Contains(err.Error(), script) {
			t.Errorf("%s: %q, want every command the scripts run named, and no hash", script, err)
		}
	}
}

// serverError is an error as Redis answers it (a redis.Error).
type serverError string

func (e serverError) Error() string { return string(e) }

// RedisError marks serverError as a redis.Error.
func (serverError) RedisError() {}
