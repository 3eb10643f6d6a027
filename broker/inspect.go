package broker

// A read-only view of the broker for monitoring: the console
// (internal/console), the Prometheus collector (collector.go) and Go
// programs that embed a broker. Everything here is a snapshot copied out
// of the broker; nothing returned aliases its state. Kafka clients learn
// the same offsets and configs through Metadata, ListOffsets,
// DescribeConfigs, DescribeGroups and OffsetFetch; sizes, segment counts
// and traffic are only here.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sluicedb/sluice/internal/partition"
)

// Info describes the broker process.
type Info struct {
	Version    string    `json:"version"`
	GoVersion  string    `json:"go_version"`
	ClusterID  string    `json:"cluster_id"`
	NodeID     int32     `json:"node_id"`
	DataDir    string    `json:"data_dir"`
	Addr       string    `json:"addr"` // listen address; empty before Start
	Fsync      string    `json:"fsync"`
	Started    time.Time `json:"started"`
	DiskTotal  uint64    `json:"disk_total_bytes"` // size of the filesystem holding DataDir (0 when unknown)
	DiskFree   uint64    `json:"disk_free_bytes"`  // bytes still available there
	DataBytes  int64     `json:"data_bytes"`       // bytes of every partition log
	Topics     int       `json:"topics"`
	Partitions int       `json:"partitions"`
}

// Info returns a description of the broker and its disk.
func (b *Broker) Info() Info {
	in := Info{
		Version:   Version(),
		GoVersion: GoVersion(),
		ClusterID: b.clusterID(),
		NodeID:    nodeID,
		DataDir:   b.cfg.dataDir,
		Addr:      b.Addr(),
		Fsync:     b.cfg.fsync.String(),
		Started:   b.started,
	}
	if d := b.disk.Load(); d != nil {
		in.DiskTotal, in.DiskFree = d.total, d.free
	}
	for _, t := range b.userTopics() {
		in.Topics++
		for _, p := range t.parts {
			in.Partitions++
			in.DataBytes += p.Log().Size()
		}
	}
	return in
}

// PartitionInfo describes one partition.
type PartitionInfo struct {
	Partition     int32   `json:"partition"`
	StartOffset   int64   `json:"start_offset"`   // first offset still in the log
	HighWatermark int64   `json:"high_watermark"` // end of the durable log: consumers read below it
	SizeBytes     int64   `json:"size_bytes"`
	Segments      int     `json:"segments"`
	Traffic       Traffic `json:"traffic"`
	Error         string  `json:"error,omitempty"` // why the partition refuses appends, if it does
}

// ConfigEntry is one topic config in effect.
type ConfigEntry struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"` // as DescribeConfigs reports it: DYNAMIC_TOPIC_CONFIG or DEFAULT_CONFIG
}

// TopicInfo describes one topic.
type TopicInfo struct {
	Name       string          `json:"name"`
	ID         string          `json:"id"` // hex
	Partitions []PartitionInfo `json:"partitions"`
	Configs    []ConfigEntry   `json:"configs"`
}

// Totals sums the partitions of a topic.
func (t *TopicInfo) Totals() (records, size int64, traffic Traffic) {
	for _, p := range t.Partitions {
		records += p.HighWatermark - p.StartOffset
		size += p.SizeBytes
		traffic.add(p.Traffic)
	}
	return records, size, traffic
}

