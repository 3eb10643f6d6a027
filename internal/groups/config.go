package groups

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// Config sets up a coordinator. Zero values take the defaults noted.
type Config struct {
	FS               vfs.FS
	Dir              string        // directory of the coordinator's internal log
	NodeID           int32         // this broker's node id (the coordinator for every group)
	Host             string        // advertised host, for FindCoordinator
	Port             int32         // advertised port
	OffsetsRetention time.Duration // default 7 days (offsets.retention.minutes)
	Logger           *slog.Logger
	Registerer       prometheus.Registerer
	Now              func() time.Time

	// AfterFunc schedules f to run once after d, like time.AfterFunc; nil
	// uses time.AfterFunc. Tests pass a fake clock's AfterFunc together
	// with its Now. Callbacks may run on any goroutine.
	AfterFunc func(d time.Duration, f func()) Timer

	// MinSessionTimeout and MaxSessionTimeout bound a member's session
	// timeout (group.min.session.timeout.ms, group.max.session.timeout.ms);
	// JoinGroup outside them gets INVALID_SESSION_TIMEOUT. Defaults 1 s
	// (Kafka's is 6 s; a single development broker favours quick tests) and
	// 30 min.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// InitialRebalanceDelay holds the first rebalance of an empty group
	// open this long for more members (group.initial.rebalance.delay.ms).
	// Default 0: a new group rebalances as soon as its members have joined.
	InitialRebalanceDelay time.Duration
	// RetentionCheckInterval is how often expired offsets and empty groups
	// are removed (offsets.retention.check.interval.ms); default 10 min.
	RetentionCheckInterval time.Duration
	// MaxMetadataBytes bounds a committed offset's metadata string
	// (offset.metadata.max.bytes); default 4096.
	MaxMetadataBytes int
	// PartitionExists, if set, says whether a topic partition exists;
	// commits to one that does not get UNKNOWN_TOPIC_OR_PARTITION. nil
	// accepts every partition. It is called with a group's lock held, so
	// it must not call into the Coordinator.
	PartitionExists func(topic string, partition int32) bool
	// NoTransactions makes FindCoordinator for transactional ids answer
	// COORDINATOR_NOT_AVAILABLE (no transaction coordinator runs).
	NoTransactions bool
	// PendingTxnOffset, if set, says whether an unfinished transaction
	// has staged an offset of group for the partition; OffsetFetch with
	// RequireStable then answers UNSTABLE_OFFSET_COMMIT for it. It is
	// called with a group's lock held, so it must not call into the
	// Coordinator.
	PendingTxnOffset func(group, topic string, partition int32) bool
	// CompactMinRecords: the internal log is compacted when it holds more
	// than this many records and more than twice as many as are live.
	// Default 10000.
	CompactMinRecords int
	// Fsync is the internal log's fsync policy. Default
	// acceptor.FsyncAlways: a commit is fsynced before it is acknowledged.
	Fsync acceptor.FsyncPolicy
	// Topics, if set, returns every topic that exists, by name. Consumer
	// groups (KIP-848) resolve their subscriptions against it; nil means
	// no topic exists for them. It is called with no coordinator lock
	// held, and must not call into the Coordinator.
	Topics func() map[string]TopicInfo
	// Consumer configures consumer groups (KIP-848).
	Consumer ConsumerConfig
	// WAL, when set (Fsync acceptor.FsyncAlways), is the shared
	// write-ahead log the internal log's records are made durable
	// through, under the name WALName (see kvlog.ReplayWAL).
	WAL *wal.WAL
}

// WALName names the group coordinator's records in the shared
// write-ahead log (kvlog.WALKey).
const WALName = "groups"

