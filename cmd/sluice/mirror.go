package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/clientauth"
	"github.com/sluicedb/sluice/internal/mirror"
)

// newMirrorCmd is `sluice mirror`: copy topics, records and group offsets
// from one cluster to another (internal/mirror does the work).
func newMirrorCmd() *cobra.Command {
	var (
		from, to, topics, groups, name, httpAddr string
		once                                     bool
		rf                                       int16
		interval, timeout                        time.Duration
		fromSec                                  = clientauth.Config{EnvPrefix: "SLUICE_FROM_"}
		toSec                                    = clientauth.Config{EnvPrefix: "SLUICE_TO_"}
	)
	cmd := &cobra.Command{
		Use:   "mirror --from ADDR --to ADDR [--topics REGEX] [--groups REGEX] [--once]",
		Short: "Copy topics, records and consumer-group offsets to another cluster, exactly once",
		Long: `Copy topics, records and consumer-group offsets from one Kafka-compatible
cluster to another: Sluice to Kafka or Redpanda, Kafka to Sluice, Sluice
to Sluice.

Missing target topics are created with the source's partition count and
topic configs (broker-specific configs are skipped and listed); a target
topic with fewer partitions is refused. Every record goes to the same
partition with its key, value, headers and timestamp, in order. Where the
target has transactions, records and the copy position (committed offsets
of the group named by --name on the target) commit in one transaction, so
a killed mirror resumes without gaps or duplicates; otherwise it writes
idempotently and commits the position after each batch, and says so.

Consumer-group offsets are translated to the target offset of the first
record at or after each committed source offset, and written only while
the group has never had members on the target.

Without --once it tails until interrupted (Ctrl-C); with --once it stops
at the source end offsets read at start (the cutover mode).`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return usagef("mirror: --from and --to are required")
			}
			cfg := mirror.Config{
				From: splitAddrs(from), To: splitAddrs(to), Once: once, ReplicationFactor: rf,
				Name: name, Interval: interval, Timeout: timeout,
				Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)),
			}
			var err error
			if cfg.SourceOpts, err = fromSec.Opts(); err != nil {
				return usagef("mirror: source: %w", err)
			}
			if cfg.TargetOpts, err = toSec.Opts(); err != nil {
				return usagef("mirror: target: %w", err)
			}
			if cfg.Topics, err = compileFlag("--topics", topics); err != nil {
				return err
			}
			if cfg.Groups, err = compileFlag("--groups", groups); err != nil {
				return err
			}
			ctx := cmd.Context() // ends on SIGINT or SIGTERM (main)
			if httpAddr != "" {
				reg := prometheus.NewRegistry()
				cfg.Registerer = reg
				shutdown, err := serveMetrics(httpAddr, reg, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer shutdown()
			}
			out := cmd.OutOrStdout()
			cfg.Progress = func(s mirror.Stats) {
				if !s.Final {
					fmt.Fprintln(out, s.ProgressLine())
				}
			}
			rep, err := mirror.Run(ctx, cfg)
			if rep != nil {
				fmt.Fprint(out, rep.String())
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "source seed brokers, comma-separated (required)")
	f.StringVar(&to, "to", "", "target seed brokers, comma-separated (required)")
	f.StringVar(&topics, "topics", "", "regular expression selecting source topics by whole name (default: all but internal __ topics)")
	f.StringVar(&groups, "groups", "", "regular expression selecting source consumer groups by whole name (default: all)")
	f.BoolVar(&once, "once", false, "stop at the source end offsets read at start (cutover mode)")
	f.Int16Var(&rf, "replication-factor", -1, "replication factor of created topics (-1: the target's default)")
	f.StringVar(&name, "name", mirror.DefaultName, "transactional id and target group holding the copy position")
	f.DurationVar(&interval, "interval", 5*time.Second, "progress line and group translation interval")
	f.DurationVar(&timeout, "timeout", 15*time.Second, "timeout of each admin request and first connection")
	f.StringVar(&httpAddr, "http", "", "serve Prometheus metrics at http://ADDR/metrics")
	fromSec.AddPrefixedFlags(f, "from-", "the source")
	toSec.AddPrefixedFlags(f, "to-", "the target")
	return cmd
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func compileFlag(flag, s string) (*regexp.Regexp, error) {
	if s == "" {
		return nil, nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, usagef("mirror: %s %q: %w", flag, s, err)
	}
	return re, nil
}

// serveMetrics serves reg at /metrics on addr until the returned function
// is called.
func serveMetrics(addr string, reg *prometheus.Registry, logTo io.Writer) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mirror: --http %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(logTo, "mirror: metrics server:", err)
		}
	}()
	fmt.Fprintf(logTo, "mirror: metrics at http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}
