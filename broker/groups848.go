package broker

// Consumer groups (KIP-848): the broker's settings for them and the
// topic view the group coordinator resolves subscriptions against.

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/groups"
)

// ConsumerGroupSettings are the broker's settings for consumer groups
// (KIP-848), named after Kafka's; zero values take Kafka's defaults.
type ConsumerGroupSettings struct {
	// SessionTimeout: group.consumer.session.timeout.ms (45 s), within
	// MinSessionTimeout and MaxSessionTimeout
	// (group.consumer.min.session.timeout.ms 45 s,
	// group.consumer.max.session.timeout.ms 60 s).
	SessionTimeout    time.Duration
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// HeartbeatInterval: group.consumer.heartbeat.interval.ms (5 s),
	// within MinHeartbeatInterval and MaxHeartbeatInterval
	// (group.consumer.min/max.heartbeat.interval.ms, 5 s and 15 s), and
	// shorter than the session timeout.
	HeartbeatInterval    time.Duration
	MinHeartbeatInterval time.Duration
	MaxHeartbeatInterval time.Duration
	// Assignors: group.consumer.assignors ("uniform", "range"; the first
	// is the default).
	Assignors []string
	// MaxSize: group.consumer.max.size (unbounded).
	MaxSize int
	// MigrationPolicy: group.consumer.migration.policy, whether groups
	// with members convert between the classic and the consumer protocol:
	// "bidirectional" (the default), "upgrade", "downgrade" or "disabled".
	MigrationPolicy string
}

// ConsumerGroups sets the consumer-group settings; Start rejects values
// outside their bounds.
func ConsumerGroups(s ConsumerGroupSettings) Opt {
	return opt(func(c *cfg) { c.consumerGroups = s })
}

// Validate checks the settings as Start does: each value within its
// bounds (Kafka's when not set), the heartbeat interval shorter than the
// session timeout, the assignors known.
func (s ConsumerGroupSettings) Validate() error {
	_, err := s.groupsConfig().Resolved()
	return err
}

func (s ConsumerGroupSettings) groupsConfig() groups.ConsumerConfig {
	return groups.ConsumerConfig{
		SessionTimeout: s.SessionTimeout, MinSessionTimeout: s.MinSessionTimeout, MaxSessionTimeout: s.MaxSessionTimeout,
		HeartbeatInterval: s.HeartbeatInterval, MinHeartbeatInterval: s.MinHeartbeatInterval, MaxHeartbeatInterval: s.MaxHeartbeatInterval,
		Assignors: s.Assignors, MaxSize: s.MaxSize, MigrationPolicy: s.MigrationPolicy,
	}
}

// consumerGroupsConfig is the coordinator's consumer-group settings,
// with each group's own timeouts from its group configs.
func (b *Broker) consumerGroupsConfig() groups.ConsumerConfig {
	c := b.cfg.consumerGroups.groupsConfig()
	c.GroupTimeouts = b.groupTimeouts
	return c
}

// consumerStaticConfigs are the consumer-group settings as read-only
// broker configs (DescribeConfigs on broker 0), set when an option gave
// them.
func (b *Broker) consumerStaticConfigs() map[string]staticConfig {
	r := b.consumerSettings()
	c := b.cfg.consumerGroups
	ms := func(v, given time.Duration) staticConfig {
		return staticConfig{value: msString(v), set: given != 0, typ: kmsg.ConfigTypeInt}
	}
	size := strconv.Itoa(math.MaxInt32)
	if r.MaxSize > 0 {
		size = strconv.Itoa(r.MaxSize)
	}
	return map[string]staticConfig{
		"group.consumer.session.timeout.ms":        ms(r.SessionTimeout, c.SessionTimeout),
		"group.consumer.min.session.timeout.ms":    ms(r.MinSessionTimeout, c.MinSessionTimeout),
		"group.consumer.max.session.timeout.ms":    ms(r.MaxSessionTimeout, c.MaxSessionTimeout),
		"group.consumer.heartbeat.interval.ms":     ms(r.HeartbeatInterval, c.HeartbeatInterval),
		"group.consumer.min.heartbeat.interval.ms": ms(r.MinHeartbeatInterval, c.MinHeartbeatInterval),
		"group.consumer.max.heartbeat.interval.ms": ms(r.MaxHeartbeatInterval, c.MaxHeartbeatInterval),
		"group.consumer.assignors":                 {value: strings.Join(r.Assignors, ","), set: len(c.Assignors) > 0, typ: kmsg.ConfigTypeList},
		"group.consumer.max.size":                  {value: size, set: c.MaxSize > 0, typ: kmsg.ConfigTypeInt},
		"group.consumer.migration.policy":          {value: r.MigrationPolicy, set: c.MigrationPolicy != "", typ: kmsg.ConfigTypeString},
	}
}

// groupTopics is every topic with its id and partition count,
// __consumer_offsets included (a broker-resolved regex matches the
// internal topics Metadata lists, as in Kafka).
func (b *Broker) groupTopics() map[string]groups.TopicInfo {
	ts := b.sortedTopics()
	out := make(map[string]groups.TopicInfo, len(ts))
	for _, t := range ts {
		out[t.name] = groups.TopicInfo{ID: t.id, Partitions: int32(len(t.parts))}
	}
	return out
}