// ConsumerConfig configures consumer groups (KIP-848). Zero values take
// Kafka's defaults, noted.
type ConsumerConfig struct {
	// SessionTimeout is the session timeout of consumer-protocol
	// members (group.consumer.session.timeout.ms), default 45 s, within
	// MinSessionTimeout and MaxSessionTimeout
	// (group.consumer.min/max.session.timeout.ms, defaults 45 s and 60 s).
	SessionTimeout    time.Duration
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// HeartbeatInterval is the heartbeat interval the coordinator
	// gives consumer-protocol members (group.consumer.heartbeat.interval.ms),
	// default 5 s, within MinHeartbeatInterval and
	// MaxHeartbeatInterval (defaults 5 s and 15 s), and shorter
	// than the session timeout.
	HeartbeatInterval    time.Duration
	MinHeartbeatInterval time.Duration
	MaxHeartbeatInterval time.Duration
	// Assignors are the server-side assignors consumer groups may
	// ask for (group.consumer.assignors), the first the default; default
	// uniform, range.
	Assignors []string
	// MaxSize bounds a consumer group's members
	// (group.consumer.max.size); default unbounded.
	MaxSize int
	// GroupTimeouts, if set, returns a group's own session timeout and
	// heartbeat interval (the group configs consumer.session.timeout.ms
	// and consumer.heartbeat.interval.ms); a zero value takes
	// SessionTimeout or HeartbeatInterval. It is called with a group's
	// lock held, so it must not call into the Coordinator.
	GroupTimeouts func(group string) (session, heartbeat time.Duration)
	// MigrationPolicy says whether groups convert between the classic and
	// the consumer protocol while they have members
	// (group.consumer.migration.policy): MigrationBidirectional (the
	// default), MigrationUpgrade, MigrationDowngrade or MigrationDisabled.
	MigrationPolicy string
}

// sessionTimeout is the session timeout of group's consumer-protocol
// members: its group config, else the broker's.
func (c *Coordinator) sessionTimeout(group string) time.Duration {
	if f := c.cfg.Consumer.GroupTimeouts; f != nil {
		if s, _ := f(group); s > 0 {
			return s
		}
	}
	return c.cfg.Consumer.SessionTimeout
}

// heartbeatInterval is the heartbeat interval the coordinator gives
// group's consumer-protocol members: its group config, else the broker's.
func (c *Coordinator) heartbeatInterval(group string) time.Duration {
	if f := c.cfg.Consumer.GroupTimeouts; f != nil {
		if _, h := f(group); h > 0 {
			return h
		}
	}
	return c.cfg.Consumer.HeartbeatInterval
}

// TopicInfo is what consumer groups need of a topic.
type TopicInfo struct {
	ID         [16]byte
	Partitions int32
}

// Timer is a scheduled callback; Stop cancels it if it has not run.
type Timer interface {
	Stop() bool
}

// Defaults for zero Config fields.
const (
	DefaultOffsetsRetention       = 7 * 24 * time.Hour
	DefaultMinSessionTimeout      = time.Second
	DefaultMaxSessionTimeout      = 30 * time.Minute
	DefaultRetentionCheckInterval = 10 * time.Minute
	DefaultMaxMetadataBytes       = 4096
	DefaultCompactMinRecords      = 10000

	DefaultConsumerSessionTimeout       = 45 * time.Second
	DefaultConsumerMinSessionTimeout    = 45 * time.Second
	DefaultConsumerMaxSessionTimeout    = 60 * time.Second
	DefaultConsumerHeartbeatInterval    = 5 * time.Second
	DefaultConsumerMinHeartbeatInterval = 5 * time.Second
	DefaultConsumerMaxHeartbeatInterval = 15 * time.Second
)

