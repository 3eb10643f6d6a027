package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/vfs"
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
	cleanerInterval   time.Duration
	txnMaxTimeout     time.Duration
	txnSweep          time.Duration
	diskWatermark     int64            // bytes; <0: min(1 GiB, 5%); 0: guard off
	diskInterval      time.Duration    // between free-space checks
	healBackoff       time.Duration    // first wait before a failed partition recovers
	healBackoffMax    time.Duration    // longest wait between its attempts (0: the acceptor's default)
	preallocate       int64            // storage.Config.Preallocate (tests); 0: the default
	wal               bool             // a write-ahead log shared by the partitions (FsyncAlways only)
	walSegmentBytes   int64            // wal.Options.SegmentBytes (tests); 0: the default
	fs                vfs.FS           // the OS filesystem; tests in this package substitute a crash FS
	hangingNow        func() time.Time // ages open transactions (hanging.go); nil: time.Now
	partitionMetrics  bool
	logRequests       bool
	intercept         Interceptor // fault injection (intercept.go); nil: none

	// Security (security.go).
	listeners                    []Listener
	tlsCert, tlsKey, tlsClientCA string
	tlsConfig                    *tls.Config
	saslMechs                    []string
	authorize                    bool
	superUsers                   []string
	allowIfNoACL                 bool
	bootstrapUser                string
	bootstrapPassword            string
	authFailBase                 time.Duration // first failed-authentication delay (tests shorten it)
	snapshotInterval             int64         // bytes a partition accepts between producer-state snapshots (0: only at clean shutdown)

	consumerGroups ConsumerGroupSettings // groups848.go
	shareGroups    ShareGroupSettings    // share.go

	// Client quotas and request-byte bound (quotas.go).
	quotaWindowNum     int           // quota.window.num; 0: quota.DefaultWindowNum
	quotaWindowSize    time.Duration // quota.window.size.seconds; 0: quota.DefaultWindowSize
	queuedMaxBytes     int64         // queued.max.request.bytes; 0: sized from the machine
	requestReadTimeout time.Duration // first byte of a request to its last; 0: DefaultRequestReadTimeout
}

// Defaults.
const (
	DefaultDataDir         = "./sluice-data"
	DefaultListenAddr      = "127.0.0.1:9092"
	DefaultMaxRequestBytes = 100 << 20
	DefaultIdleTimeout     = 10 * time.Minute
	DefaultMaxConnections  = 10000

	DefaultTransactionMaxTimeout    = 15 * time.Minute
	DefaultTransactionSweepInterval = 10 * time.Second
	DefaultDiskCheck                = time.Second
)

