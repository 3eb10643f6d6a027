package broker

// Security: listeners, TLS, SASL and authorization options.
//
// Listeners use Kafka's syntax, NAME://HOST:PORT, where the name is the
// listener's security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or
// SASL_SSL (Kafka's default listener.security.protocol.map). Each
// listener may have its own advertised address (advertised.listeners,
// matched by name); Metadata, FindCoordinator and DescribeCluster
// advertise the address of the listener the client connected through.
//
// Principals (what ACLs name):
//   - SASL: User:<the authenticated user name>.
//   - SSL with a client certificate verified against the client CA
//     (mutual TLS): User:<the certificate subject's CommonName>, or
//     User:<the whole subject DN, RFC 2253 form> when it has no CN.
//   - Otherwise (PLAINTEXT, SSL without a client certificate):
//     User:ANONYMOUS.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/auth"
	"github.com/sluicedb/sluice/internal/vfs"
)

// Security protocols of a listener.
const (
	Plaintext     = "PLAINTEXT"
	SSL           = "SSL"
	SASLPlaintext = "SASL_PLAINTEXT"
	SASLSSL       = "SASL_SSL"
)

// Listener is one address the broker serves, with its security protocol.
type Listener struct {
	Protocol  string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; also the listener's name
	Addr      string // host:port to listen on
	Advertise string // host:port clients are told; default Addr as bound
}

func (l Listener) tls() bool  { return l.Protocol == SSL || l.Protocol == SASLSSL }
func (l Listener) sasl() bool { return l.Protocol == SASLPlaintext || l.Protocol == SASLSSL }

// ParseListeners parses Kafka's listeners and advertised.listeners
// syntax: comma-separated NAME://HOST:PORT, with NAME one of the security
// protocols. An empty host listens on every interface. Each advertised
// entry must name a listener.
func ParseListeners(listeners, advertised string) ([]Listener, error) {
	var out []Listener
	for _, s := range splitList(listeners) {
		p, addr, err := parseListener(s)
		if err != nil {
			return nil, fmt.Errorf("listeners: %w", err)
		}
		if slices.ContainsFunc(out, func(l Listener) bool { return l.Protocol == p }) {
			return nil, fmt.Errorf("listeners: %s is listed twice", p)
		}
		out = append(out, Listener{Protocol: p, Addr: addr})
	}
	if len(out) == 0 {
		return nil, errors.New("listeners: none given (want NAME://HOST:PORT, such as PLAINTEXT://127.0.0.1:9092)")
	}
	for _, s := range splitList(advertised) {
		p, addr, err := parseListener(s)
		if err != nil {
			return nil, fmt.Errorf("advertised listeners: %w", err)
		}
		i := slices.IndexFunc(out, func(l Listener) bool { return l.Protocol == p })
		if i < 0 {
			return nil, fmt.Errorf("advertised listeners: %s is not a listener", p)
		}
		out[i].Advertise = addr
	}
	return out, nil
}

func parseListener(s string) (proto, addr string, err error) {
	name, addr, ok := strings.Cut(s, "://")
	if !ok {
		return "", "", fmt.Errorf("%q is not NAME://HOST:PORT", s)
	}
	name = strings.ToUpper(name)
	switch name {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
	default:
		return "", "", fmt.Errorf("%q: listener name %q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", s, name)
	}
	if _, _, err := splitHostPort(addr); err != nil {
		return "", "", fmt.Errorf("%q: %w", s, err)
	}
	return name, addr, nil
}

// Listeners sets the listeners, replacing ListenAddr and AdvertiseAddr.
// Default: one PLAINTEXT listener on ListenAddr.
func Listeners(ls ...Listener) Opt {
	return opt(func(c *cfg) { c.listeners = slices.Clone(ls) })
}

// TLSFiles sets the PEM certificate chain and private key that SSL and
// SASL_SSL listeners present and, when clientCAFile is not empty, the CAs
// that verify client certificates (mutual TLS: required on SSL
// listeners, checked when given on SASL_SSL ones). The files are read by
// New and again by ReloadTLS. TLS 1.2 is the minimum version
// (ssl.keystore.location, ssl.truststore.location, ssl.client.auth).
func TLSFiles(certFile, keyFile, clientCAFile string) Opt {
	return opt(func(c *cfg) { c.tlsCert, c.tlsKey, c.tlsClientCA = certFile, keyFile, clientCAFile })
}

// TLSConfig sets the TLS configuration of SSL and SASL_SSL listeners
// directly (instead of TLSFiles), for programs that manage their own
// certificates. MinVersion is raised to TLS 1.2 if lower.
func TLSConfig(t *tls.Config) Opt { return opt(func(c *cfg) { c.tlsConfig = t }) }

// SASLMechanisms sets the mechanisms SASL listeners offer, from PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512. Default: all three
// (sasl.enabled.mechanisms).
func SASLMechanisms(ms ...string) Opt {
	return opt(func(c *cfg) { c.saslMechs = slices.Clone(ms) })
}

