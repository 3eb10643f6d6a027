package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/schemaregistry"
)

// serveSchema holds serve's schema registry flag.
type serveSchema struct {
	addr string
}

func schemaFlags(fs *pflag.FlagSet) *serveSchema {
	s := &serveSchema{}
	fs.StringVar(&s.addr, "schema-registry", schemaregistry.DefaultAddr, "serve a schema registry with Confluent's REST API at http://ADDR/ (https with --tls-cert), its state in the _schemas topic; off when empty")
	return s
}

// start opens the registry and serves it on s.addr; nil when the
// address is empty.
func (s *serveSchema) start(b *broker.Broker, sec *serveSecurity, reg prometheus.Registerer, logger *slog.Logger) (*schemaregistry.Registry, error) {
	if s == nil || s.addr == "" {
		return nil, nil
	}
	cfg := schemaregistry.Config{Broker: b, Logger: logger, Registerer: reg}
	if sec.tlsCert != "" {
		// The broker's certificates, reloaded with them on SIGHUP; with
		// --tls-client-ca a client certificate is required unless SASL
		// users log in with HTTP Basic.
		cfg.TLS = b.HTTPSConfig(!b.SASLEnabled())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := schemaregistry.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	addr, err := r.ListenAndServe(s.addr)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%w (choose another with --schema-registry, or turn it off with --schema-registry '')", err)
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	logger.Info("serving the schema registry", "url", scheme+"://"+addr+"/", "login", b.SASLEnabled(), "acls", b.AuthorizationEnabled())
	if host, _, _ := net.SplitHostPort(addr); !isLoopback(host) && b.SASLEnabled() && cfg.TLS == nil {
		logger.Warn("the schema registry at " + addr + " receives SASL passwords over plain HTTP (Basic authentication): give --tls-cert, or bind a loopback address")
	}
	return r, nil
}
