package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"sluice/broker"
	"sluice/internal/acceptor"
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
	fs.StringVar(&o.fsync, "fsync", "always", "fsync policy: always (acks=all means fsynced), interval (every second), never (tests only)")
	fs.BoolVar(&o.autoCreate, "auto-create", true, "create unknown topics on metadata requests")
	fs.IntVar(&o.partitions, "partitions", 1, "partitions of auto-created topics")
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics; off when empty")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Int64Var(&o.diskLow, "disk-low-watermark", -1, "refuse produce (KAFKA_STORAGE_ERROR, disk full) while the data directory's filesystem has fewer free bytes; -1: 1 GiB or 5% of it, whichever is smaller; 0: off")
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
	autoCreate              bool
	partitions              int
	metrics                 string
	logLevel                string
	diskLow                 int64
}

// serve runs a broker until ctx is done (SIGINT or SIGTERM), then shuts
// it down gracefully: stop accepting, answer in-flight requests, fsync,
// write checkpoints.
func serve(ctx context.Context, o serveOptions) error {
	if o.partitions < 1 || o.partitions > math.MaxInt32 {
		return usagef("serve: --partitions %d: want 1 to %d", o.partitions, math.MaxInt32)
	}
	var policy acceptor.FsyncPolicy
	switch o.fsync {
	case "always":
		policy = acceptor.FsyncAlways
	case "interval":
		policy = acceptor.FsyncInterval
	case "never":
		policy = acceptor.FsyncNever
	default:
		return usagef("serve: --fsync %q: want always, interval or never", o.fsync)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usagef("serve: --log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []broker.Opt{
		broker.DataDir(o.data),
		broker.ListenAddr(o.listen),
		broker.AdvertiseAddr(o.advertise),
		broker.Fsync(policy),
		broker.AutoCreateTopics(o.autoCreate),
		broker.DefaultPartitions(int32(o.partitions)),
		broker.Logger(logger),
		broker.Registerer(reg),
	}
	if o.diskLow >= 0 {
		opts = append(opts, broker.DiskLowWatermark(o.diskLow))
	}
	b, err := broker.New(opts...)
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		b.Close()
		return err
	}

	var srv *http.Server
	if o.metrics != "" {
		ln, err := net.Listen("tcp", o.metrics)
		if err != nil {
			b.Close()
			return fmt.Errorf("serve: metrics listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics server failed", "err", err)
			}
		}()
		logger.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	}

	<-ctx.Done()
	signal.Reset(os.Interrupt, syscall.SIGTERM) // a second signal kills the process
	logger.Info("shutting down")
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.Shutdown(sctx)
		cancel()
	}
	if err := b.Close(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped cleanly")
	return nil
}
