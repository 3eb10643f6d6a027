package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/broker"
	"sluice/internal/console"
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

func httpFlags(fs *flag.FlagSet) *serveHTTP {
	h := &serveHTTP{}
	fs.StringVar(&h.addr, "http", envOr("SLUICE_HTTP", console.DefaultAddr), "serve the web console, /metrics, /healthz and /readyz at http://ADDR/; off when empty (env SLUICE_HTTP)")
	fs.BoolVar(&h.admin, "http-admin", envBool("SLUICE_HTTP_ADMIN", false), "let the console create and delete topics and reset group offsets (env SLUICE_HTTP_ADMIN)")
	fs.BoolVar(&h.partitionMetrics, "partition-metrics", envBool("SLUICE_PARTITION_METRICS", true), "export per-partition metric series; off keeps one series set per topic (env SLUICE_PARTITION_METRICS)")
	fs.StringVar(&h.logFormat, "log-format", envOr("SLUICE_LOG_FORMAT", "text"), "text or json (env SLUICE_LOG_FORMAT)")
	fs.BoolVar(&h.logRequests, "log-requests", envBool("SLUICE_LOG_REQUESTS", false), "log every Kafka request at debug level; needs --log-level debug (env SLUICE_LOG_REQUESTS)")
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
func (h *serveHTTP) start(b *broker.Broker, reg *prometheus.Registry, logger *slog.Logger) (*console.Server, error) {
	if h.addr == "" {
		return nil, nil
	}
	con, err := console.New(console.Config{Broker: b, Gatherer: reg, Admin: h.admin, Logger: logger})
	if err != nil {
		return nil, err
	}
	addr, err := con.ListenAndServe(h.addr)
	if err != nil {
		con.Close()
		return nil, fmt.Errorf("%w (choose another with --http, or turn it off with --http '')", err)
	}
	logger.Info("serving the console, metrics and health checks", "url", "http://"+addr+"/", "admin", h.admin)
	return con, nil
}
