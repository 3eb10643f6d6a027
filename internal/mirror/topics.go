package mirror

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerSpecific are topic configs that describe the source cluster's
// brokers or replication rather than the data; they are not copied.
var brokerSpecific = map[string]bool{
	"leader.replication.throttled.replicas":   true,
	"follower.replication.throttled.replicas": true,
	"min.insync.replicas":                     true, // depends on the target's replication factor
	"unclean.leader.election.enable":          true,
	"message.format.version":                  true,
	"message.downconversion.enable":           true,
	"preallocate":                             true,
	"local.retention.ms":                      true,
	"local.retention.bytes":                   true,
	"remote.storage.enable":                   true,
}

// brokerSpecificPrefixes are vendor config namespaces (Confluent, Redpanda).
var brokerSpecificPrefixes = []string{"confluent.", "redpanda."}

func isBrokerSpecific(key string) bool {
	if brokerSpecific[key] {
		return true
	}
	for _, p := range brokerSpecificPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// topicPlan is what Run will do to the target's topics.
type topicPlan struct {
	topics  map[string]int32              // source topic -> partitions
	create  map[string]map[string]*string // missing target topic -> configs
	skipped map[string][]string           // per topic, configs not copied

	maxMessageBytes int64 // the largest source max.message.bytes
}

func (p *topicPlan) names() []string {
	return sortedKeys(p.topics)
}

// connect creates the clients and checks that both clusters answer.
func (m *mirror) connect(ctx context.Context) error {
	var err error
	m.src, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(m.cfg.From...), kgo.DialTimeout(m.cfg.Timeout)}, m.cfg.SourceOpts...)...)
	if err != nil {
		return fmt.Errorf("mirror: source client: %w", err)
	}
	m.srcAdm = kadm.NewClient(m.src)
	m.srcAdm.SetTimeoutMillis(int32(m.cfg.Timeout.Milliseconds()))
	m.tgt, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(m.cfg.To...), kgo.DialTimeout(m.cfg.Timeout), targetVersions(), kgo.MetadataMinAge(100 * time.Millisecond)}, m.cfg.TargetOpts...)...)
	if err != nil {
		return fmt.Errorf("mirror: target client: %w", err)
	}
	m.tgtAdm = kadm.NewClient(m.tgt)
	m.tgtAdm.SetTimeoutMillis(int32(m.cfg.Timeout.Milliseconds()))
	src, err := m.ping(ctx, m.srcAdm, "source", m.cfg.From)
	if err != nil {
		return err
	}
	tgt, err := m.ping(ctx, m.tgtAdm, "target", m.cfg.To)
	if err != nil {
		return err
	}
	if src == tgt {
		// Copying a cluster into itself appends every record again.
		return fmt.Errorf("mirror: --from %s and --to %s are the same cluster (%s)", strings.Join(m.cfg.From, ","), strings.Join(m.cfg.To, ","), src)
	}
	return nil
}

