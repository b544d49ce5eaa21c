package quota

import (
	"embed"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrPermission matches errors of a Redis that refuses what the limiter
// needs: a user without one of the rights the README's ACL SETUSER line
// grants (Redis's NOPERM, or a script's command, key or channel refused),
// or credentials it does not accept. Nothing was decided. It is a
// configuration error, not an outage: it does not match ErrRedis, so a
// Transport returns it instead of falling back on its outage mode (which
// could send every request unmetered while Redis answers).
var ErrPermission = errors.New("quota: redis refuses a permission tollgate needs")

// permissionError is a refusal by Redis's access control, with what the
// limiter needs beside it. It matches ErrPermission.
type permissionError struct {
	op, refusal, needs string
}

func (e *permissionError) Error() string {
	return "quota: " + e.op + ": redis refuses a permission tollgate needs: " + e.refusal + " (" + e.needs + ")"
}

// Is reports whether target is ErrPermission.
func (e *permissionError) Is(target error) bool { return target == ErrPermission }

// asPermissionError finds an access-control refusal in what Redis
// answered: NOPERM for a command, key or channel of the call itself,
// "ERR The user executing the script can't ..." for one inside a script
// (Redis 7.0 does not name the command, only the script's hash and line:
// the error names the commands on that line, or, for a script it does
// not know, every command the scripts run), and WRONGPASS or NOAUTH for
// credentials.
func asPermissionError(op string, err error) *permissionError {
	var re redis.Error
	if !errors.As(err, &re) {
		return nil
	}
	msg := re.Error()
	e := &permissionError{op: op, refusal: msg}
	switch {
	case strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH"):
		e.needs = "check the user and password the Redis client logs in with"
	case strings.HasPrefix(msg, "NOPERM") && (op == "survey" || op == "scan" || op == "confirm"):
		// What operators' tools do (survey.go, control.go), beyond the programs' rights.
		e.needs = "the operators' tools need the ACL SETUSER tollgate-ops line in tollgate's README: " +
			"the programs' rules, and SCAN and PUBSUB NUMSUB"
	case strings.HasPrefix(msg, "NOPERM"):
		e.needs = "grant the user the rules of the ACL SETUSER line in tollgate's README: " +
			"keys and channels under the limiter's prefix, and the commands it names"
	case strings.Contains(msg, "The user executing the script can't"):
		cmds := refusedCommands(msg)
		if i := strings.Index(msg, " script: "); i >= 0 {
			e.refusal = msg[:i] // drop the script's hash and line
		}
		switch {
		case len(cmds) == 0:
			e.needs = "tollgate's scripts use keys and channels under the limiter's prefix and run " +
				strings.Join(scriptCommands(), " ")
		case strings.Contains(msg, "run this command"):
			e.refusal += ": " + strings.Join(cmds, ", ")
			e.needs = "grant the user +" + strings.Join(cmds, " +") + ", as the ACL SETUSER line in tollgate's README does"
		default: // a key or channel of the command
			e.refusal += ": " + strings.Join(cmds, ", ")
			e.needs = "grant the user the keys and channels under the limiter's prefix, as the ACL SETUSER line in tollgate's README does"
		}
	default:
		return nil
	}
	return e
}

//go:embed *.lua
var luaFiles embed.FS

// callPattern finds the command of each redis.call and redis.pcall.
var callPattern = regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]`)

// sources keeps the source of every script the limiter runs, by its SHA-1,
// so that a refusal inside one can be traced to the command refused.
var sources sync.Map

// newScript is redis.NewScript, keeping the script's source in sources.
func newScript(src string) *redis.Script {
	s := redis.NewScript(src)
	sources.Store(s.Hash(), src)
	return s
}

// refusedAt finds the script and line in a refusal inside a script.
var refusedAt = regexp.MustCompile(`script: ([0-9a-f]{40}), on @user_script:([0-9]+)`)

// refusedCommands returns, in lower case, the commands on the line of the
// script that a refusal inside a script points at, or nil when the script
// or the line is not one of the limiter's.
func refusedCommands(msg string) []string {
	m := refusedAt.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	src, ok := sources.Load(m[1])
	if !ok {
		return nil
	}
	line, err := strconv.Atoi(m[2])
	lines := strings.Split(src.(string), "\n")
	if err != nil || line < 1 || line > len(lines) {
		return nil
	}
	var out []string
	for _, c := range callPattern.FindAllStringSubmatch(lines[line-1], -1) {
		out = append(out, strings.ToLower(c[1]))
	}
	return out
}

// scriptCommands lists, in lower case and sorted, every command the
// limiter's scripts run: what a Redis user must be allowed besides EVALSHA
// and EVAL.
var scriptCommands = sync.OnceValue(func() []string {
	files, _ := luaFiles.ReadDir(".")
	var out []string
	for _, f := range files {
		src, _ := luaFiles.ReadFile(f.Name())
		for _, m := range callPattern.FindAllStringSubmatch(string(src), -1) {
			out = append(out, strings.ToLower(m[1]))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
})
