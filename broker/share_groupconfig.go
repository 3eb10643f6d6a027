package broker

// Share groups' group configs (KIP-932), as Kafka 4.2's GroupConfig
// has them: a share group's own values of the broker's share settings
// (the sluice serve --share-* flags, which give the defaults).
//
//   - share.session.timeout.ms, share.heartbeat.interval.ms,
//     share.record.lock.duration.ms: milliseconds within Kafka's
//     default bounds for group values (group.share.min.* and
//     group.share.max.*), widened to include the broker's own value;
//     the heartbeat interval shorter than the session timeout.
//   - share.auto.offset.reset: latest, earliest or by_duration:PnDTnHnMnS;
//     share.isolation.level: read_uncommitted or read_committed.
//
// The share coordinator asks for a group's values on every use
// (shareGroupSettings), so a change applies without a restart, where
// Kafka applies it: the session timeout and heartbeat interval from
// the member's next heartbeat, the lock duration to the next
// acquisition, the isolation level to the next ShareFetch, and share.auto.offset.reset
// lazily, to the share partitions the group initializes after the
// change (one already read keeps its start offset: move it with
// AlterShareGroupOffsets).
//
// Not served: the group configs that came after Kafka 4.2 (KIP-1240:
// share.delivery.count.limit, share.partition.max.record.locks,
// share.renew.acknowledge.enable); the broker's values apply to every
// share group.

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/share"
)

// shareSettings are the broker's share settings with Kafka's defaults
// filled in (New has checked them).
func (b *Broker) shareSettings() share.Settings {
	s, _ := b.cfg.shareGroups.settings().WithDefaults()
	return s
}

// shareIntConfig is a share group config in milliseconds, bounded by
// Kafka's default bounds widened to the broker's value.
type shareIntConfig struct {
	name, broker, doc string
	lo, hi            int64 // Kafka's default bounds
	loName, hiName    string
	get               func(s share.Settings) int64 // the broker's value
	flagged           func(s ShareGroupSettings) bool
	set               func(s *share.Settings, v int64)
}

var shareIntConfigs = []shareIntConfig{
	{
		name: "share.session.timeout.ms", broker: "group.share.session.timeout.ms",
		doc: "The timeout to detect client failures when using the share group protocol.",
		lo:  45000, hi: 60000, loName: "group.share.min.session.timeout.ms", hiName: "group.share.max.session.timeout.ms",
		get:     func(s share.Settings) int64 { return s.SessionTimeout.Milliseconds() },
		flagged: func(s ShareGroupSettings) bool { return s.SessionTimeout != 0 },
		set:     func(s *share.Settings, v int64) { s.SessionTimeout = time.Duration(v) * time.Millisecond },
	},
	{
		name: "share.heartbeat.interval.ms", broker: "group.share.heartbeat.interval.ms",
		doc: "The heartbeat interval given to the members of a share group.",
		lo:  5000, hi: 15000, loName: "group.share.min.heartbeat.interval.ms", hiName: "group.share.max.heartbeat.interval.ms",
		get:     func(s share.Settings) int64 { return s.HeartbeatInterval.Milliseconds() },
		flagged: func(s ShareGroupSettings) bool { return s.HeartbeatInterval != 0 },
		set:     func(s *share.Settings, v int64) { s.HeartbeatInterval = time.Duration(v) * time.Millisecond },
	},
	{
		name: "share.record.lock.duration.ms", broker: "group.share.record.lock.duration.ms",
		doc: "The record acquisition lock duration in milliseconds for share groups.",
		lo:  15000, hi: 60000, loName: "group.share.min.record.lock.duration.ms", hiName: "group.share.max.record.lock.duration.ms",
		get:     func(s share.Settings) int64 { return s.RecordLockDuration.Milliseconds() },
		flagged: func(s ShareGroupSettings) bool { return s.RecordLockDuration != 0 },
		set:     func(s *share.Settings, v int64) { s.RecordLockDuration = time.Duration(v) * time.Millisecond },
	},
}