// ping checks that a cluster answers and returns who it is: its cluster
// id and its brokers' addresses (two kfake clusters share an id; a copied
// Sluice data directory keeps its id but listens elsewhere).
func (m *mirror) ping(ctx context.Context, adm *kadm.Client, which string, addrs []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return "", fmt.Errorf("mirror: %s %s unreachable: %w", which, strings.Join(addrs, ","), err)
	}
	var hosts []string
	for _, b := range md.Brokers {
		hosts = append(hosts, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	slices.Sort(hosts)
	return fmt.Sprintf("cluster id %q, brokers %s", md.Cluster, strings.Join(hosts, ",")), nil
}

// planTopics lists the source topics, their configs and the target's
// topics, and checks every target topic has enough partitions. It changes
// nothing.
func (m *mirror) planTopics(ctx context.Context) (*topicPlan, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	src, err := m.srcAdm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("mirror: listing source topics: %w", err)
	}
	plan := &topicPlan{topics: map[string]int32{}, create: map[string]map[string]*string{}, skipped: map[string][]string{}}
	for _, td := range src.Sorted() {
		if td.Err != nil || strings.HasPrefix(td.Topic, "__") {
			continue
		}
		if m.cfg.Topics != nil && !m.cfg.Topics.MatchString(td.Topic) {
			continue
		}
		plan.topics[td.Topic] = int32(len(td.Partitions))
	}
	if len(plan.topics) == 0 {
		return nil, errors.New("mirror: no source topic matches --topics")
	}
	names := plan.names()
	tgt, err := m.tgtAdm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("mirror: listing target topics: %w", err)
	}
	var bad []string
	var missing []string
	for _, t := range names {
		td, ok := tgt[t]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) || td.Err != nil && len(td.Partitions) == 0 {
			missing = append(missing, t)
			continue
		}
		if n := int32(len(td.Partitions)); n < plan.topics[t] {
			bad = append(bad, fmt.Sprintf("%s has %d partitions on the target, %d on the source", t, n, plan.topics[t]))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("mirror: target topics with fewer partitions than the source (add partitions with `sluice topic` or kafka-topics --alter, or delete them): %s", strings.Join(bad, "; "))
	}
	rcs, err := m.srcAdm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("mirror: describing source topic configs: %w", err)
	}
	for _, t := range names {
		rc, err := rcs.On(t, nil)
		if err != nil || rc.Err != nil {
			return nil, fmt.Errorf("mirror: describing source topic %s configs: %w", t, errors.Join(err, rc.Err))
		}
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil {
				if n, err := strconv.ParseInt(*c.Value, 10, 32); err == nil && n > plan.maxMessageBytes {
					plan.maxMessageBytes = n
				}
			}
		}
	}
	for _, t := range missing {
		rc, _ := rcs.On(t, nil)
		confs := map[string]*string{}
		for _, c := range rc.Configs {
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig || c.Value == nil {
				continue // a default, not set on the topic
			}
			if isBrokerSpecific(c.Key) {
				plan.skipped[t] = append(plan.skipped[t], c.Key+"="+*c.Value)
				continue
			}
			confs[c.Key] = c.Value
		}
		sort.Strings(plan.skipped[t])
		plan.create[t] = confs
	}
	return plan, nil
}

// applyPlan creates the missing target topics: all are validated first
// (ValidateOnly), so a config the target refuses creates none.
func (m *mirror) applyPlan(ctx context.Context, plan *topicPlan) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	for _, t := range sortedKeys(plan.create) {
		if len(plan.skipped[t]) > 0 {
			m.log.Warn("mirror: topic configs not copied (broker-specific)", "topic", t, "configs", plan.skipped[t])
		}
		rs, err := m.tgtAdm.ValidateCreateTopics(ctx, plan.topics[t], m.cfg.ReplicationFactor, plan.create[t], t)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			return fmt.Errorf("mirror: the target refuses topic %s (%d partitions, replication factor %d, configs %s): %w",
				t, plan.topics[t], m.cfg.ReplicationFactor, fmtConfigs(plan.create[t]), err)
		}
	}
	for _, t := range sortedKeys(plan.create) {
		rs, err := m.tgtAdm.CreateTopics(ctx, plan.topics[t], m.cfg.ReplicationFactor, plan.create[t], t)
		if err == nil {
			err = rs.Error()
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("mirror: creating target topic %s: %w", t, err)
		}
		m.report.Created = append(m.report.Created, t)
	}
	return nil
}

func fmtConfigs(c map[string]*string) string {
	var parts []string
	for _, k := range sortedKeys(c) {
		parts = append(parts, k+"="+*c[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// detectMode picks transactions when every target broker lists the
// transactional APIs.
func (m *mirror) detectMode(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	vs, err := m.tgtAdm.ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("mirror: target ApiVersions: %w", err)
	}
	txn := len(vs) > 0
	var missing []string
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return fmt.Errorf("mirror: target broker %d ApiVersions: %w", v.NodeID, v.Err)
		}
		for _, k := range []kmsg.Key{kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.EndTxn} {
			if _, ok := v.KeyMaxVersion(k.Int16()); !ok {
				txn = false
				missing = append(missing, k.Name())
			}
		}
	}
	m.mode = Transactional
	if !txn {
		m.mode = IdempotentCheckpoint
		m.log.Warn("mirror: the target has no transactions; writing idempotently and committing the copy position after each batch (a restart skips what was written past it)",
			"missing", strings.Join(dedupe(missing), ","))
	}
	return nil
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
