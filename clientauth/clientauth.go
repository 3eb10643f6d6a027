// Package clientauth turns the connection-security settings every Sluice
// client command takes (--tls-ca, --tls-cert, --tls-key,
// --sasl-mechanism, --user, --password) into franz-go client options, so
// that Go programs can connect to a secured Sluice (or Kafka) the same
// way.
package clientauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Config is how a client connects. The zero value is plaintext without
// SASL.
type Config struct {
	TLS      bool   // use TLS; implied by CAFile, CertFile
	CAFile   string // PEM CA certificates to trust (default: the system's)
	CertFile string // PEM client certificate (mutual TLS), with KeyFile
	KeyFile  string

	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty with
	// a User means SCRAM-SHA-512.
	SASLMechanism string
	User          string
	Password      string

	// EnvPrefix names the environment variables FromEnv reads:
	// EnvPrefix+"TLS_CA", +"USER", +"PASSWORD". Default "SLUICE_".
	EnvPrefix string
}

// FromEnv fills the fields that are empty from SLUICE_TLS_CA,
// SLUICE_USER and SLUICE_PASSWORD (with EnvPrefix in place of SLUICE_).
func (c *Config) FromEnv() {
	prefix := c.EnvPrefix
	if prefix == "" {
		prefix = "SLUICE_"
	}
	if c.CAFile == "" {
		c.CAFile = os.Getenv(prefix + "TLS_CA")
	}
	if c.User == "" {
		c.User = os.Getenv(prefix + "USER")
	}
	if c.Password == "" {
		c.Password = os.Getenv(prefix + "PASSWORD")
	}
}

// TLSConfig returns the client TLS configuration, or nil when TLS is not
// used.
func (c Config) TLSConfig() (*tls.Config, error) {
	if !c.TLS && c.CAFile == "" && c.CertFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if c.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Mechanism returns the SASL mechanism, or nil when no user is set.
func (c Config) Mechanism() (sasl.Mechanism, error) {
	if c.User == "" {
		if c.SASLMechanism != "" {
			return nil, fmt.Errorf("--sasl-mechanism %s needs --user (or SLUICE_USER)", c.SASLMechanism)
		}
		return nil, nil
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case "PLAIN":
		return plain.Auth{User: c.User, Pass: c.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: c.User, Pass: c.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512", "":
		return scram.Auth{User: c.User, Pass: c.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("--sasl-mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
}

// Opts returns the franz-go options for the configuration, with empty
// fields taken from the environment (FromEnv).
func (c Config) Opts() ([]kgo.Opt, error) {
	c.FromEnv()
	var opts []kgo.Opt
	t, err := c.TLSConfig()
	if err != nil {
		return nil, err
	}
	if t != nil {
		opts = append(opts, kgo.DialTLSConfig(t))
	}
	m, err := c.Mechanism()
	if err != nil {
		return nil, err
	}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// FlagSet is what AddFlags needs of a flag set; both the standard
// library's *flag.FlagSet and pflag's *pflag.FlagSet (cobra) have it.
type FlagSet interface {
	StringVar(p *string, name, value, usage string)
}

// AddFlags registers --tls-ca, --tls-cert, --tls-key, --sasl-mechanism,
// --user and --password on fs, except the names in skip (a command whose
// own --password means something else skips "password"). Unset values
// fall back to SLUICE_TLS_CA, SLUICE_USER and SLUICE_PASSWORD when Opts
// runs; the environment is not shown as a flag default, so help output
// never prints a password.
func (c *Config) AddFlags(fs FlagSet, skip ...string) {
	c.addFlags(fs, "", "", skip)
}

// AddPrefixedFlags registers the same flags named prefix+NAME (such as
// --from-tls-ca) for a connection described by what ("the source"),
// with the environment variables EnvPrefix+TLS_CA, +USER, +PASSWORD.
func (c *Config) AddPrefixedFlags(fs FlagSet, prefix, what string) {
	c.addFlags(fs, prefix, " of "+what, nil)
}

func (c *Config) addFlags(fs FlagSet, prefix, of string, skip []string) {
	env := c.EnvPrefix
	if env == "" {
		env = "SLUICE_"
	}
	add := func(p *string, name, usage string) {
		if !slices.Contains(skip, name) {
			fs.StringVar(p, prefix+name, "", usage)
		}
	}
	add(&c.CAFile, "tls-ca", "PEM CA certificate to trust"+of+"; turns TLS on (env "+env+"TLS_CA)")
	add(&c.CertFile, "tls-cert", "PEM client certificate"+of+" for mutual TLS (with --"+prefix+"tls-key)")
	add(&c.KeyFile, "tls-key", "PEM key of --"+prefix+"tls-cert")
	add(&c.SASLMechanism, "sasl-mechanism", "SASL mechanism"+of+": PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default SCRAM-SHA-512 when a user is set)")
	add(&c.User, "user", "SASL user"+of+" (env "+env+"USER)")
	add(&c.Password, "password", "SASL password"+of+" (env "+env+"PASSWORD, which other users of the machine cannot see, unlike the flag)")
}
