package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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
	logLevel := fs.String("log-level", envOr("SLUICE_LOG_LEVEL", "info"), "debug, info, warn or error (env SLUICE_LOG_LEVEL)")
	hf := httpFlags(fs) // console, metrics, health; log format (serve_http.go)
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
	logger, err := hf.logger(level)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	b, err := broker.New(
		broker.DataDir(*data),
		broker.ListenAddr(*listen),
		broker.AdvertiseAddr(*advertise),
		broker.Fsync(policy),
		broker.AutoCreateTopics(*autoCreate),
		broker.DefaultPartitions(int32(*partitions)),
		broker.Logger(logger),
		broker.Registerer(reg),
		broker.PartitionMetrics(hf.partitionMetrics),
		broker.LogRequests(hf.logRequests),
	)
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		b.Close()
		return err
	}

	con, err := hf.start(b, reg, logger)
	if err != nil {
		b.Close()
		return fmt.Errorf("serve: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	stop() // a second signal kills the process
	logger.Info("shutting down")
	if con != nil {
		con.Close()
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
