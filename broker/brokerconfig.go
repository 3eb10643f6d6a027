package broker

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/meta"
)

// KafkaVersion is the Kafka release whose protocol Sluice's API version
// ranges match; DescribeConfigs reports it as inter.broker.protocol.version
// so that consoles (kafka-ui, AKHQ) recognize the broker.
const KafkaVersion = "4.1"

// interBrokerProtocolVersion is KafkaVersion as Kafka spells the setting.
const interBrokerProtocolVersion = KafkaVersion + "-IV0"

// dynamicConfig is the broker configuration set at run time: resource
// "0" (this broker, DYNAMIC_BROKER_CONFIG) and resource "" (the cluster
// default, DYNAMIC_DEFAULT_BROKER_CONFIG). A value is never changed once
// published; AlterConfigs publishes a new one.
type dynamicConfig struct {
	PerBroker      map[string]string `json:"broker,omitempty"`
	ClusterDefault map[string]string `json:"cluster_default,omitempty"`
}

// lookup returns a broker config's dynamic value and its source, or ""
// when it is not set dynamically.
func (d *dynamicConfig) lookup(name string) (string, kmsg.ConfigSource) {
	if v, ok := d.PerBroker[name]; ok {
		return v, kmsg.ConfigSourceDynamicBrokerConfig
	}
	if v, ok := d.ClusterDefault[name]; ok {
		return v, kmsg.ConfigSourceDynamicDefaultBrokerConfig
	}
	return "", 0
}

// brokerOnlyConfigs are dynamic broker configs that are no topic's
// default.
var brokerOnlyConfigs = map[string]configDef{
	"log.cleaner.io.max.bytes.per.second": {def: "1.7976931348623157E308", typ: kmsg.ConfigTypeDouble, check: func(v string, _ *topicConfig) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f > 0) {
			return errCode(kerr.InvalidConfig, "log.cleaner.io.max.bytes.per.second=%q: want a positive number", v)
		}
		return nil
	}, doc: "the most bytes per second the log cleaner reads and writes"},
}

// cleanerRate is the cleaner's byte rate limit in effect (+Inf: none).
func (d *dynamicConfig) cleanerRate() float64 {
	v, _ := d.lookup("log.cleaner.io.max.bytes.per.second")
	if v == "" {
		return math.Inf(1)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return math.Inf(1)
	}
	return f
}

// brokerDynamicDef returns the definition of a dynamic broker config and
// the topic config it is the default of ("" for none).
func brokerDynamicDef(name string) (configDef, string, bool) {
	for topicName, d := range topicConfigs {
		if d.broker == name {
			return d, topicName, true
		}
	}
	d, ok := brokerOnlyConfigs[name]
	return d, "", ok
}

// staticConfig is a read-only broker config and its value.
type staticConfig struct {
	value string
	set   bool // set by an option (STATIC_BROKER_CONFIG) rather than defaulted
	typ   kmsg.ConfigType
}

