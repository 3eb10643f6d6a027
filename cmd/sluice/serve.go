package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/gcfloor"
)

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a broker",
		Long: `Run a broker until SIGINT or SIGTERM, then shut down gracefully: stop
accepting, answer in-flight requests, fsync, write checkpoints. A second
signal kills the process.

Every flag is also an environment variable (SLUICE_ and the flag name in
capitals, dashes as underscores: --auto-create is SLUICE_AUTO_CREATE) and
a key of the optional YAML config file (--config, env SLUICE_CONFIG) named
like the flag. A flag beats the environment, which beats the file, which
beats the default.`,
		Example: `  sluice serve --data /var/lib/sluice --listen 0.0.0.0:9092 --advertise broker.example:9092
  SLUICE_FSYNC=interval sluice serve
  sluice serve --config sluice.yaml`,
		Args: exactArgs(0, "no arguments"),
	}
	var o serveOptions
	fs := cmd.Flags()
	fs.StringVar(&o.data, "data", broker.DefaultDataDir, "data directory")
	fs.StringVar(&o.listen, "listen", broker.DefaultListenAddr, "address to listen on")
	fs.StringVar(&o.advertise, "advertise", "", "address clients are told to connect to (default the listen address)")
	choiceVar(fs, &o.fsync, "fsync", "always", "want always, interval or never",
		"fsync policy: always (acks=all means fsynced), interval (every second), never (tests only)", oneOf("always", "interval", "never"))
	fs.BoolVar(&o.wal, "wal", true, "with --fsync always, make small writes to many partitions durable with one fsync of a write-ahead log shared by the partitions")
	fs.BoolVar(&o.autoCreate, "auto-create", true, "create unknown topics on metadata requests")
	fs.IntVar(&o.partitions, "partitions", 1, "partitions of auto-created topics")
	choiceVar(fs, &o.logLevel, "log-level", "info", "want debug, info, warn or error", "debug, info, warn or error",
		func(v string) bool { var l slog.Level; return l.UnmarshalText([]byte(v)) == nil })
	fs.DurationVar(&o.txnMaxTimeout, "transaction-max-timeout", broker.DefaultTransactionMaxTimeout, "largest transaction timeout a producer may ask for (transaction.max.timeout.ms)")
	fs.Int64Var(&o.diskLow, "disk-low-watermark", -1, "refuse produce (KAFKA_STORAGE_ERROR, disk full) while the data directory's filesystem has fewer free bytes; -1: 1 GiB or 5% of it, whichever is smaller; 0: off")
	o.http = httpFlags(fs) // console, metrics, health; log format (serve_http.go)
	o.sec.addFlags(fs)
	o.schema = schemaFlags(fs) // schema registry (serve_schema.go)
	o.groups = groupFlags(fs)  // consumer groups, KIP-848 (serve_groups.go)
	o.share = shareFlags(fs)   // share groups (serve_share.go)
	o.limits = limitFlags(fs)  // client quotas, request bytes, idle and slow clients (serve_limits.go)
	fs.String("config", "", "YAML config file whose keys are these flags' names (env SLUICE_CONFIG)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := applyConfig(cmd.Flags()); err != nil {
			return usageError{fmt.Errorf("serve: %w", err)}
		}
		return serve(cmd.Context(), o)
	}
	return cmd
}

// serveOptions holds serve's settings after flags, environment and
// config file are applied.
type serveOptions struct {
	data, listen, advertise string
	fsync                   string
	wal                     bool
	autoCreate              bool
	partitions              int
	logLevel                string
	txnMaxTimeout           time.Duration
	diskLow                 int64
	http                    *serveHTTP
	sec                     serveSecurity
	schema                  *serveSchema
	groups                  *serveGroups
	share                   *broker.ShareGroupSettings
	limits                  *serveLimits
}

