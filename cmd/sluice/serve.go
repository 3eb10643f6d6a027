package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sluice/broker"
	"sluice/internal/acceptor"
)

// serve runs a broker until SIGINT or SIGTERM, then shuts it down
// gracefully: stop accepting, answer in-flight requests, fsync, write
// checkpoints.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	data := fs.String("data", envOr("SLUICE_DATA", broker.DefaultDataDir), "data directory (env SLUICE_DATA)")
	listen := fs.String("listen", envOr("SLUICE_LISTEN", broker.DefaultListenAddr), "address to listen on (env SLUICE_LISTEN)")
	advertise := fs.String("advertise", envOr("SLUICE_ADVERTISE", ""), "address clients are told to connect to; default the listen address (env SLUICE_ADVERTISE)")
	fsync := fs.String("fsync", envOr("SLUICE_FSYNC", "always"), "fsync policy: always (acks=all means fsynced), interval (every second), never (tests only) (env SLUICE_FSYNC)")
	autoCreate := fs.Bool("auto-create", envBool("SLUICE_AUTO_CREATE", true), "create unknown topics on metadata requests (env SLUICE_AUTO_CREATE)")
	partitions := fs.Int("partitions", envInt("SLUICE_PARTITIONS", 1), "partitions of auto-created topics (env SLUICE_PARTITIONS)")
	metrics := fs.String("metrics", envOr("SLUICE_METRICS", ""), "serve Prometheus metrics at http://ADDR/metrics; off when empty (env SLUICE_METRICS)")
	diskLow := fs.Int64("disk-low-watermark", int64(envInt("SLUICE_DISK_LOW_WATERMARK", -1)), "refuse produce (KAFKA_STORAGE_ERROR, disk full) while the data directory's filesystem has fewer free bytes; -1: min(1 GiB, 5%), 0: off (env SLUICE_DISK_LOW_WATERMARK)")
	logLevel := fs.String("log-level", envOr("SLUICE_LOG_LEVEL", "info"), "debug, info, warn or error (env SLUICE_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := envErrors(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	if *partitions < 1 || *partitions > math.MaxInt32 {
		return fmt.Errorf("serve: --partitions %d: want 1 to %d", *partitions, math.MaxInt32)
	}
	var policy acceptor.FsyncPolicy
	switch *fsync {
	case "always":
		policy = acceptor.FsyncAlways
	case "interval":
		policy = acceptor.FsyncInterval
	case "never":
		policy = acceptor.FsyncNever
	default:
		return fmt.Errorf("serve: --fsync %q: want always, interval or never", *fsync)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("serve: --log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	// Signals are caught before the broker starts, so that a SIGTERM
	// arriving as soon as it listens still shuts it down gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []broker.Opt{
		broker.DataDir(*data),
		broker.ListenAddr(*listen),
		broker.AdvertiseAddr(*advertise),
		broker.Fsync(policy),
		broker.AutoCreateTopics(*autoCreate),
		broker.DefaultPartitions(int32(*partitions)),
		broker.Logger(logger),
		broker.Registerer(reg),
	}
	if *diskLow >= 0 {
		opts = append(opts, broker.DiskLowWatermark(*diskLow))
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
	if *metrics != "" {
		ln, err := net.Listen("tcp", *metrics)
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
	stop() // a second signal kills the process
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

// envErrs collects environment variables that envBool and envInt could
// not parse, so that serve refuses them instead of ignoring them.
var envErrs []error

func envErrors() error { return errors.Join(envErrs...) }

func envBool(name string, def bool) bool {
	if v, ok := os.LookupEnv(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			envErrs = append(envErrs, fmt.Errorf("%s=%q: want true or false", name, v))
			return def
		}
		return b
	}
	return def
}

func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			envErrs = append(envErrs, fmt.Errorf("%s=%q: want an integer", name, v))
			return def
		}
		return n
	}
	return def
}