// staticConfigs lists the read-only broker configs DescribeConfigs
// reports on broker 0.
func (b *Broker) staticConfigs() map[string]staticConfig {
	listener, advertised := b.listenerConfigs()
	windowNum, windowSize := b.cfg.quotaWindow()
	flush := "1"
	if b.cfg.fsync != acceptor.FsyncAlways {
		flush = strconv.FormatInt(math.MaxInt64, 10)
	}
	s := func(v string, typ kmsg.ConfigType) staticConfig { return staticConfig{value: v, typ: typ} }
	set := func(v string, typ kmsg.ConfigType) staticConfig { return staticConfig{value: v, set: true, typ: typ} }
	m := map[string]staticConfig{
		"broker.id":                                s("0", kmsg.ConfigTypeInt),
		"node.id":                                  s("0", kmsg.ConfigTypeInt),
		"process.roles":                            s("broker,controller", kmsg.ConfigTypeList),
		"inter.broker.protocol.version":            s(interBrokerProtocolVersion, kmsg.ConfigTypeString),
		"log.dirs":                                 set(b.cfg.dataDir, kmsg.ConfigTypeString),
		"listeners":                                set(listener, kmsg.ConfigTypeString),
		"advertised.listeners":                     set(advertised, kmsg.ConfigTypeString),
		"num.partitions":                           set(strconv.Itoa(int(b.cfg.defaultPartitions)), kmsg.ConfigTypeInt),
		"auto.create.topics.enable":                set(strconv.FormatBool(b.cfg.autoCreate), kmsg.ConfigTypeBoolean),
		"default.replication.factor":               s("1", kmsg.ConfigTypeInt),
		"min.insync.replicas":                      s("1", kmsg.ConfigTypeInt),
		"offsets.topic.replication.factor":         s("1", kmsg.ConfigTypeShort),
		"transaction.state.log.replication.factor": s("1", kmsg.ConfigTypeShort),
		"transaction.state.log.min.isr":            s("1", kmsg.ConfigTypeInt),
		"unclean.leader.election.enable":           s("false", kmsg.ConfigTypeBoolean),
		"compression.type":                         s("producer", kmsg.ConfigTypeString),
		"log.cleaner.enable":                       s("true", kmsg.ConfigTypeBoolean),
		"log.cleaner.threads":                      s("1", kmsg.ConfigTypeInt),
		"log.flush.interval.messages":              set(flush, kmsg.ConfigTypeLong),
		"socket.request.max.bytes":                 set(strconv.Itoa(int(b.cfg.maxRequestBytes)), kmsg.ConfigTypeInt),
		"connections.max.idle.ms":                  set(strconv.FormatInt(b.cfg.idleTimeout.Milliseconds(), 10), kmsg.ConfigTypeLong),
		"max.connections":                          set(strconv.Itoa(b.cfg.maxConns), kmsg.ConfigTypeInt),
		"queued.max.request.bytes":                 set(strconv.FormatInt(b.cfg.queuedMaxBytes, 10), kmsg.ConfigTypeLong),
		"quota.window.num":                         set(strconv.Itoa(windowNum), kmsg.ConfigTypeInt),
		"quota.window.size.seconds":                set(strconv.Itoa(int(windowSize.Seconds())), kmsg.ConfigTypeInt),
	}
	maps.Copy(m, b.consumerStaticConfigs()) // groups848.go
	return m
}

// dynamic returns the dynamic broker configuration in effect.
func (b *Broker) dynamic() *dynamicConfig {
	if d := b.dyn.Load(); d != nil {
		return d
	}
	return &dynamicConfig{}
}

// loadDynamic reads broker.json (absent: nothing set dynamically). A
// value that no longer checks is an error naming the file.
func (b *Broker) loadDynamic() error {
	name := b.layout.BrokerFile()
	m, err := b.layout.ReadBroker(b.fs)
	d := dynamicConfig(m)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			b.dyn.Store(&dynamicConfig{})
			return nil
		}
		return fmt.Errorf("broker: %w", err)
	}
	for _, m := range []map[string]string{d.PerBroker, d.ClusterDefault} {
		if err := checkDynamic(m); err != nil {
			return fmt.Errorf("broker: %s: %w", name, err)
		}
	}
	b.dyn.Store(&d)
	return nil
}

// checkDynamic validates a set of dynamic broker configs.
func checkDynamic(m map[string]string) error {
	for _, name := range slices.Sorted(mapKeys(m)) {
		d, _, ok := brokerDynamicDef(name)
		if !ok {
			if isStaticConfig(name) {
				return errCode(kerr.InvalidRequest, "broker config %s cannot be changed while the broker runs; set it with the sluice serve flags", name)
			}
			return errCode(kerr.InvalidConfig, "unknown broker config %q; the dynamic ones are: %s", name, strings.Join(dynamicBrokerNames(), ", "))
		}
		var scratch topicConfig
		if err := d.check(m[name], &scratch); err != nil {
			return fmt.Errorf("broker config %s: %w", name, err)
		}
	}
	return nil
}

// isStaticConfig reports whether name is a read-only broker config.
func isStaticConfig(name string) bool {
	_, ok := (&Broker{cfg: defaultCfg()}).staticConfigs()[name]
	return ok
}