// Authorization turns ACL checks on: every request is checked against
// the ACLs (Kafka's ACL semantics: an ALLOW binding grants, a DENY binding wins). Default off: every client may
// do everything (authorizer.class.name unset).
func Authorization(on bool) Opt { return opt(func(c *cfg) { c.authorize = on }) }

// SuperUsers sets principals that bypass ACLs; a bare name means
// User:NAME (super.users).
func SuperUsers(names ...string) Opt {
	return opt(func(c *cfg) {
		c.superUsers = nil
		for _, n := range names {
			if !strings.Contains(n, ":") {
				n = "User:" + n
			}
			c.superUsers = append(c.superUsers, n)
		}
	})
}

// AllowEveryoneIfNoACL lets anyone act on a resource that no ACL names.
// Default false (allow.everyone.if.no.acl.found).
func AllowEveryoneIfNoACL(on bool) Opt { return opt(func(c *cfg) { c.allowIfNoACL = on }) }

// BootstrapUser creates user with password (SCRAM-SHA-256 and -512) when
// the credential store is empty, so that a first administrator can log
// in; it does nothing once any credential exists.
func BootstrapUser(user, password string) Opt {
	return opt(func(c *cfg) { c.bootstrapUser, c.bootstrapPassword = user, password })
}

func (c *cfg) validateSecurity() error {
	if len(c.listeners) == 0 {
		c.listeners = []Listener{{Protocol: Plaintext, Addr: c.listenAddr, Advertise: c.advertiseAddr}}
	}
	needTLS := false
	for _, l := range c.listeners {
		switch l.Protocol {
		case Plaintext, SSL, SASLPlaintext, SASLSSL:
		default:
			return fmt.Errorf("broker: listener protocol %q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", l.Protocol)
		}
		if _, _, err := splitHostPort(l.Addr); err != nil {
			return fmt.Errorf("broker: listener %s address %q: %w", l.Protocol, l.Addr, err)
		}
		if l.Advertise != "" {
			if _, _, err := splitHostPort(l.Advertise); err != nil {
				return fmt.Errorf("broker: listener %s advertised address %q: %w", l.Protocol, l.Advertise, err)
			}
		}
		needTLS = needTLS || l.tls()
	}
	if needTLS && c.tlsConfig == nil && (c.tlsCert == "" || c.tlsKey == "") {
		return errors.New("broker: an SSL or SASL_SSL listener needs a certificate and key (--tls-cert, --tls-key)")
	}
	if c.saslMechs == nil {
		c.saslMechs = slices.Clone(auth.Mechanisms)
	}
	for _, m := range c.saslMechs {
		if !auth.IsMechanism(m) {
			return fmt.Errorf("broker: SASL mechanism %q is not one of %s", m, strings.Join(auth.Mechanisms, ", "))
		}
	}
	if c.bootstrapUser != "" && c.bootstrapPassword == "" {
		return fmt.Errorf("broker: bootstrap user %q has an empty password", c.bootstrapUser)
	}
	return nil
}

// tlsState holds the TLS configuration of the broker's listeners.
// Certificates are swapped by reload; handshakes in progress and open
// connections keep the configuration they started with.
type tlsState struct {
	certFile, keyFile, caFile string

	mu     sync.RWMutex // guards strict and lenient
	strict *tls.Config  // SSL listeners: client certificate required when a CA is set
	loose  *tls.Config  // SASL_SSL listeners: client certificate verified if given
}

func newTLSState(c *cfg) (*tlsState, error) {
	s := &tlsState{certFile: c.tlsCert, keyFile: c.tlsKey, caFile: c.tlsClientCA}
	if c.tlsConfig != nil {
		t := c.tlsConfig.Clone()
		t.MinVersion = max(t.MinVersion, tls.VersionTLS12)
		s.strict, s.loose = t, t
		return s, nil
	}
	if c.tlsCert == "" {
		return s, nil
	}
	return s, s.reload()
}

// reload reads the certificate, key and client CA files again.
func (s *tlsState) reload() error {
	if s.certFile == "" {
		return errors.New("broker: TLS is not configured from files")
	}
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return fmt.Errorf("broker: load TLS certificate: %w", err)
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	strict, loose := base, base
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return fmt.Errorf("broker: read TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("broker: TLS client CA %s holds no PEM certificate", s.caFile)
		}
		strict = base.Clone()
		strict.ClientCAs, strict.ClientAuth = pool, tls.RequireAndVerifyClientCert
		loose = base.Clone()
		loose.ClientCAs, loose.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	s.mu.Lock()
	s.strict, s.loose = strict, loose
	s.mu.Unlock()
	return nil
}

// serverConfig is the configuration a listener hands to tls.Server: it
// picks up the current certificates at each handshake.
func (s *tlsState) serverConfig(l Listener) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			s.mu.RLock()
			defer s.mu.RUnlock()
			if l.Protocol == SSL {
				return s.strict, nil
			}
			return s.loose, nil
		},
	}
}