// Config returns the value of a config in effect, or "".
func (t *TopicInfo) Config(name string) string {
	for _, c := range t.Configs {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// Topics describes every topic, sorted by name, the internal
// __consumer_offsets left out.
func (b *Broker) Topics() []TopicInfo {
	ts := b.userTopics()
	out := make([]TopicInfo, 0, len(ts))
	for _, t := range ts {
		out = append(out, describeTopic(t))
	}
	return out
}

// Topic describes one topic; ok is false when it does not exist.
func (b *Broker) Topic(name string) (info TopicInfo, ok bool) {
	t := b.lookup(name)
	if t == nil {
		return TopicInfo{}, false
	}
	return describeTopic(t), true
}

func describeTopic(t *topic) TopicInfo {
	ti := TopicInfo{Name: t.name, ID: uuidString(t.id), Partitions: make([]PartitionInfo, 0, len(t.parts))}
	for _, p := range t.parts {
		ti.Partitions = append(ti.Partitions, describePartition(p))
	}
	for _, n := range t.conf.names() {
		v, explicit, _ := t.conf.value(n)
		src := "DEFAULT_CONFIG"
		if explicit {
			src = "DYNAMIC_TOPIC_CONFIG"
		}
		ti.Configs = append(ti.Configs, ConfigEntry{Name: n, Value: v, Source: src})
	}
	return ti
}

func describePartition(p *partition.Partition) PartitionInfo {
	pi := PartitionInfo{
		Partition:     p.Index(),
		StartOffset:   p.Log().StartOffset(),
		HighWatermark: p.HighWatermark(),
		SizeBytes:     p.Log().Size(),
		Segments:      p.Log().Segments(),
		Traffic:       trafficOf(p.Traffic()),
	}
	if err := p.Err(); err != nil {
		pi.Error = err.Error()
	}
	return pi
}

// GroupInfo summarizes one consumer group.
type GroupInfo struct {
	ID           string            `json:"id"`
	Type         string            `json:"type"` // classic or consumer (KIP-848)
	State        string            `json:"state"`
	ProtocolType string            `json:"protocol_type"`
	Protocol     string            `json:"protocol"`
	Members      int               `json:"members"`
	Offsets      []GroupOffsetInfo `json:"offsets"`
	Lag          int64             `json:"lag"` // sum of the partitions' lag
	// Epoch is a classic group's generation, or a consumer group's group
	// epoch; AssignmentEpoch a consumer group's target assignment epoch.
	Epoch           int32 `json:"epoch"`
	AssignmentEpoch int32 `json:"assignment_epoch"`
	// Rebalances since the broker started: classic rebalances begun,
	// consumer-group epoch bumps.
	Rebalances uint64 `json:"rebalances"`
}

// GroupOffsetInfo is a group's committed offset for one partition and
// its lag: the high watermark minus the committed offset (0 when the
// partition no longer exists or the commit is ahead).
type GroupOffsetInfo struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     int64  `json:"committed"`
	HighWatermark int64  `json:"high_watermark"` // -1 when the partition does not exist
	Lag           int64  `json:"lag"`
}

// Groups summarizes every consumer group, sorted by id, with committed
// offsets and lag. It is empty before Start.
func (b *Broker) Groups() []GroupInfo {
	b.mu.RLock()
	g := b.groups
	b.mu.RUnlock()
	if g == nil {
		return nil
	}
	sums := g.Summaries()
	out := make([]GroupInfo, 0, len(sums))
	for _, s := range sums {
		gi := GroupInfo{ID: s.ID, Type: s.Type, State: s.State, ProtocolType: s.ProtocolType, Protocol: s.Protocol, Members: s.Members,
			Offsets: make([]GroupOffsetInfo, 0, len(s.Offsets)),
			Epoch:   s.Epoch, AssignmentEpoch: s.AssignmentEpoch, Rebalances: s.Rebalances}
		if s.Type == "classic" {
			gi.Epoch = s.Generation
		}
		for _, o := range s.Offsets {
			off := GroupOffsetInfo{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, HighWatermark: -1}
			if p := b.partition(o.Topic, o.Partition); p != nil {
				off.HighWatermark = p.HighWatermark()
				off.Lag = max(off.HighWatermark-max(o.Offset, 0), 0)
			}
			gi.Lag += off.Lag
			gi.Offsets = append(gi.Offsets, off)
		}
		out = append(out, gi)
	}
	return out
}

// ShareGroupInfo summarizes one share group (KIP-932): the share
// coordinator's state, which the group coordinator's Groups leaves out.
type ShareGroupInfo struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Epoch   int32  `json:"epoch"`
	Members int    `json:"members"`
	// Partitions: the share partitions the group has state for, sorted
	// by topic and partition.
	Partitions []SharePartitionInfo `json:"partitions"`
}

// SharePartitionInfo is one share partition of a share group: its start
// and end offsets and the records between them by state. Every record
// below StartOffset is acknowledged or archived; EndOffset is the next
// offset never acquired. The records in flight are no Kafka API's
// answer: they are only here and in the
// sluice_share_group_records_in_flight gauge.
type SharePartitionInfo struct {
	Topic        string `json:"topic"` // "" when the topic no longer exists
	TopicID      string `json:"topic_id"`
	Partition    int32  `json:"partition"`
	StartOffset  int64  `json:"start_offset"`
	EndOffset    int64  `json:"end_offset"`
	Available    int    `json:"available"`    // may be acquired
	Acquired     int    `json:"acquired"`     // delivered to a consumer, not yet acknowledged
	Acknowledged int    `json:"acknowledged"` // accepted above the start offset
	Archived     int    `json:"archived"`     // rejected or out of delivery attempts, above the start offset
}