// dynamicBrokerNames lists every dynamic broker config, sorted.
func dynamicBrokerNames() []string {
	var out []string
	for _, d := range topicConfigs {
		out = append(out, d.broker)
	}
	for n := range brokerOnlyConfigs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// alterBrokerConfigs changes the dynamic configs of resource ("0" for
// this broker, "" for the cluster default): edit returns the new set from
// the current one. The result is validated, persisted (broker.json,
// fsynced) and applied to every topic that inherits it.
func (b *Broker) alterBrokerConfigs(resource string, edit configEdit, validateOnly bool) error {
	if resource != "" && resource != "0" {
		return errCode(kerr.InvalidRequest, "broker %q does not exist; this broker's id is 0 (or use the cluster default, \"\")", resource)
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.closing.Load() {
		return errCode(kerr.BrokerNotAvailable, "the broker is shutting down")
	}
	cur := b.dynamic()
	next := &dynamicConfig{PerBroker: maps.Clone(cur.PerBroker), ClusterDefault: maps.Clone(cur.ClusterDefault)}
	target := &next.PerBroker
	if resource == "" {
		target = &next.ClusterDefault
	}
	effective := func(name string) string {
		if v, _ := cur.lookup(name); v != "" {
			return v
		}
		if d, _, ok := brokerDynamicDef(name); ok {
			return d.def
		}
		return ""
	}
	m, err := edit(maps.Clone(*target), effective)
	if err != nil {
		return err
	}
	if err := checkDynamic(m); err != nil {
		return err
	}
	if len(m) == 0 {
		m = nil
	}
	*target = m
	if validateOnly {
		return nil
	}
	if err := b.layout.WriteBroker(b.fs, meta.Broker(*next)); err != nil {
		return errCode(kerr.KafkaStorageError, "persist broker configs: %v", err)
	}
	b.dyn.Store(next)
	for _, t := range b.sortedTopics() {
		conf, err := parseTopicConfigWith(t.conf.explicit, next)
		if err != nil {
			// Explicit configs were checked when set; defaults just now.
			return errCode(kerr.InvalidConfig, "topic %s: %v", t.name, err)
		}
		b.publishConfig(t, conf)
	}
	b.cfg.logger.Info("broker configs altered", "resource", resource)
	return nil
}

// alterTopicConfigs changes a topic's explicit configs: edit returns the
// new set from the current one. The result is validated, persisted in
// topic.json (fsynced) and applied to the running partitions.
func (b *Broker) alterTopicConfigs(name string, edit configEdit, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.closing.Load() {
		return errCode(kerr.BrokerNotAvailable, "the broker is shutting down")
	}
	t := b.lookup(name)
	if t == nil {
		return errCode(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	effective := func(n string) string { v, _, _ := t.conf.value(n); return v }
	m, err := edit(maps.Clone(t.conf.explicit), effective)
	if err != nil {
		return err
	}
	conf, err := parseTopicConfigWith(m, b.dynamic())
	if err == nil {
		err = checkHonoured(m)
	}
	if err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	tm := meta.Topic{ID: uuidString(t.id), Partitions: int32(len(t.parts)), Configs: conf.explicit}
	if len(tm.Configs) == 0 {
		tm.Configs = nil
	}
	if err := b.layout.WriteTopic(b.fs, name, tm); err != nil {
		return errCode(kerr.KafkaStorageError, "persist configs of %s: %v", name, err)
	}
	b.publishConfig(t, conf)
	b.cfg.logger.Info("topic configs altered", "topic", name)
	return nil
}

// publishConfig publishes a copy of t with conf and hands the new limits
// to its partitions' logs. The caller holds adminMu.
func (b *Broker) publishConfig(t *topic, conf topicConfig) {
	nt := &topic{name: t.name, id: t.id, conf: conf, parts: t.parts}
	b.mu.Lock()
	if b.topics[t.name] == t {
		b.topics[t.name] = nt
		b.byID[t.id] = nt
	}
	b.mu.Unlock()
	for _, p := range t.parts {
		if err := p.Log().SetConfig(conf.storage()); err != nil {
			b.cfg.logger.Warn("partition config not applied", "topic", t.name, "partition", p.Index(), "err", err)
		}
	}
	if conf.compact && b.cleaner != nil {
		b.cleaner.Wake()
	}
}