func (c Config) withDefaults() (Config, error) {
	if c.FS == nil {
		return c, errors.New("groups: Config.FS is nil")
	}
	if c.Dir == "" {
		return c, errors.New("groups: Config.Dir is empty")
	}
	if c.OffsetsRetention == 0 {
		c.OffsetsRetention = DefaultOffsetsRetention
	}
	if c.OffsetsRetention < 0 {
		return c, fmt.Errorf("groups: OffsetsRetention %v is negative", c.OffsetsRetention)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.AfterFunc == nil {
		c.AfterFunc = func(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
	}
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if c.MinSessionTimeout > c.MaxSessionTimeout {
		return c, fmt.Errorf("groups: MinSessionTimeout %v exceeds MaxSessionTimeout %v", c.MinSessionTimeout, c.MaxSessionTimeout)
	}
	if c.InitialRebalanceDelay < 0 {
		return c, fmt.Errorf("groups: InitialRebalanceDelay %v is negative", c.InitialRebalanceDelay)
	}
	if c.RetentionCheckInterval == 0 {
		c.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if c.RetentionCheckInterval < 0 {
		return c, fmt.Errorf("groups: RetentionCheckInterval %v is negative", c.RetentionCheckInterval)
	}
	if c.MaxMetadataBytes == 0 {
		c.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if c.CompactMinRecords == 0 {
		c.CompactMinRecords = DefaultCompactMinRecords
	}
	return c.consumerDefaults()
}

// consumerDefaults fills and checks the consumer-group settings, with
// Kafka's rules: each value within its bounds, the heartbeat interval
// shorter than the session timeout, assignors known.
func (c Config) consumerDefaults() (Config, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Consumer.MinSessionTimeout, DefaultConsumerMinSessionTimeout)
	def(&c.Consumer.MaxSessionTimeout, DefaultConsumerMaxSessionTimeout)
	def(&c.Consumer.SessionTimeout, DefaultConsumerSessionTimeout)
	def(&c.Consumer.MinHeartbeatInterval, DefaultConsumerMinHeartbeatInterval)
	def(&c.Consumer.MaxHeartbeatInterval, DefaultConsumerMaxHeartbeatInterval)
	def(&c.Consumer.HeartbeatInterval, DefaultConsumerHeartbeatInterval)
	switch {
	case c.Consumer.SessionTimeout < c.Consumer.MinSessionTimeout || c.Consumer.SessionTimeout > c.Consumer.MaxSessionTimeout:
		return c, fmt.Errorf("groups: group.consumer.session.timeout.ms %v is outside [%v, %v] (group.consumer.min/max.session.timeout.ms)", c.Consumer.SessionTimeout, c.Consumer.MinSessionTimeout, c.Consumer.MaxSessionTimeout)
	case c.Consumer.HeartbeatInterval < c.Consumer.MinHeartbeatInterval || c.Consumer.HeartbeatInterval > c.Consumer.MaxHeartbeatInterval:
		return c, fmt.Errorf("groups: group.consumer.heartbeat.interval.ms %v is outside [%v, %v] (group.consumer.min/max.heartbeat.interval.ms)", c.Consumer.HeartbeatInterval, c.Consumer.MinHeartbeatInterval, c.Consumer.MaxHeartbeatInterval)
	case c.Consumer.HeartbeatInterval >= c.Consumer.SessionTimeout:
		return c, fmt.Errorf("groups: group.consumer.heartbeat.interval.ms %v must be shorter than group.consumer.session.timeout.ms %v", c.Consumer.HeartbeatInterval, c.Consumer.SessionTimeout)
	case c.Consumer.MaxSize < 0:
		return c, fmt.Errorf("groups: group.consumer.max.size %d is negative", c.Consumer.MaxSize)
	}
	switch c.Consumer.MigrationPolicy {
	case "":
		c.Consumer.MigrationPolicy = MigrationBidirectional
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
	default:
		return c, fmt.Errorf("groups: group.consumer.migration.policy %q: want bidirectional, upgrade, downgrade or disabled", c.Consumer.MigrationPolicy)
	}
	if len(c.Consumer.Assignors) == 0 {
		c.Consumer.Assignors = []string{AssignorUniform, AssignorRange}
	}
	for _, a := range c.Consumer.Assignors {
		if a != AssignorUniform && a != AssignorRange {
			return c, fmt.Errorf("groups: group.consumer.assignors: unknown assignor %q (known: uniform, range)", a)
		}
	}
	return c, nil
}

// Resolved returns c with its defaults filled in, or the error Open
// gives for it.
func (c ConsumerConfig) Resolved() (ConsumerConfig, error) {
	cfg, err := Config{Consumer: c}.consumerDefaults()
	return cfg.Consumer, err
}