func init() {
	for _, c := range shareIntConfigs {
		registerGroupConfig(c.name, groupConfigDef{
			typ: kmsg.ConfigTypeInt, doc: c.doc, broker: c.broker,
			def: func(b *Broker) (string, bool) {
				return strconv.FormatInt(c.get(b.shareSettings()), 10), c.flagged(b.cfg.shareGroups)
			},
			check: func(b *Broker, v string, effective func(string) string) error {
				n, err := strconv.ParseInt(v, 10, 32)
				if err != nil {
					return fmt.Errorf("%s %q: want a whole number of milliseconds", c.name, v)
				}
				bv := c.get(b.shareSettings())
				lo, hi := min(c.lo, bv), max(c.hi, bv)
				if n < lo || n > hi {
					why := fmt.Sprintf("%s, %s", c.loName, c.hiName)
					if lo != c.lo || hi != c.hi {
						why += fmt.Sprintf(", widened to the broker's %s %d", c.broker, bv)
					}
					return fmt.Errorf("%s %d is outside [%d, %d] (%s)", c.name, n, lo, hi, why)
				}
				return shareHeartbeatBelowSession(effective)
			},
		})
	}
	registerGroupConfig("share.auto.offset.reset", groupConfigDef{
		typ:    kmsg.ConfigTypeString,
		doc:    "The strategy to initialize the share-partition start offset: earliest, latest, or by_duration:<ISO-8601 duration, PnDTnHnMn.nS> (the first record at most that long ago).",
		broker: "share.auto.offset.reset",
		def: func(b *Broker) (string, bool) {
			v := b.cfg.shareGroups.AutoOffsetReset
			return b.shareSettings().AutoOffsetReset, v != "" && v != "latest"
		},
		check: func(_ *Broker, v string, _ func(string) string) error {
			_, err := share.Settings{AutoOffsetReset: v}.WithDefaults()
			return err
		},
	})
	registerGroupConfig("share.isolation.level", groupConfigDef{
		typ:    kmsg.ConfigTypeString,
		doc:    "How a share group reads records written transactionally: read_committed delivers only committed ones, read_uncommitted every record.",
		broker: "share.isolation.level",
		def: func(b *Broker) (string, bool) {
			v := b.cfg.shareGroups.IsolationLevel
			return b.shareSettings().IsolationLevel, v != "" && v != "read_uncommitted"
		},
		check: func(_ *Broker, v string, _ func(string) string) error {
			_, err := share.Settings{IsolationLevel: v}.WithDefaults()
			return err
		},
	})
}

// shareHeartbeatBelowSession checks that a share group's heartbeat
// interval in effect is shorter than its session timeout.
func shareHeartbeatBelowSession(effective func(string) string) error {
	hb, _ := strconv.ParseInt(effective("share.heartbeat.interval.ms"), 10, 64)
	s, _ := strconv.ParseInt(effective("share.session.timeout.ms"), 10, 64)
	if hb >= s {
		return fmt.Errorf("share.heartbeat.interval.ms %d must be shorter than share.session.timeout.ms %d", hb, s)
	}
	return nil
}

// shareGroupSettings is the share coordinator's GroupSettings: s (the
// broker's) with the configs set on group applied. The values were
// checked when they were set.
func (b *Broker) shareGroupSettings(group string, s share.Settings) share.Settings {
	m := b.groupConfigs(group)
	if len(m) == 0 {
		return s
	}
	for _, c := range shareIntConfigs {
		if v, err := strconv.ParseInt(m[c.name], 10, 64); err == nil {
			c.set(&s, v)
		}
	}
	if v, ok := m["share.auto.offset.reset"]; ok {
		s.AutoOffsetReset = v
	}
	if v, ok := m["share.isolation.level"]; ok {
		s.IsolationLevel = v
	}
	return s
}
