package broker

// Group configs: the GROUP config resource (type 32) of Kafka 4.x, a
// group's own values of settings the broker otherwise gives every group.
//
// Behaviour:
//   - DescribeConfigs on a GROUP resource lists every group config with
//     the value in effect: GROUP_CONFIG when set on the group, else the
//     broker's value (STATIC_BROKER_CONFIG when a sluice serve flag set
//     it, DEFAULT_CONFIG otherwise), as the synonym named after the
//     broker config. A group need not exist to have configs, as in Kafka.
//   - IncrementalAlterConfigs (SET, DELETE) and AlterConfigs (replace)
//     change them; unknown names and values outside the broker's bounds
//     get INVALID_CONFIG, APPEND/SUBTRACT INVALID_CONFIG (no group config
//     is a list). The set is written to group-configs.json (fsynced)
//     before the answer and takes effect at each member's next heartbeat.
//   - Authorization: DESCRIBE_CONFIGS / ALTER_CONFIGS on the group, else
//     GROUP_AUTHORIZATION_FAILED.
//
// The configs are a registry (groupConfigDefs) that other group types
// add to with registerGroupConfig; the store keeps any registered name.

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/groups"
	"github.com/sluicedb/sluice/internal/meta"
)

// groupConfigDef describes one group config.
type groupConfigDef struct {
	typ    kmsg.ConfigType
	doc    string
	broker string // the broker config that gives its default
	// def is the broker's value and whether a flag set it.
	def func(b *Broker) (string, bool)
	// check validates v given the group's whole new set (values in
	// effect, defaults included).
	check func(b *Broker, v string, effective func(string) string) error
}

// groupConfigDefs are the group configs by name; filled by
// registerGroupConfig from init functions, read-only after.
var groupConfigDefs = map[string]groupConfigDef{}

// registerGroupConfig adds a group config; a name registered twice
// panics (a programming error).
func registerGroupConfig(name string, d groupConfigDef) {
	if _, dup := groupConfigDefs[name]; dup {
		panic("broker: group config " + name + " registered twice")
	}
	groupConfigDefs[name] = d
}

func init() {
	registerGroupConfig("consumer.session.timeout.ms", groupConfigDef{
		typ:    kmsg.ConfigTypeInt,
		doc:    "The timeout to detect client failures when using the consumer group protocol.",
		broker: "group.consumer.session.timeout.ms",
		def: func(b *Broker) (string, bool) {
			return msString(b.consumerSettings().SessionTimeout), b.cfg.consumerGroups.SessionTimeout != 0
		},
		check: func(b *Broker, v string, effective func(string) string) error {
			s := b.consumerSettings()
			if _, err := msWithin("consumer.session.timeout.ms", v, s.MinSessionTimeout, s.MaxSessionTimeout,
				"group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"); err != nil {
				return err
			}
			return heartbeatBelowSession(effective)
		},
	})
	registerGroupConfig("consumer.heartbeat.interval.ms", groupConfigDef{
		typ:    kmsg.ConfigTypeInt,
		doc:    "The heartbeat interval given to the members of a consumer group.",
		broker: "group.consumer.heartbeat.interval.ms",
		def: func(b *Broker) (string, bool) {
			return msString(b.consumerSettings().HeartbeatInterval), b.cfg.consumerGroups.HeartbeatInterval != 0
		},
		check: func(b *Broker, v string, effective func(string) string) error {
			s := b.consumerSettings()
			if _, err := msWithin("consumer.heartbeat.interval.ms", v, s.MinHeartbeatInterval, s.MaxHeartbeatInterval,
				"group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"); err != nil {
				return err
			}
			return heartbeatBelowSession(effective)
		},
	})
}

// heartbeatBelowSession checks that a group's heartbeat interval in
// effect is shorter than its session timeout.
func heartbeatBelowSession(effective func(string) string) error {
	hb, _ := strconv.ParseInt(effective("consumer.heartbeat.interval.ms"), 10, 64)
	s, _ := strconv.ParseInt(effective("consumer.session.timeout.ms"), 10, 64)
	if hb >= s {
		return fmt.Errorf("consumer.heartbeat.interval.ms %d must be shorter than consumer.session.timeout.ms %d", hb, s)
	}
	return nil
}

func msString(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// msWithin parses v as milliseconds within [lo, hi].
func msWithin(name, v string, lo, hi time.Duration, loName, hiName string) (int64, error) {
	ms, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a whole number of milliseconds", name, v)
	}
	if ms < lo.Milliseconds() || ms > hi.Milliseconds() {
		return 0, fmt.Errorf("%s %d is outside [%d, %d] (%s, %s)", name, ms, lo.Milliseconds(), hi.Milliseconds(), loName, hiName)
	}
	return ms, nil
}

// groupConfigNames lists the group configs, sorted.
func groupConfigNames() []string { return slices.Sorted(maps.Keys(groupConfigDefs)) }

// consumerSettings are the broker's consumer-group settings with their
// defaults filled in (Start has checked them).
func (b *Broker) consumerSettings() groups.ConsumerConfig {
	s, _ := b.cfg.consumerGroups.groupsConfig().Resolved()
	return s
}

