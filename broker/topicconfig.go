package broker

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage"
)

// topicConfig is a topic's configuration: the values set explicitly on
// the topic, the broker's dynamic defaults it was resolved against, and
// the parsed values in effect. A topicConfig is never changed once
// built; AlterConfigs builds a new one.
type topicConfig struct {
	explicit map[string]string
	dyn      *dynamicConfig // broker-level dynamic defaults in effect (never nil)

	compact         bool // cleanup.policy holds compact
	delete          bool // cleanup.policy holds delete
	retentionMs     int64
	retentionBytes  int64
	segmentBytes    int64
	segmentMs       int64
	maxMessageBytes int32

	deleteRetentionMs  int64
	minCleanableRatio  float64
	minCompactionLagMs int64
	maxCompactionLagMs int64
}

// configDef describes one topic config Sluice applies.
type configDef struct {
	broker string // the broker config holding the default topics inherit
	def    string // the default when neither the topic nor the broker sets it
	typ    kmsg.ConfigType
	check  func(v string, c *topicConfig) error
	doc    string
}

// Topic configs Sluice applies. Others are rejected with INVALID_CONFIG,
// except the ones in ignoredConfigs.
var topicConfigs = map[string]configDef{
	"cleanup.policy": {"log.cleanup.policy", "delete", kmsg.ConfigTypeList, checkCleanupPolicy,
		"delete: remove old segments by retention.ms/retention.bytes; compact: keep the latest record per key; compact,delete: both"},
	"retention.ms": {"log.retention.ms", strconv.FormatInt(storage.DefaultRetentionAge.Milliseconds(), 10), kmsg.ConfigTypeLong, func(v string, c *topicConfig) (err error) {
		c.retentionMs, err = parseInt(v, "retention.ms", -1, math.MaxInt64)
		return err
	}, "how long a segment is kept after its newest record (-1: forever)"},
	"retention.bytes": {"log.retention.bytes", "-1", kmsg.ConfigTypeLong, func(v string, c *topicConfig) (err error) {
		c.retentionBytes, err = parseInt(v, "retention.bytes", -1, math.MaxInt64)
		return err
	}, "the most bytes a partition keeps (-1: no limit)"},
	"segment.bytes": {"log.segment.bytes", strconv.Itoa(storage.DefaultSegmentBytes), kmsg.ConfigTypeInt, func(v string, c *topicConfig) (err error) {
		c.segmentBytes, err = parseInt(v, "segment.bytes", 1024, math.MaxInt32)
		return err
	}, "size at which a partition's active segment is rolled"},
	"segment.ms": {"log.roll.ms", strconv.FormatInt(storage.DefaultSegmentAge.Milliseconds(), 10), kmsg.ConfigTypeLong, func(v string, c *topicConfig) (err error) {
		c.segmentMs, err = parseInt(v, "segment.ms", 1, math.MaxInt64)
		return err
	}, "age at which a partition's active segment is rolled"},
	"max.message.bytes": {"message.max.bytes", "1048588", kmsg.ConfigTypeInt, func(v string, c *topicConfig) error {
		n, err := parseInt(v, "max.message.bytes", 0, math.MaxInt32)
		c.maxMessageBytes = int32(n)
		return err
	}, "the largest record batch a producer may send"},
	"delete.retention.ms": {"log.cleaner.delete.retention.ms", "86400000", kmsg.ConfigTypeLong, func(v string, c *topicConfig) (err error) {
		c.deleteRetentionMs, err = parseInt(v, "delete.retention.ms", 0, math.MaxInt64)
		return err
	}, "how long a tombstone is kept after compaction reached it"},
	"min.cleanable.dirty.ratio": {"log.cleaner.min.cleanable.ratio", "0.5", kmsg.ConfigTypeDouble, func(v string, c *topicConfig) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1 || math.IsNaN(f) {
			return errCode(kerr.InvalidConfig, "min.cleanable.dirty.ratio=%q: want a number from 0 to 1", v)
		}
		c.minCleanableRatio = f
		return nil
	}, "share of uncompacted bytes that makes a partition eligible for compaction"},
	"min.compaction.lag.ms": {"log.cleaner.min.compaction.lag.ms", "0", kmsg.ConfigTypeLong, func(v string, c *topicConfig) (err error) {
		c.minCompactionLagMs, err = parseInt(v, "min.compaction.lag.ms", 0, math.MaxInt64)
		return err
	}, "records younger than this are never compacted"},
	"max.compaction.lag.ms": {"log.cleaner.max.compaction.lag.ms", strconv.FormatInt(math.MaxInt64, 10), kmsg.ConfigTypeLong, func(v string, c *topicConfig) (err error) {
		c.maxCompactionLagMs, err = parseInt(v, "max.compaction.lag.ms", 1, math.MaxInt64)
		return err
	}, "records older than this are compacted whatever the dirty ratio"},
}

