package redistest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options say how StartWith and StartClusterWith run their servers beyond
// the defaults: a Redis that lets only those who log in, over TLS if asked.
type Options struct {
	// Password is the default user's password (requirepass; masterauth on
	// a cluster, so that replicas can sync). The package's own clients log
	// in with it.
	Password string
	// TLS makes the server speak TLS only, on its one port, with a
	// certificate for 127.0.0.1 signed by an authority made for the test
	// (see Server.TLS and Server.CAFile). On a cluster, the bus and
	// replication use TLS too.
	TLS bool
	// ClientCerts makes a TLS server require a client certificate signed
	// by the same authority; Server.TLS carries one.
	ClientCerts bool
	// Args are added to the command line, e.g. "--appendonly", "yes".
	Args []string

	authority *authority // shared by a cluster's nodes
}

// StartWith runs a redis-server on a free loopback port for the test, as
// opts say.
func StartWith(tb testing.TB, opts Options) *Server {
	tb.Helper()
	return start(tb, false, opts)
}

// secure adds to the server's command line what opts ask for, and sets up
// how the package's own clients reach it.
func (s *Server) secure(opts Options) error {
	s.Password = opts.Password
	if opts.Password != "" {
		s.args = append(s.args, "--requirepass", opts.Password, "--masterauth", opts.Password)
	}
	if !opts.TLS {
		return nil
	}
	ca := opts.authority
	if ca == nil {
		var err error
		if ca, err = newAuthority(s.Dir); err != nil {
			return err
		}
	}
	auth := "no"
	if opts.ClientCerts {
		auth = "yes"
	}
	s.args = append(s.args, "--port", "0", "--tls-port", strconv.Itoa(s.Port),
		"--tls-cert-file", ca.certFile, "--tls-key-file", ca.keyFile, "--tls-ca-cert-file", ca.caFile,
		"--tls-auth-clients", auth, "--tls-replication", "yes", "--tls-cluster", "yes")
	s.TLS, s.CAFile = ca.clientConfig(), ca.caFile
	return nil
}

// ClientOptions are the options of a client of the server logged in as
// its default user, over TLS when it speaks TLS.
func (s *Server) ClientOptions() *redis.Options {
	opt := &redis.Options{Addr: s.Addr, Password: s.Password}
	if s.TLS != nil {
		opt.TLSConfig = s.TLS.Clone()
	}
	return opt
}

// URL is the server's address as a redis:// URL (rediss:// over TLS),
// logging in as user with password when they are not empty.
func (s *Server) URL(user, password string) string {
	u := url.URL{Scheme: "redis", Host: s.Addr}
	if s.TLS != nil {
		u.Scheme = "rediss"
	}
	if user != "" || password != "" {
		u.User = url.UserPassword(user, password)
	}
	return u.String()
}

// UserOptions are the options redis.ParseURL reads from URL(user,
// password), trusting the authority made for the test over TLS: what a
// program given that URL uses.
func (s *Server) UserOptions(user, password string) *redis.Options {
	opt, err := redis.ParseURL(s.URL(user, password))
	if err != nil {
		panic("redistest: " + err.Error()) // URL makes only URLs ParseURL reads
	}
	if s.TLS != nil {
		opt.TLSConfig.RootCAs = s.TLS.RootCAs
	}
	return opt
}

// UserClient returns a client with UserOptions, closed when the test ends.
func (s *Server) UserClient(tb testing.TB, user, password string) *redis.Client {
	tb.Helper()
	c := redis.NewClient(s.UserOptions(user, password))
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// SetUser runs ACL SETUSER with rules on the server, as its default user.
func (s *Server) SetUser(tb testing.TB, rules ...string) {
	tb.Helper()
	c := redis.NewClient(s.ClientOptions())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := []any{"acl", "setuser"}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := c.Do(ctx, args...).Err(); err != nil {
		tb.Fatalf("redistest: ACL SETUSER %v on %s: %v", rules, s.Addr, err)
	}
}

// ACLRefusals returns what the server's access control refused since it
// started (ACL LOG), one line per kind of refusal.
func (s *Server) ACLRefusals(tb testing.TB) []string {
	tb.Helper()
	c := redis.NewClient(s.ClientOptions())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entries, err := c.Do(ctx, "acl", "log").Slice()
	if err != nil {
		tb.Fatalf("redistest: ACL LOG on %s: %v", s.Addr, err)
	}
	var out []string
	for _, e := range entries {
		m, _ := e.(map[any]any)
		out = append(out, fmt.Sprintf("user %v: %v %v refused (%v times)", m["username"], m["reason"], m["object"], m["count"]))
	}
	return out
}

// authority is a certificate authority made for a test, and the one
// certificate it signed: for 127.0.0.1, good for servers and clients alike
// (a cluster's nodes are each other's clients).
type authority struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
	leaf                      tls.Certificate
}

// newAuthority makes the authority and its certificate, and writes them
// as PEM files into dir.
func newAuthority(dir string) (*authority, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest authority"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	a := &authority{
		caFile:   filepath.Join(dir, "ca.crt"),
		certFile: filepath.Join(dir, "redis.crt"),
		keyFile:  filepath.Join(dir, "redis.key"),
		pool:     x509.NewCertPool(),
		leaf:     tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key},
	}
	a.pool.AddCert(ca)
	for file, block := range map[string]*pem.Block{
		a.caFile:   {Type: "CERTIFICATE", Bytes: caDER},
		a.certFile: {Type: "CERTIFICATE", Bytes: leafDER},
		a.keyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", file, err)
		}
	}
	return a, nil
}

// clientConfig trusts the authority alone and presents its certificate.
func (a *authority) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: a.pool, Certificates: []tls.Certificate{a.leaf}, MinVersion: tls.VersionTLS12}
}

// ACL returns the rules of the ACL SETUSER line in tollgate's README,
// user name first, made for user with password and for keys and channels
// under prefix instead of the line's "tollgate:": ready for SetUser. The
// tests take the line from the README, so that the line users copy is the
// one the tests run under.
func ACL(tb testing.TB, user, password, prefix string) []string {
	tb.Helper()
	readme := filepath.Join(ModuleRoot(tb), "README.md")
	text, err := os.ReadFile(readme)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	var line string
	for _, l := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(l, readmeACL) {
			if line != "" {
				tb.Fatalf("redistest: README.md has two lines starting %q", readmeACL)
			}
			line = l
		}
	}
	if line == "" {
		tb.Fatalf("redistest: README.md has no line starting %q", readmeACL)
	}
	rules := []string{user}
	for _, r := range strings.Fields(strings.TrimPrefix(line, readmeACL)) {
		switch {
		case r == ">CHANGE-ME":
			r = ">" + password
		case strings.HasPrefix(r, "~tollgate:") || strings.HasPrefix(r, "&tollgate:"):
			r = r[:1] + prefix + strings.TrimPrefix(r[1:], "tollgate:")
		}
		rules = append(rules, r)
	}
	return rules
}

// readmeACL starts the README's ACL line; the user's rules follow it.
const readmeACL = "ACL SETUSER tollgate "
