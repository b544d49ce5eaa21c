package quota

import (
	"embed"
	"errors"
	"regexp"
	"slices"
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
// (Redis 7.0 does not say which, so the error lists what the scripts
// run), and WRONGPASS or NOAUTH for credentials.
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
	case strings.HasPrefix(msg, "NOPERM"):
		e.needs = "grant the user the rules of the ACL SETUSER line in tollgate's README: " +
			"keys and channels under the limiter's prefix, and the commands it names"
	case strings.Contains(msg, "The user executing the script can't"):
		if i := strings.Index(msg, " script: "); i >= 0 {
			e.refusal = msg[:i] // drop the script's hash and line
		}
		e.needs = "tollgate's scripts use keys and channels under the limiter's prefix and run " +
			strings.Join(scriptCommands(), " ")
	default:
		return nil
	}
	return e
}

//go:embed *.lua
var scriptSources embed.FS

// scriptCommands lists, in lower case and sorted, every command the
// limiter's scripts run: what a Redis user must be allowed besides EVALSHA
// and EVAL.
var scriptCommands = sync.OnceValue(func() []string {
	call := regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]`)
	files, _ := scriptSources.ReadDir(".")
	var out []string
	for _, f := range files {
		src, _ := scriptSources.ReadFile(f.Name())
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			out = append(out, strings.ToLower(m[1]))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
})