// serve runs a broker until ctx is done (SIGINT or SIGTERM), then shuts
// it down gracefully: stop accepting, answer in-flight requests, fsync,
// write checkpoints.
func serve(ctx context.Context, o serveOptions) error {
	if o.partitions < 1 || o.partitions > math.MaxInt32 {
		return usagef("serve: --partitions %d: want 1 to %d", o.partitions, math.MaxInt32)
	}
	policy, err := broker.ParseFsyncPolicy(o.fsync)
	if err != nil {
		return usagef("serve: --fsync %q: want always, interval or never", o.fsync)
	}
	if o.txnMaxTimeout <= 0 {
		return usagef("serve: --transaction-max-timeout %v: want a positive duration", o.txnMaxTimeout)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usagef("serve: --log-level: %w", err)
	}
	logger, err := o.http.logger(level)
	if err != nil {
		return usagef("serve: %w", err)
	}
	slog.SetDefault(logger) // code that logs through slog's default logger writes the same format
	if o.http.logRequests && level > slog.LevelDebug {
		logger.Warn("--log-requests logs each request at debug level: add --log-level debug to see them", "log-level", level.String())
	}

	floor := gcfloor.Start(gcHeapFloor(debug.SetMemoryLimit(-1)), os.Getenv("GOGC"))
	defer floor.Stop()
	// The heap the floor lets grow before a collection is mapped now,
	// before the listener opens, rather than a page fault at a time under
	// the first requests (a fresh broker's first topics and frames).
	floor.Pretouch()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	secOpts, err := o.sec.opts()
	if err != nil {
		return err
	}
	opts := []broker.Opt{
		broker.DataDir(o.data),
		broker.ListenAddr(o.listen),
		broker.AdvertiseAddr(o.advertise),
		broker.Fsync(policy),
		broker.WAL(o.wal),
		broker.AutoCreateTopics(o.autoCreate),
		broker.DefaultPartitions(int32(o.partitions)),
		broker.Logger(logger),
		broker.Registerer(reg),
		broker.TransactionMaxTimeout(o.txnMaxTimeout),
		broker.PartitionMetrics(o.http.partitionMetrics),
		broker.LogRequests(o.http.logRequests),
		broker.ShareGroups(*o.share),
	}
	groupOpt, err := o.groups.opt() // serve_groups.go
	if err != nil {
		return err
	}
	opts = append(opts, groupOpt)
	if o.diskLow >= 0 {
		opts = append(opts, broker.DiskLowWatermark(o.diskLow))
	}
	if err := checkPorts(o.ports()); err != nil { // before the data directory exists or anything logs "listening"
		return err
	}
	limitOpts, err := o.limits.opts()
	if err != nil {
		return err
	}
	opts = append(opts, limitOpts...)
	b, err := broker.New(append(opts, secOpts...)...)
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		b.Close()
		return err
	}

	// The schema registry first: the console shows it.
	sr, err := o.schema.start(b, &o.sec, reg, logger)
	if err != nil {
		b.Close()
		return fmt.Errorf("serve: %w", err)
	}

	con, err := o.http.start(b, reg, logger, sr)
	if err != nil {
		if sr != nil {
			sr.Close()
		}
		b.Close()
		return fmt.Errorf("serve: %w", err)
	}

	stopHUP := reloadOnHUP(b, &o.sec, logger)
	defer stopHUP()
	if err := sdNotify("READY=1\nSTATUS=serving"); err != nil { // Type=notify units (sdnotify.go)
		logger.Warn("systemd readiness", "err", err)
	}
	<-ctx.Done()
	signal.Reset(os.Interrupt, syscall.SIGTERM) // a second signal kills the process
	logger.Info("shutting down")
	if err := sdNotify("STOPPING=1"); err != nil {
		logger.Warn("systemd readiness", "err", err)
	}
	if sr != nil {
		sr.Close()
	}
	if con != nil {
		con.Close()
	}
	if err := b.Close(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped cleanly")
	return nil
}

// gcHeapFloor is the growth of the heap, in bytes, that the broker's
// process allows before a collection however little is live
// (internal/gcfloor): 64 MiB, or a quarter of GOMEMLIMIT when that is
// lower (limit: the memory limit in force, math.MaxInt64 when none).
func gcHeapFloor(limit int64) int64 {
	return min(64<<20, limit/4)
}
