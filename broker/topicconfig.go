package broker

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"sluice/internal/storage"
)

// topicConfig is a topic's configuration: the values set explicitly at
// creation and the parsed values in effect.
type topicConfig struct {
	explicit        map[string]string
	retentionMs     int64
	retentionBytes  int64
	segmentBytes    int64
	segmentMs       int64
	maxMessageBytes int32
}

// configDef describes one supported topic config.
type configDef struct {
	def   string
	check func(v string, c *topicConfig) error
}

// Topic configs Sluice applies. Others are rejected with INVALID_CONFIG,
// except the ones in ignoredConfigs.
var topicConfigs = map[string]configDef{
	"cleanup.policy": {"delete", func(v string, _ *topicConfig) error {
		if v == "delete" {
			return nil
		}
		if strings.Contains(v, "compact") {
			return errCode(kerr.InvalidConfig, "cleanup.policy=%s: log compaction is not supported yet; use cleanup.policy=delete", v)
		}
		return errCode(kerr.InvalidConfig, "cleanup.policy=%q: the only supported policy is delete", v)
	}},
	"retention.ms": {strconv.FormatInt(storage.DefaultRetentionAge.Milliseconds(), 10), func(v string, c *topicConfig) (err error) {
		c.retentionMs, err = parseInt(v, "retention.ms", -1, 1<<62)
		return err
	}},
	"retention.bytes": {"-1", func(v string, c *topicConfig) (err error) {
		c.retentionBytes, err = parseInt(v, "retention.bytes", -1, 1<<62)
		return err
	}},
	"segment.bytes": {strconv.Itoa(storage.DefaultSegmentBytes), func(v string, c *topicConfig) (err error) {
		c.segmentBytes, err = parseInt(v, "segment.bytes", 1024, 1<<32-1)
		return err
	}},
	"segment.ms": {strconv.FormatInt(storage.DefaultSegmentAge.Milliseconds(), 10), func(v string, c *topicConfig) (err error) {
		c.segmentMs, err = parseInt(v, "segment.ms", 1, 1<<62)
		return err
	}},
	"max.message.bytes": {"1048588", func(v string, c *topicConfig) error {
		n, err := parseInt(v, "max.message.bytes", 0, 1<<31-1)
		c.maxMessageBytes = int32(n)
		return err
	}},
}

// ignoredConfigs are accepted (clients and tools send them) and stored,
// but have no effect on a single-node broker.
var ignoredConfigs = map[string]bool{
	"min.insync.replicas":            true,
	"unclean.leader.election.enable": true,
	"message.downconversion.enable":  true,
	"compression.type":               true, // batches are stored as produced
}

func parseInt(v, name string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errCode(kerr.InvalidConfig, "%s=%q: want an integer from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// parseTopicConfig checks explicit configs and returns the configuration
// in effect. Errors carry INVALID_CONFIG.
func parseTopicConfig(explicit map[string]string) (topicConfig, error) {
	c := topicConfig{explicit: map[string]string{}}
	for name, d := range topicConfigs {
		if err := d.check(d.def, &c); err != nil {
			panic("broker: bad default for " + name)
		}
	}
	for _, name := range slices.Sorted(mapKeys(explicit)) {
		v := explicit[name]
		if d, ok := topicConfigs[name]; ok {
			if err := d.check(v, &c); err != nil {
				return c, err
			}
		} else if !ignoredConfigs[name] {
			return c, errCode(kerr.InvalidConfig, "unknown topic config %q; supported: cleanup.policy, retention.ms, retention.bytes, segment.bytes, segment.ms, max.message.bytes", name)
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
func (c *topicConfig) storage() storage.Config {
	sc := storage.Config{
		SegmentBytes:   c.segmentBytes,
		SegmentAge:     msDuration(c.segmentMs),
		RetentionBytes: c.retentionBytes,
		RetentionAge:   msDuration(c.retentionMs),
	}
	if c.retentionMs < 0 {
		sc.RetentionAge = -1
	}
	return sc
}

// value returns a config's value in effect and whether it was set
// explicitly; ok is false for an unknown name.
func (c *topicConfig) value(name string) (v string, explicit, ok bool) {
	if v, ok := c.explicit[name]; ok {
		return v, true, true
	}
	if d, ok := topicConfigs[name]; ok {
		return d.def, false, true
	}
	return "", false, false
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