// groupConfigs returns the configs set on group (nil for none); the map
// must not be changed.
func (b *Broker) groupConfigs(group string) map[string]string {
	if m := b.groupConfs.Load(); m != nil {
		return (*m)[group]
	}
	return nil
}

// groupConfigValue is the value of a group config in effect for group.
func (b *Broker) groupConfigValue(group, name string) string {
	if v, ok := b.groupConfigs(group)[name]; ok {
		return v
	}
	if d, ok := groupConfigDefs[name]; ok {
		v, _ := d.def(b)
		return v
	}
	return ""
}

// groupTimeouts gives the coordinator a group's own session timeout and
// heartbeat interval (zero when not set on the group).
func (b *Broker) groupTimeouts(group string) (session, heartbeat time.Duration) {
	m := b.groupConfigs(group)
	ms := func(name string) time.Duration {
		v, err := strconv.ParseInt(m[name], 10, 64)
		if err != nil {
			return 0
		}
		return time.Duration(v) * time.Millisecond
	}
	return ms("consumer.session.timeout.ms"), ms("consumer.heartbeat.interval.ms")
}

// loadGroupConfigs reads group-configs.json (absent: none set). A value
// that no longer checks against the broker's bounds is an error naming
// the file and the group.
func (b *Broker) loadGroupConfigs() error {
	m, err := b.layout.ReadGroupConfigs(b.fs)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("broker: %w", err)
	}
	for _, g := range slices.Sorted(maps.Keys(m)) {
		if err := b.checkGroupConfigs(g, m[g]); err != nil {
			return fmt.Errorf("broker: %s: group %s: %v; fix it with IncrementalAlterConfigs, or edit the file while the broker is stopped",
				b.layout.GroupConfigsFile(), g, errMessage(err))
		}
	}
	if m == nil {
		m = meta.GroupConfigs{}
	}
	b.groupConfs.Store(&m)
	return nil
}

// checkGroupConfigs validates a group's whole set of configs.
func (b *Broker) checkGroupConfigs(group string, m map[string]string) error {
	effective := func(name string) string {
		if v, ok := m[name]; ok {
			return v
		}
		d := groupConfigDefs[name]
		if d.def == nil {
			return ""
		}
		v, _ := d.def(b)
		return v
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		d, ok := groupConfigDefs[name]
		if !ok {
			return errCode(kerr.InvalidConfig, "unknown group config %q; the group configs are: %s", name, strings.Join(groupConfigNames(), ", "))
		}
		if err := d.check(b, m[name], effective); err != nil {
			return errCode(kerr.InvalidConfig, "group %s: %v", group, err)
		}
	}
	return nil
}

// alterGroupConfigs changes the configs of group: edit returns the new
// set from the current one. The result is validated and persisted
// (group-configs.json, fsynced) before it takes effect.
func (b *Broker) alterGroupConfigs(group string, edit configEdit, validateOnly bool) error {
	if group == "" {
		return errCode(kerr.InvalidRequest, "a GROUP config resource needs a group id")
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.closing.Load() {
		return errCode(kerr.BrokerNotAvailable, "the broker is shutting down")
	}
	var cur meta.GroupConfigs
	if p := b.groupConfs.Load(); p != nil {
		cur = *p
	}
	m, err := edit(maps.Clone(cur[group]), func(name string) string { return b.groupConfigValue(group, name) })
	if err != nil {
		return err
	}
	for name := range m {
		if _, ok := groupConfigDefs[name]; !ok {
			return errCode(kerr.InvalidConfig, "unknown group config %q; the group configs are: %s", name, strings.Join(groupConfigNames(), ", "))
		}
	}
	if err := b.checkGroupConfigs(group, m); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	next := maps.Clone(cur)
	if next == nil {
		next = meta.GroupConfigs{}
	}
	if len(m) == 0 {
		delete(next, group)
	} else {
		next[group] = m
	}
	if err := b.layout.WriteGroupConfigs(b.fs, next); err != nil {
		return errCode(kerr.KafkaStorageError, "persist group configs: %v", err)
	}
	b.groupConfs.Store(&next)
	b.cfg.logger.Info("group configs altered", "group", group)
	return nil
}

// group lists a GROUP resource's configs.
func (d *describer) group(b *Broker, group string) []kmsg.DescribeConfigsResponseResourceConfig {
	set := b.groupConfigs(group)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, name := range groupConfigNames() {
		if !d.want(name) {
			continue
		}
		def := groupConfigDefs[name]
		var syns []synonym
		if v, ok := set[name]; ok {
			syns = append(syns, synonym{name, v, kmsg.ConfigSourceGroupConfig})
		}
		bv, flagged := def.def(b)
		src := kmsg.ConfigSourceDefaultConfig
		if flagged {
			src = kmsg.ConfigSourceStaticBrokerConfig
		}
		syns = append(syns, synonym{def.broker, bv, src})
		out = append(out, d.entry(name, syns[0].value, def.typ, false, def.doc, syns))
	}
	return out
}

// sortedGroupConfigResources lists the groups with configs set.
func (b *Broker) sortedGroupConfigResources() []string {
	if p := b.groupConfs.Load(); p != nil {
		return slices.Sorted(maps.Keys(*p))
	}
	return nil
}
