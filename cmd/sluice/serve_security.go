package main

// Security flags of sluice serve: listeners, TLS, SASL and ACLs (see
// README "Security"). Like every serve flag, each is also an environment
// variable (--tls-cert is SLUICE_TLS_CERT) and a config file key.

import (
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluicedb/sluice/broker"
)

// flagSet is what the security flags need of a flag set (the standard
// library's or pflag's).
type flagSet interface {
	StringVar(p *string, name, value, usage string)
	BoolVar(p *bool, name string, value bool, usage string)
}

type serveSecurity struct {
	listeners, advertised   string
	tlsCert, tlsKey, tlsCA  string
	saslMechanisms          string
	authorization, allowAll bool
	superUsers              string
}

func (s *serveSecurity) addFlags(fs flagSet) {
	fs.StringVar(&s.listeners, "listeners", "", "listeners in Kafka's syntax, such as PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093 (names: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); replaces --listen")
	fs.StringVar(&s.advertised, "advertised-listeners", "", "addresses clients are told, per listener name, such as SASL_SSL://broker.example.com:9093")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM certificate chain of SSL and SASL_SSL listeners; reloaded on SIGHUP")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&s.tlsCA, "tls-client-ca", "", "PEM CA that signs client certificates: mutual TLS, required on SSL listeners; the principal is User:<certificate CN>")
	fs.StringVar(&s.saslMechanisms, "sasl-mechanisms", "", "SASL mechanisms offered, comma-separated (default PLAIN,SCRAM-SHA-256,SCRAM-SHA-512)")
	fs.BoolVar(&s.authorization, "authorization", false, "check every request against the ACLs")
	fs.BoolVar(&s.allowAll, "allow-everyone-if-no-acl", false, "with --authorization, allow access to resources no ACL names (Kafka's allow.everyone.if.no.acl.found)")
	fs.StringVar(&s.superUsers, "superusers", "", "comma-separated users (or User:NAME principals) that bypass ACLs")
}

// opts turns the flags into broker options. SLUICE_BOOTSTRAP_USER
// (NAME:PASSWORD) creates a first user when the credential store is
// empty.
func (s *serveSecurity) opts() ([]broker.Opt, error) {
	var opts []broker.Opt
	if s.listeners != "" {
		ls, err := broker.ParseListeners(s.listeners, s.advertised)
		if err != nil {
			return nil, usagef("serve: --%w", err)
		}
		opts = append(opts, broker.Listeners(ls...))
	} else if s.advertised != "" {
		return nil, usagef("serve: --advertised-listeners needs --listeners (or use --advertise)")
	}
	if s.tlsCert != "" || s.tlsKey != "" || s.tlsCA != "" {
		if s.tlsCert == "" || s.tlsKey == "" {
			return nil, usagef("serve: --tls-cert and --tls-key go together")
		}
		opts = append(opts, broker.TLSFiles(s.tlsCert, s.tlsKey, s.tlsCA))
	}
	if s.saslMechanisms != "" {
		var ms []string
		for _, m := range strings.Split(s.saslMechanisms, ",") {
			ms = append(ms, strings.ToUpper(strings.TrimSpace(m)))
		}
		opts = append(opts, broker.SASLMechanisms(ms...))
	}
	opts = append(opts, broker.Authorization(s.authorization), broker.AllowEveryoneIfNoACL(s.allowAll))
	if s.superUsers != "" {
		var us []string
		for _, u := range strings.Split(s.superUsers, ",") {
			if u = strings.TrimSpace(u); u != "" {
				us = append(us, u)
			}
		}
		opts = append(opts, broker.SuperUsers(us...))
	}
	if v, ok := os.LookupEnv("SLUICE_BOOTSTRAP_USER"); ok {
		user, pw, found := strings.Cut(v, ":")
		if !found || user == "" || pw == "" {
			return nil, usagef("serve: SLUICE_BOOTSTRAP_USER must be NAME:PASSWORD")
		}
		opts = append(opts, broker.BootstrapUser(user, pw))
	}
	return opts, nil
}

// reloadOnHUP reloads the TLS certificates on each SIGHUP until stop is
// called. Open connections are kept.
func reloadOnHUP(b *broker.Broker, s *serveSecurity, logger *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-hup:
				if s.tlsCert == "" {
					logger.Info("SIGHUP: no TLS certificate to reload")
					continue
				}
				if err := b.ReloadTLS(); err != nil {
					logger.Error("SIGHUP: reloading TLS certificates failed; keeping the old ones", "err", err)
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		<-exited
	}
}