func defaultCfg() cfg {
	return cfg{
		dataDir:           DefaultDataDir,
		listenAddr:        DefaultListenAddr,
		fsync:             acceptor.FsyncAlways,
		wal:               true,
		autoCreate:        true,
		defaultPartitions: 1,
		maxRequestBytes:   DefaultMaxRequestBytes,
		idleTimeout:       DefaultIdleTimeout,
		maxConns:          DefaultMaxConnections,
		logger:            slog.New(slog.DiscardHandler),
		txnMaxTimeout:     DefaultTransactionMaxTimeout,
		txnSweep:          DefaultTransactionSweepInterval,
		diskWatermark:     -1,
		diskInterval:      DefaultDiskCheck,
		fs:                vfs.OS(),
		partitionMetrics:  true,
		authFailBase:      authFailBase,
		snapshotInterval:  partition.DefaultSnapshotInterval,
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
	if _, err := c.shareGroups.settings().WithDefaults(); err != nil { // share.go
		return fmt.Errorf("broker: ShareGroups: %w", err)
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
	if c.txnMaxTimeout <= 0 || c.txnSweep <= 0 {
		return fmt.Errorf("broker: TransactionMaxTimeout %v and TransactionSweepInterval %v must be positive", c.txnMaxTimeout, c.txnSweep)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.diskInterval <= 0 {
		return fmt.Errorf("broker: DiskCheckInterval %v must be positive", c.diskInterval)
	}
	if _, err := c.consumerGroups.groupsConfig().Resolved(); err != nil {
		return fmt.Errorf("broker: ConsumerGroups: %w", err)
	}
	if err := c.validateQuotaCfg(); err != nil {
		return err
	}
	return c.validateSecurity()
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
// FsyncAlways: an acks=all reply means the records were fsynced (Kafka's
// log.flush.interval.messages=1).
func Fsync(p FsyncPolicy) Opt { return opt(func(c *cfg) { c.fsync = p.acceptorPolicy() }) }

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

// IdleTimeout closes connections that send nothing for this long (at
// most an eighth longer: the deadline is not moved at every request), and
// bounds how long a response may wait for a client that does not read.
// Default 10 minutes (connections.max.idle.ms).
func IdleTimeout(d time.Duration) Opt { return opt(func(c *cfg) { c.idleTimeout = d }) }

// MaxConnections bounds the number of open client connections; further
// connections are closed as soon as they are accepted. Default 10000
// (max.connections).
func MaxConnections(n int) Opt { return opt(func(c *cfg) { c.maxConns = n }) }

// Logger sets the structured logger. Default: discard.
func Logger(l *slog.Logger) Opt { return opt(func(c *cfg) { c.logger = l }) }

// CleanerInterval sets how long the log cleaner waits between looks for
// a compacted partition to clean when none qualified. Default 15s
// (log.cleaner.backoff.ms).
func CleanerInterval(d time.Duration) Opt { return opt(func(c *cfg) { c.cleanerInterval = d }) }

// Registerer registers the broker's Prometheus metrics (and those of its
// acceptors and group coordinator). Default: none.
func Registerer(r prometheus.Registerer) Opt { return opt(func(c *cfg) { c.registerer = r }) }

// maxConcurrentSyncs bounds the fsyncs the broker's partitions run at once
// (see acceptor.Config.Syncs). On the disks measured, a few dozen in
// flight complete as many per second as thousands, while every blocked
// fdatasync holds an OS thread (docs/architecture.md, "Many partitions").
const maxConcurrentSyncs = 32

// TransactionMaxTimeout bounds the transaction timeout a transactional
// producer may ask for; InitProducerId beyond it gets
// INVALID_TRANSACTION_TIMEOUT. Default 15 minutes
// (transaction.max.timeout.ms).
func TransactionMaxTimeout(d time.Duration) Opt { return opt(func(c *cfg) { c.txnMaxTimeout = d }) }

// TransactionSweepInterval sets how often transactions past their timeout
// are aborted (their producer fenced by an epoch bump). Default 10 s
// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
func TransactionSweepInterval(d time.Duration) Opt { return opt(func(c *cfg) { c.txnSweep = d }) }

// DiskLowWatermark sets the free space (bytes) on the data directory's
// filesystem below which produce is refused with KAFKA_STORAGE_ERROR
// ("disk full"), before the disk is actually full. 0 turns the guard
// off. Default: 1 GiB or 5% of the filesystem, whichever is smaller.
func DiskLowWatermark(bytes int64) Opt {
	return opt(func(c *cfg) { c.diskWatermark = max(bytes, 0) })
}

// DiskCheckInterval sets how often the free space is read (statfs).
// Default 1 s.
func DiskCheckInterval(d time.Duration) Opt { return opt(func(c *cfg) { c.diskInterval = d }) }

// withSnapshotInterval sets how many bytes a partition accepts between
// producer-state snapshots (tests: small ones; 0 turns periodic
// snapshots off). Default snapshotInterval.
func withSnapshotInterval(n int64) Opt { return opt(func(c *cfg) { c.snapshotInterval = n }) }

// withHangingClock substitutes the clock hanging transactions are aged
// by (hanging.go; tests: a clock they advance). Default time.Now.
func withHangingClock(now func() time.Time) Opt { return opt(func(c *cfg) { c.hangingNow = now }) }

// withFS substitutes the filesystem (tests: the crash FS).
func withFS(fs vfs.FS) Opt { return opt(func(c *cfg) { c.fs = fs }) }

// withPreallocate sets how far partitions write zeros ahead of their
// data (storage.Config.Preallocate; tests: -1 turns it off, so that a
// partition's files change only when it is written).
func withPreallocate(n int64) Opt { return opt(func(c *cfg) { c.preallocate = n }) }

// WAL turns the write-ahead log shared by every partition on or off.
// Default on; it only applies under FsyncAlways. With it, a
// group commit of small appends to many partitions costs one fdatasync
// of the WAL instead of one per partition; each partition's segment file
// is fsynced in the background. Off, every partition fsyncs its own
// segment. A WAL left by an earlier run is replayed at start either way.
func WAL(on bool) Opt { return opt(func(c *cfg) { c.wal = on }) }

// withWALSegmentBytes sets the WAL's segment size (tests).
func withWALSegmentBytes(n int64) Opt { return opt(func(c *cfg) { c.walSegmentBytes = n }) }

// withHealBackoff sets the wait before each attempt of a failed
// partition to recover, without backing off (tests: a test frees the
// disk at any moment and then waits for the heal, however many attempts
// failed before). Default acceptor.DefaultHealBackoff, doubling up to
// acceptor.DefaultHealBackoffMax.
func withHealBackoff(d time.Duration) Opt {
	return opt(func(c *cfg) { c.healBackoff, c.healBackoffMax = d, d })
}

// PartitionMetrics sets whether the Registerer gets per-partition series
// (traffic, offsets, size and segments per partition, group lag per
// partition). Default true. Off, the series count grows with topics and
// groups only; per-topic and per-group series stay.
func PartitionMetrics(on bool) Opt { return opt(func(c *cfg) { c.partitionMetrics = on }) }

// LogRequests logs every answered request (API, version, client, time
// taken) at debug level. Default false: they are many.
func LogRequests(on bool) Opt { return opt(func(c *cfg) { c.logRequests = on }) }