// ignoredConfigs are accepted (clients and tools send them) and stored,
// but have no effect on a single-node broker.
var ignoredConfigs = map[string]bool{
	"min.insync.replicas":            true, // acks=all fails above 1 (topicconfig_kafka41.go)
	"unclean.leader.election.enable": true,
	"message.downconversion.enable":  true,
	"compression.type":               true, // only "producer" (topicconfig_kafka41.go)
}

// checkCleanupPolicy accepts delete, compact, or both (a comma list).
func checkCleanupPolicy(v string, c *topicConfig) error {
	c.compact, c.delete = false, false
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "delete":
			c.delete = true
		case "compact":
			c.compact = true
		default:
			return errCode(kerr.InvalidConfig, "cleanup.policy=%q: want delete, compact or compact,delete", v)
		}
	}
	return nil
}

func parseInt(v, name string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errCode(kerr.InvalidConfig, "%s=%q: want an integer from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// parseTopicConfig checks explicit configs against Kafka's defaults.
func parseTopicConfig(explicit map[string]string) (topicConfig, error) {
	return parseTopicConfigWith(explicit, &dynamicConfig{})
}

// parseTopicConfigWith checks explicit configs and returns the
// configuration in effect, taking defaults from the broker's dynamic
// configuration dyn. Errors carry INVALID_CONFIG.
func parseTopicConfigWith(explicit map[string]string, dyn *dynamicConfig) (topicConfig, error) {
	c := topicConfig{explicit: map[string]string{}, dyn: dyn}
	for name, d := range topicConfigs {
		v, _ := dyn.lookup(d.broker)
		if v == "" {
			v = d.def
		}
		if err := d.check(v, &c); err != nil {
			// The dynamic value was checked when it was set.
			panic("broker: bad default for " + name + ": " + err.Error())
		}
	}
	for _, name := range slices.Sorted(mapKeys(explicit)) {
		v := explicit[name]
		if d, ok := topicConfigs[name]; ok {
			if err := d.check(v, &c); err != nil {
				return c, err
			}
		} else if !ignoredConfigs[name] {
			return c, errCode(kerr.InvalidConfig, "unknown topic config %q; supported: %s", name, strings.Join(slices.Sorted(mapKeys(topicConfigs)), ", "))
		}
		c.explicit[name] = v
	}
	return c, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// storage returns the log configuration for the topic's partitions.
// Retention by age and size applies only with cleanup.policy delete.
func (c *topicConfig) storage() storage.Config {
	sc := storage.Config{
		SegmentBytes:   c.segmentBytes,
		SegmentAge:     msDuration(c.segmentMs),
		RetentionBytes: c.retentionBytes,
		RetentionAge:   msDuration(c.retentionMs),
	}
	if c.retentionMs < 0 || !c.delete {
		sc.RetentionAge = -1
	}
	if !c.delete {
		sc.RetentionBytes = -1
	}
	return sc
}

// value returns a config's value in effect and whether it was set on the
// topic; ok is false for an unknown name.
func (c *topicConfig) value(name string) (v string, explicit, ok bool) {
	v, src, ok := c.resolve(name)
	return v, src == kmsg.ConfigSourceDynamicTopicConfig, ok
}

// resolve returns a config's value in effect and where it comes from.
func (c *topicConfig) resolve(name string) (string, kmsg.ConfigSource, bool) {
	if v, ok := c.explicit[name]; ok {
		return v, kmsg.ConfigSourceDynamicTopicConfig, true
	}
	d, ok := topicConfigs[name]
	if !ok {
		return "", 0, false
	}
	if v, src := c.dyn.lookup(d.broker); v != "" {
		return v, src, true
	}
	return d.def, kmsg.ConfigSourceDefaultConfig, true
}

// names lists every config the topic reports, sorted.
func (c *topicConfig) names() []string {
	seen := map[string]bool{}
	for n := range topicConfigs {
		seen[n] = true
	}
	for n := range c.explicit {
		seen[n] = true
	}
	return slices.Sorted(mapKeys(seen))
}

// msDuration converts a millisecond setting to a storage duration. A
// value too long for a time.Duration (about 292 years) is -1, which
// storage reads as "never", rather than a product that wraps around.
func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}
