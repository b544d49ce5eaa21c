package spend

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/quota"
)

// TestCluster: on a Redis Cluster, two processes write scopes that live
// on different masters; ReadAll finds every scope on every master, and
// Read each scope on its own.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	c := cl.Client(t)
	ctx := context.Background()
	a := newRecorder(t, c, "a")
	b := newRecorder(t, c, "b")
	var scopes []string
	for i := range 12 {
		scope := fmt.Sprintf("scope-%d", i)
		scopes = append(scopes, scope)
		a.Spend(scope, "pool", "e", "", int64(i+1))
		b.Spend(scope, "pool", "e", "", 100)
	}
	flush(t, a, t0)
	flush(t, b, t0)

	var masters atomic.Int32
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		keys, err := n.Keys(ctx, "test:*:spenders").Result()
		if len(keys) > 0 {
			masters.Add(1)
		}
		return err
	})
	if err != nil || masters.Load() < 2 {
		t.Fatalf("the scopes' keys are on %d masters (%v), want several", masters.Load(), err)
	}
	all, err := ReadAll(ctx, c, "test:", t0)
	if err != nil || len(all) != 2*len(scopes) {
		t.Fatalf("ReadAll: %d reports, %v; want %d", len(all), err, 2*len(scopes))
	}
	sums := Summarize(all)
	slices.Sort(scopes) // as Summarize orders them
	for i, s := range sums {
		var n int
		fmt.Sscanf(s.Scope, "scope-%d", &n)
		if s.Scope != scopes[i] || s.Units != int64(n+1+100) || len(s.Spenders) != 2 || s.Spenders[0].Process != "b" {
			t.Errorf("summary %d: %+v, want %s's %d units, b first", i, s, scopes[i], n+1+100)
		}
	}
	for _, scope := range scopes {
		reports, err := Read(ctx, c, "test:", scope, t0)
		if err != nil || len(reports) != 2 {
			t.Errorf("Read(%s): %d reports, %v; want 2", scope, len(reports), err)
		}
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if all, err := ReadAll(ctx, c, "test:", t0); err != nil || len(all) != len(scopes) {
		t.Errorf("ReadAll after a left: %d reports, %v; want %d", len(all), err, len(scopes))
	}
}

// The passwords of the tests' Redis users.
const (
	adminPassword = "admin-secret"
	userPassword  = "tollgate-secret"
)

// TestUnderTheREADMEsACL: a process logged in as the README's programs'
// user writes and leaves, an operator with SCAN added reads; Redis
// refuses nothing.
func TestUnderTheREADMEsACL(t *testing.T) {
	s := redistest.StartWith(t, redistest.Options{Password: adminPassword})
	s.SetUser(t, redistest.ACL(t, "tollgate", userPassword, quota.DefaultPrefix)...)
	s.SetUser(t, append(redistest.ACL(t, "ops", userPassword, quota.DefaultPrefix), "+scan")...)
	ctx := context.Background()
	r, err := New(s.UserClient(t, "tollgate", userPassword), Options{Process: "p"})
	if err != nil {
		t.Fatal(err)
	}
	ops := s.UserClient(t, "ops", userPassword)
	r.Spend("s", "b", "e", "", 1)
	w := r.BeginWait("s", "b", "", t0)
	flush(t, r, t0)
	w.End()
	flush(t, r, t0.Add(5*time.Second))
	if reports, err := ReadAll(ctx, ops, "", t0.Add(5*time.Second)); err != nil || len(reports) != 1 || len(reports[0].Waiting) != 0 {
		t.Errorf("ReadAll: %+v, %v; want one report, none waiting", reports, err)
	}
	if reports, err := Read(ctx, r.client, "", "s", t0.Add(5*time.Second)); err != nil || len(reports) != 1 {
		t.Errorf("Read as the programs' user: %+v, %v; want one report", reports, err)
	}
	if err := r.Leave(ctx); err != nil {
		t.Error(err)
	}
	if refused := s.ACLRefusals(t); len(refused) > 0 {
		t.Errorf("Redis refused %d times:\n%s", len(refused), strings.Join(refused, "\n"))
	}
}

// TestScriptsRunWhatTheACLGrants: every command the scripts run is one
// the README's programs' line grants, so that a script that starts running
// another fails here.
func TestScriptsRunWhatTheACLGrants(t *testing.T) {
	granted := map[string]bool{}
	for _, rule := range redistest.ACL(t, "tollgate", userPassword, quota.DefaultPrefix)[1:] {
		if cmd, ok := strings.CutPrefix(rule, "+"); ok {
			granted[cmd] = true
		}
	}
	call := regexp.MustCompile(`redis\.call\('([A-Za-z]+)'`)
	var ran []string
	for _, src := range []string{writeSource, leaveSource} {
		for _, m := range call.FindAllStringSubmatch(src, -1) {
			ran = append(ran, strings.ToLower(m[1]))
		}
	}
	if len(ran) != 7 {
		t.Fatalf("found the commands %q in the scripts, want 7: the reading is broken", ran)
	}
	for _, cmd := range ran {
		if !granted[cmd] {
			t.Errorf("a script runs %s, which the README's ACL line does not grant", cmd)
		}
	}
	for _, cmd := range []string{"zrange", "mget"} { // Read's
		if !granted[cmd] {
			t.Errorf("Read sends %s, which the README's ACL line does not grant", cmd)
		}
	}
}