// HTTPSConfig is a TLS server configuration for an HTTP listener beside
// the broker's (the schema registry's), from the same certificates: each
// handshake takes the ones in effect, so ReloadTLS applies to it too.
// With a client CA, client certificates are verified against it, and
// required when requireClientCert is set (as on SSL listeners; else only
// verified if given, as on SASL_SSL ones). Nil when the broker has no
// TLS certificate.
func (b *Broker) HTTPSConfig(requireClientCert bool) *tls.Config {
	b.tls.mu.RLock()
	none := b.tls.strict == nil
	b.tls.mu.RUnlock()
	if none {
		return nil
	}
	proto := SASLSSL
	if requireClientCert {
		proto = SSL
	}
	return b.tls.serverConfig(Listener{Protocol: proto})
}

// ReloadTLS reads the certificate, key and client CA files given to
// TLSFiles again; new handshakes use them, open connections are kept.
// sluice serve calls it on SIGHUP.
func (b *Broker) ReloadTLS() error {
	if err := b.tls.reload(); err != nil {
		return err
	}
	b.cfg.logger.Info("TLS certificates reloaded", "cert", b.tls.certFile)
	return nil
}

// certPrincipal is the principal of a verified client certificate.
func certPrincipal(cs tls.ConnectionState) string {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return auth.Anonymous
	}
	sub := cs.PeerCertificates[0].Subject
	if sub.CommonName != "" {
		return "User:" + sub.CommonName
	}
	return "User:" + sub.String()
}

// openSecurity loads TLS certificates and opens the credential and ACL
// stores, creating the bootstrap user when the store is empty.
func (b *Broker) openSecurity() error {
	var err error
	if b.tls, err = newTLSState(&b.cfg); err != nil {
		return err
	}
	dir := b.layout.SecurityDir()
	if err := vfs.MkdirAllPrivate(b.fs, dir); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if b.creds, err = auth.OpenCredentials(b.fs, dir); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if b.acls, err = auth.OpenACLs(b.fs, dir); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if b.tokens, err = b.openTokens(dir); err != nil {
		return err
	}
	if b.cfg.authorize {
		b.authz = &auth.Authorizer{ACLs: b.acls, SuperUsers: b.cfg.superUsers, AllowIfNoACL: b.cfg.allowIfNoACL}
	}
	if b.cfg.bootstrapUser != "" && b.creds.Empty() {
		for _, m := range auth.ScramMechanisms {
			if err := b.creds.SetPassword(b.cfg.bootstrapUser, m, b.cfg.bootstrapPassword, 0); err != nil {
				return fmt.Errorf("broker: bootstrap user %q: %w", b.cfg.bootstrapUser, err)
			}
		}
		b.cfg.logger.Info("created the bootstrap user", "user", b.cfg.bootstrapUser)
	}
	return nil
}

// Failed-authentication delay: the answer to a failed SASL exchange is
// held back authFailBase, doubling with each further failure from the
// same address up to authFailMax; an address's count is forgotten
// authFailForget after its last failure.
const (
	authFailBase   = 100 * time.Millisecond
	authFailMax    = 5 * time.Second
	authFailForget = 10 * time.Minute
	authFailHosts  = 10000 // addresses remembered at most
)

// authFailures counts recent authentication failures per client address.
type authFailures struct {
	mu    sync.Mutex // guards hosts
	hosts map[string]authFail
}

type authFail struct {
	n    int
	last time.Time
}

// failed records a failure from host and returns how long to delay the
// answer, starting from base.
func (f *authFailures) failed(host string, now time.Time, base time.Duration) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hosts == nil {
		f.hosts = map[string]authFail{}
	}
	if len(f.hosts) >= authFailHosts {
		for h, a := range f.hosts {
			if now.Sub(a.last) > authFailForget {
				delete(f.hosts, h)
			}
		}
	}
	a := f.hosts[host]
	if now.Sub(a.last) > authFailForget {
		a.n = 0
	}
	a.n++
	a.last = now
	if len(f.hosts) < authFailHosts || a.n > 1 {
		f.hosts[host] = a
	}
	return failDelay(a.n, base)
}

// failDelay is the delay after the nth failure in a row.
func failDelay(n int, base time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < authFailMax; i++ {
		d *= 2
	}
	return min(d, authFailMax)
}

// listenerConfigs returns Kafka's listeners and advertised.listeners
// values for this broker (configured addresses; advertised ones as
// bound after Start).
func (b *Broker) listenerConfigs() (listeners, advertised string) {
	b.mu.RLock()
	lns := b.lns
	b.mu.RUnlock()
	var ls, as []string
	for _, lc := range b.cfg.listeners {
		ls = append(ls, lc.Protocol+"://"+lc.Addr)
		adv := lc.Advertise
		for _, l := range lns {
			if l.Protocol == lc.Protocol {
				adv = net.JoinHostPort(l.adv.host, strconv.Itoa(int(l.adv.port)))
			}
		}
		if adv == "" {
			adv = lc.Addr
		}
		as = append(as, lc.Protocol+"://"+adv)
	}
	return strings.Join(ls, ","), strings.Join(as, ",")
}
