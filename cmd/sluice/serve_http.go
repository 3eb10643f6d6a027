package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/console"
	"github.com/sluicedb/sluice/internal/schemaregistry"
)

// serveHTTP holds serve's flags for the HTTP server (console, metrics,
// health) and for logging.
type serveHTTP struct {
	addr             string
	admin            bool
	partitionMetrics bool
	logFormat        string
	logRequests      bool
}

func httpFlags(fs *pflag.FlagSet) *serveHTTP {
	h := &serveHTTP{}
	fs.StringVar(&h.addr, "http", console.DefaultAddr, "serve the web console, /metrics, /healthz and /readyz at http://ADDR/; off when empty")
	fs.BoolVar(&h.admin, "http-admin", false, "let the console create and delete topics and reset group offsets")
	fs.BoolVar(&h.partitionMetrics, "partition-metrics", true, "export per-partition metric series (off: per topic only)")
	choiceVar(fs, &h.logFormat, "log-format", "text", "want text or json", "text or json", oneOf("text", "json"))
	fs.BoolVar(&h.logRequests, "log-requests", false, "log every Kafka request at debug level (with --log-level debug)")
	return h
}

// logger returns the process logger, on stderr.
func (h *serveHTTP) logger(level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch h.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", h.logFormat)
}

// start serves the console on h.addr; nil when the address is empty.
// With sr (nil when off) it shows the schema registry.
func (h *serveHTTP) start(b *broker.Broker, reg *prometheus.Registry, logger *slog.Logger, sr *schemaregistry.Registry) (*console.Server, error) {
	if h.addr == "" {
		return nil, nil
	}
	con, err := console.New(console.Config{Broker: b, Gatherer: reg, Admin: h.admin, Logger: logger, Schemas: sr})
	if err != nil {
		return nil, err
	}
	addr, err := con.ListenAndServe(h.addr)
	if err != nil {
		con.Close()
		return nil, fmt.Errorf("%w (choose another with --http, or turn it off with --http '')", err)
	}
	logger.Info("serving the console, metrics and health checks", "url", "http://"+addr+"/", "admin", h.admin, "login", b.SASLEnabled(), "acls", b.AuthorizationEnabled())
	if host, _, _ := net.SplitHostPort(addr); !isLoopback(host) {
		switch {
		case b.SASLEnabled():
			logger.Warn("the console at " + addr + " receives SASL passwords over plain HTTP (Basic authentication): serve it through a TLS reverse proxy, or bind a loopback address")
		case h.admin:
			logger.Warn("the console's admin actions are open to anyone who reaches " + addr + ": without a SASL listener it has no login; bind a loopback address or put access control in front")
		}
	}
	return con, nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