// ShareGroups summarizes every share group, sorted by id, with each
// share partition's offsets and records in flight by state. It is empty
// before Start.
func (b *Broker) ShareGroups() []ShareGroupInfo {
	sc := b.shareCoordinator()
	if sc == nil {
		return nil
	}
	sums := sc.Summaries()
	out := make([]ShareGroupInfo, 0, len(sums))
	for _, s := range sums {
		gi := ShareGroupInfo{ID: s.ID, State: s.State, Epoch: s.Epoch, Members: len(s.Members),
			Partitions: make([]SharePartitionInfo, 0, len(s.Parts))}
		for _, p := range s.Parts {
			sp := SharePartitionInfo{TopicID: uuidString(p.TP.Topic), Partition: p.TP.Partition,
				StartOffset: p.Start, EndOffset: p.End,
				Available: p.Available, Acquired: p.Acquired, Acknowledged: p.Acknowledged, Archived: p.Archived}
			if t := b.lookupID(p.TP.Topic); t != nil {
				sp.Topic = t.name
			}
			gi.Partitions = append(gi.Partitions, sp)
		}
		slices.SortFunc(gi.Partitions, func(x, y SharePartitionInfo) int {
			if c := strings.Compare(x.Topic, y.Topic); c != 0 {
				return c
			}
			if c := strings.Compare(x.TopicID, y.TopicID); c != 0 {
				return c
			}
			return cmp.Compare(x.Partition, y.Partition)
		})
		out = append(out, gi)
	}
	return out
}

// Histogram is a cumulative histogram snapshot: Counts[i] observations
// were at most Bounds[i]; Count is the total (the +Inf bucket).
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum"`
}

// Stats are the broker's cumulative counters, for rates and quantiles
// over an interval (the console's charts take differences of two).
type Stats struct {
	Time         time.Time         `json:"time"`
	Traffic      Traffic           `json:"traffic"`  // every partition, deleted ones included
	Requests     map[string]uint64 `json:"requests"` // answered requests by API name
	Connections  int64             `json:"connections"`
	FsyncSeconds Histogram         `json:"fsync_seconds"` // fsync latency
	FsyncAppends Histogram         `json:"fsync_appends"` // appends made durable per fsync
	QueueDepth   Histogram         `json:"queue_depth"`   // acceptor queue depth seen by each append
}

// Stats returns the broker's counters now.
func (b *Broker) Stats() Stats {
	s := Stats{
		Time:         time.Now(),
		Traffic:      trafficOf(&b.traffic),
		Requests:     map[string]uint64{},
		Connections:  b.connCount.Load(),
		FsyncSeconds: histogramOf(b.accM.FsyncSeconds),
		FsyncAppends: histogramOf(b.accM.FsyncAppends),
		QueueDepth:   histogramOf(b.accM.QueueDepth),
	}
	ch := make(chan prometheus.Metric, 64)
	go func() { b.metrics.requests.Collect(ch); close(ch) }()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil || d.Histogram == nil {
			continue
		}
		for _, l := range d.Label {
			if l.GetName() == "api" {
				s.Requests[l.GetValue()] = d.Histogram.GetSampleCount()
			}
		}
	}
	return s
}

func histogramOf(h prometheus.Histogram) Histogram {
	var d dto.Metric
	if h.Write(&d) != nil || d.Histogram == nil {
		return Histogram{}
	}
	out := Histogram{Count: d.Histogram.GetSampleCount(), Sum: d.Histogram.GetSampleSum()}
	for _, bk := range d.Histogram.Bucket {
		out.Bounds = append(out.Bounds, bk.GetUpperBound())
		out.Counts = append(out.Counts, bk.GetCumulativeCount())
	}
	return out
}

// readyCheck is a named readiness condition.
type readyCheck struct {
	name  string
	check func() error
}

// AddReadinessCheck adds a condition to Ready: while check returns an
// error, the broker reports itself not ready with that error (a disk
// guard that stops writes when space runs low feeds one). check must be
// cheap and safe to call from any goroutine.
func (b *Broker) AddReadinessCheck(name string, check func() error) {
	b.readyMu.Lock()
	defer b.readyMu.Unlock()
	b.readyChecks = append(b.readyChecks, readyCheck{name, check})
}

// ErrNotReady is wrapped by every error Ready returns.
var ErrNotReady = errors.New("not ready")

// Ready returns nil when the broker can serve its clients: it has
// started, is not shutting down, every partition accepts appends and
// every readiness check passes. Otherwise the error (wrapping
// ErrNotReady) says why.
func (b *Broker) Ready() error {
	b.mu.RLock()
	listening := b.listening
	b.mu.RUnlock()
	switch {
	case b.closing.Load():
		return fmt.Errorf("%w: the broker is shutting down", ErrNotReady)
	case !listening:
		return fmt.Errorf("%w: the broker has not started", ErrNotReady)
	}
	for _, t := range b.sortedTopics() {
		for _, p := range t.parts {
			if err := p.Err(); err != nil {
				return fmt.Errorf("%w: partition %s/%d is not open: %w", ErrNotReady, p.Topic(), p.Index(), err)
			}
		}
	}
	if d := b.disk.Load(); d != nil && d.low {
		return fmt.Errorf("%w: disk full: %d bytes free on the data directory's filesystem, below the low watermark of %d bytes",
			ErrNotReady, d.free, d.watermark)
	}
	b.readyMu.Lock()
	checks := append([]readyCheck(nil), b.readyChecks...)
	b.readyMu.Unlock()
	for _, c := range checks {
		if err := c.check(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrNotReady, c.name, err)
		}
	}
	return nil
}
