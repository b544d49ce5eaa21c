package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate"
)

// Load reads a configuration, checks all of it, and reads the tokens and
// keys it names from getenv. dir is where relative paths (Upstream.Costs)
// are found: the configuration file's directory. Every error is one line,
// starting "gateway: ", and names no secret.
func Load(data []byte, dir string, getenv func(string) string) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("gateway: reading the configuration: %s", syntaxAt(data, err))
	}
	if dec.More() {
		return nil, errors.New("gateway: reading the configuration: data after the JSON object")
	}
	if err := cfg.check(dir, getenv); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// check checks the configuration and reads its secrets.
func (c *Config) check(dir string, getenv func(string) string) error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	switch c.ForwardedFor {
	case "", "set", "append", "none":
	default:
		return fmt.Errorf("gateway: forwarded_for %q: want set, append or none", c.ForwardedFor)
	}
	if _, err := c.Limits.parse(); err != nil {
		return err
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("gateway: public_url %q must be an http or https URL with a host, and no user, query or fragment", redactURL(c.PublicURL))
		}
	}
	names := map[string]bool{}
	tokens := map[string]string{} // hash: caller
	for i, cl := range c.Callers {
		switch {
		case cl.Name == "":
			return fmt.Errorf("gateway: callers[%d] has no name", i)
		case names[cl.Name]:
			return fmt.Errorf("gateway: two callers are named %q", cl.Name)
		case cl.TokenEnv == "":
			return fmt.Errorf("gateway: caller %q has no token_env", cl.Name)
		}
		names[cl.Name] = true
		tok := strings.TrimSpace(getenv(cl.TokenEnv))
		if tok == "" {
			return fmt.Errorf("gateway: caller %q: the environment variable %s (token_env) is not set", cl.Name, cl.TokenEnv)
		}
		h := tollgate.HashCredential(tok)
		if other, dup := tokens[h]; dup {
			return fmt.Errorf("gateway: callers %q and %q have the same token", other, cl.Name)
		}
		tokens[h] = cl.Name
		c.Callers[i].token = newSecret(tok)
	}
	if len(c.Upstreams) == 0 {
		return errors.New("gateway: no upstreams")
	}
	ups, prefixes := map[string]bool{}, map[string]string{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Name == "" {
			return fmt.Errorf("gateway: upstreams[%d] has no name", i)
		}
		if ups[u.Name] {
			return fmt.Errorf("gateway: two upstreams are named %q", u.Name)
		}
		ups[u.Name] = true
		if err := u.check(dir, getenv, len(c.Callers) > 0); err != nil {
			return fmt.Errorf("gateway: upstream %q: %v", u.Name, err)
		}
		if other, dup := prefixes[u.Prefix]; dup {
			return fmt.Errorf("gateway: upstreams %q and %q have the same prefix %q", other, u.Name, u.Prefix)
		}
		prefixes[u.Prefix] = u.Name
		if u.key != nil {
			if cl, ok := tokens[tollgate.HashCredential(u.key.get())]; ok {
				return fmt.Errorf("gateway: caller %q's token is upstream %q's key: a caller must never hold the key", cl, u.Name)
			}
		}
	}
	return nil
}

// check checks an upstream and reads its key.
func (u *Upstream) check(dir string, getenv func(string) string, callers bool) error {
	if !strings.HasPrefix(u.Prefix, "/") || !strings.HasSuffix(u.Prefix, "/") {
		return fmt.Errorf("prefix %q must start and end with \"/\"", u.Prefix)
	}
	if err := checkPrefix(u.Prefix); err != nil {
		return err
	}
	t, err := url.Parse(u.Target)
	if err != nil || (t.Scheme != "http" && t.Scheme != "https") || t.Host == "" || t.User != nil || t.RawQuery != "" || t.Fragment != "" {
		return fmt.Errorf("target %q must be an http or https URL with a host, and no user, query or fragment", redactURL(u.Target))
	}
	u.target = t
	if u.KeyEnv != "" {
		u.key = newSecret(strings.TrimSpace(getenv(u.KeyEnv)))
		if u.key == nil {
			return fmt.Errorf("the environment variable %s (key_env) is not set", u.KeyEnv)
		}
	} else if callers {
		return errors.New("no key_env: an upstream without a key passes each caller's own credential through, which only a gateway without callers (loopback clients only) may do")
	}
	if u.Policy != nil {
		if _, err := u.Policy.policy(); err != nil {
			return err
		}
	}
	if u.Provider != "custom" && (u.Costs != "" || u.Buckets != nil) {
		return fmt.Errorf("costs and buckets are for the custom provider, not %q", u.Provider)
	}
	if _, _, err := u.fairness(); err != nil {
		return err
	}
	if u.Provider == "custom" && u.Costs != "" && !filepath.IsAbs(u.Costs) {
		u.Costs = filepath.Join(dir, u.Costs)
	}
	p, ok := providers[u.Provider]
	if !ok {
		return fmt.Errorf("unknown provider %q (want %s)", u.Provider, strings.Join(providerNames(), ", "))
	}
	// Check the options and build nothing yet: a provider's NewTransport
	// needs a Redis client; Build makes it.
	return p.check(u)
}

// checkPrefix refuses a prefix routing could never match: one with dot
// segments, empty segments inside it, or characters a path escapes.
func checkPrefix(p string) error {
	inner := strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
	if inner == "" {
		return nil // "/": every path
	}
	for _, seg := range strings.Split(inner, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("prefix %q has an empty or dot segment", p)
		}
		if (&url.URL{Path: "/" + seg}).EscapedPath() != "/"+seg {
			return fmt.Errorf("prefix %q has characters a URL path escapes", p)
		}
	}
	return nil
}

// syntaxAt says what is wrong with a configuration that is not JSON, or
// not of its shape, and where: the line and column of the offending byte,
// or of the end of a document cut short; for a value of the wrong type,
// its line.
func syntaxAt(data []byte, err error) string {
	offset, lineOnly := int64(-1), false
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		offset = syntax.Offset
	case errors.As(err, &typ):
		offset, lineOnly = typ.Offset, true // the offset is the value's end
	case errors.Is(err, io.ErrUnexpectedEOF):
		offset = int64(len(data))
		err = errors.New("the JSON ends before it is complete")
	}
	if offset < 0 || offset > int64(len(data)) {
		return oneLine(err.Error())
	}
	line, col := 1, 1
	for _, b := range data[:offset] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	if lineOnly {
		return fmt.Sprintf("line %d: %s", line, oneLine(err.Error()))
	}
	return fmt.Sprintf("line %d, column %d: %s", line, col, oneLine(err.Error()))
}

// providerNames lists the providers, sorted.
func providerNames() []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// oneLine keeps a message on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// redactURL hides a URL's password.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	if strings.Contains(s, "@") {
		return "(a URL with a user)"
	}
	return strconv.Quote(s)[1 : len(strconv.Quote(s))-1]
}
