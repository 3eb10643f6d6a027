package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/internal/acceptor"
)

// Opt configures a Broker. Options are applied in order over the defaults;
// New checks the result once.
type Opt interface{ apply(*cfg) }

type opt func(*cfg)

func (o opt) apply(c *cfg) { o(c) }

// cfg is the broker's configuration after the options are applied.
type cfg struct {
	dataDir           string
	listenAddr        string
	advertiseAddr     string
	fsync             acceptor.FsyncPolicy
	autoCreate        bool
	defaultPartitions int32
	maxRequestBytes   int32
	idleTimeout       time.Duration
	maxConns          int
	logger            *slog.Logger
	registerer        prometheus.Registerer
}

// Defaults.
const (
	DefaultDataDir         = "./sluice-data"
	DefaultListenAddr      = "127.0.0.1:9092"
	DefaultMaxRequestBytes = 100 << 20
	DefaultIdleTimeout     = 10 * time.Minute
	DefaultMaxConnections  = 10000
)

func defaultCfg() cfg {
	return cfg{
		dataDir:           DefaultDataDir,
		listenAddr:        DefaultListenAddr,
		fsync:             acceptor.FsyncAlways,
		autoCreate:        true,
		defaultPartitions: 1,
		maxRequestBytes:   DefaultMaxRequestBytes,
		idleTimeout:       DefaultIdleTimeout,
		maxConns:          DefaultMaxConnections,
		logger:            slog.New(slog.DiscardHandler),
	}
}

func (c *cfg) validate() error {
	if c.dataDir == "" {
		return errors.New("broker: DataDir is empty")
	}
	if _, _, err := net.SplitHostPort(c.listenAddr); err != nil {
		return fmt.Errorf("broker: ListenAddr %q: %w", c.listenAddr, err)
	}
	if c.advertiseAddr != "" {
		if _, _, err := splitHostPort(c.advertiseAddr); err != nil {
			return fmt.Errorf("broker: AdvertiseAddr %q: %w", c.advertiseAddr, err)
		}
	}
	if c.fsync < acceptor.FsyncAlways || c.fsync > acceptor.FsyncNever {
		return fmt.Errorf("broker: unknown fsync policy %d", c.fsync)
	}
	if c.defaultPartitions < 1 {
		return fmt.Errorf("broker: DefaultPartitions %d must be at least 1", c.defaultPartitions)
	}
	if c.maxRequestBytes < 1024 {
		return fmt.Errorf("broker: MaxRequestBytes %d must be at least 1024", c.maxRequestBytes)
	}
	if c.idleTimeout <= 0 {
		return fmt.Errorf("broker: IdleTimeout %v must be positive", c.idleTimeout)
	}
	if c.maxConns < 1 {
		return fmt.Errorf("broker: MaxConnections %d must be at least 1", c.maxConns)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// DataDir sets the directory holding every topic, partition log and the
// broker's own metadata. Default "./sluice-data" (Kafka's log.dirs).
func DataDir(dir string) Opt { return opt(func(c *cfg) { c.dataDir = dir }) }

// ListenAddr sets the TCP address to listen on. Default "127.0.0.1:9092"
// (Kafka's listeners); use "127.0.0.1:0" for a random port in tests.
func ListenAddr(addr string) Opt { return opt(func(c *cfg) { c.listenAddr = addr }) }

// AdvertiseAddr sets the host:port clients are told to connect to in
// Metadata, FindCoordinator and DescribeCluster. Default: the listener's
// actual address (Kafka's advertised.listeners).
func AdvertiseAddr(addr string) Opt { return opt(func(c *cfg) { c.advertiseAddr = addr }) }

// Fsync sets when appended records are made durable. Default
// acceptor.FsyncAlways: an acks=all reply means the records were fsynced
// (Kafka's log.flush.interval.messages=1).
func Fsync(p acceptor.FsyncPolicy) Opt { return opt(func(c *cfg) { c.fsync = p }) }

// AutoCreateTopics sets whether Metadata and Produce for an unknown topic
// create it with DefaultPartitions partitions. Default true
// (auto.create.topics.enable).
func AutoCreateTopics(on bool) Opt { return opt(func(c *cfg) { c.autoCreate = on }) }

// DefaultPartitions sets the partition count of auto-created topics and of
// CreateTopics requests asking for -1. Default 1 (num.partitions).
func DefaultPartitions(n int32) Opt { return opt(func(c *cfg) { c.defaultPartitions = n }) }

// MaxRequestBytes bounds the size of one request; a client sending a
// larger one is disconnected. Default 100 MiB (socket.request.max.bytes).
func MaxRequestBytes(n int32) Opt { return opt(func(c *cfg) { c.maxRequestBytes = n }) }

// IdleTimeout closes connections that send nothing for this long.
// Default 10 minutes (connections.max.idle.ms).
func IdleTimeout(d time.Duration) Opt { return opt(func(c *cfg) { c.idleTimeout = d }) }

// MaxConnections bounds the number of open client connections; further
// connections are closed as soon as they are accepted. Default 10000
// (max.connections).
func MaxConnections(n int) Opt { return opt(func(c *cfg) { c.maxConns = n }) }

// Logger sets the structured logger. Default: discard.
func Logger(l *slog.Logger) Opt { return opt(func(c *cfg) { c.logger = l }) }

// Registerer registers the broker's Prometheus metrics (and those of its
// acceptors and group coordinator). Default: none.
func Registerer(r prometheus.Registerer) Opt { return opt(func(c *cfg) { c.registerer = r }) }

// maxConcurrentSyncs bounds the fsyncs the broker's partitions run at once
// (see acceptor.Config.Syncs). On the disks measured, a few dozen in
// flight complete as many per second as thousands, while every blocked
// fdatasync holds an OS thread (docs/architecture.md, "Many partitions").
const maxConcurrentSyncs = 32
