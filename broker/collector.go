package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports per-topic, per-partition and per-group series,
// computed from the broker's state at each scrape, so series of deleted
// topics and groups disappear with them.
//
// Cardinality: per topic 7 series; per partition 8 series; per group
// 4 series (5 for a consumer group) plus 1 per (group, topic) and, with partition series on, 1
// per committed (group, topic, partition). With PartitionMetrics(false)
// only the per-topic and per-(group, topic) series remain, so the count
// grows with topics and groups, never with partitions.
type collector struct{ b *Broker }

var (
	descBuildInfo = prometheus.NewDesc("sluice_build_info", "Always 1; the labels give the version and the Go release.", []string{"version", "goversion"}, nil)
	descReady     = prometheus.NewDesc("sluice_ready", "1 when the broker is ready (as /readyz reports), else 0.", nil, nil)
	descUptime    = prometheus.NewDesc("sluice_start_time_seconds", "Unix time the broker opened its data directory.", nil, nil)
	descDiskTotal = prometheus.NewDesc("sluice_disk_total_bytes", "Size of the filesystem holding the data directory.", nil, nil)
	descDataBytes = prometheus.NewDesc("sluice_data_bytes", "Bytes of every partition log.", nil, nil)

	descRecordsIn  = prometheus.NewDesc("sluice_records_in_total", "Records accepted by Produce, every topic (deleted ones included).", nil, nil)
	descBytesIn    = prometheus.NewDesc("sluice_bytes_in_total", "Record-batch bytes accepted by Produce, every topic.", nil, nil)
	descRecordsOut = prometheus.NewDesc("sluice_records_out_total", "Records sent by Fetch, every topic.", nil, nil)
	descBytesOut   = prometheus.NewDesc("sluice_bytes_out_total", "Record-batch bytes sent by Fetch, every topic.", nil, nil)

	topicLabels      = []string{"topic"}
	descTRecordsIn   = prometheus.NewDesc("sluice_topic_records_in_total", "Records accepted by Produce for the topic.", topicLabels, nil)
	descTBytesIn     = prometheus.NewDesc("sluice_topic_bytes_in_total", "Record-batch bytes accepted by Produce for the topic.", topicLabels, nil)
	descTRecordsOut  = prometheus.NewDesc("sluice_topic_records_out_total", "Records of the topic sent by Fetch.", topicLabels, nil)
	descTBytesOut    = prometheus.NewDesc("sluice_topic_bytes_out_total", "Record-batch bytes of the topic sent by Fetch.", topicLabels, nil)
	descTPartitions  = prometheus.NewDesc("sluice_topic_partitions", "Partitions of the topic.", topicLabels, nil)
	descTSize        = prometheus.NewDesc("sluice_topic_log_size_bytes", "Bytes of the topic's partition logs.", topicLabels, nil)
	descTRecordsHeld = prometheus.NewDesc("sluice_topic_records", "Offsets held by the topic's logs (high watermark minus start offset, summed).", topicLabels, nil)

	partLabels     = []string{"topic", "partition"}
	descPRecordsIn = prometheus.NewDesc("sluice_partition_records_in_total", "Records accepted by Produce for the partition.", partLabels, nil)
	descPBytesIn   = prometheus.NewDesc("sluice_partition_bytes_in_total", "Record-batch bytes accepted by Produce for the partition.", partLabels, nil)
	descPRecordsOu = prometheus.NewDesc("sluice_partition_records_out_total", "Records of the partition sent by Fetch.", partLabels, nil)
	descPBytesOut  = prometheus.NewDesc("sluice_partition_bytes_out_total", "Record-batch bytes of the partition sent by Fetch.", partLabels, nil)
	descPStart     = prometheus.NewDesc("sluice_partition_log_start_offset", "First offset still in the partition's log.", partLabels, nil)
	descPEnd       = prometheus.NewDesc("sluice_partition_log_end_offset", "The partition's high watermark: the end of its durable log.", partLabels, nil)
	descPSize      = prometheus.NewDesc("sluice_partition_log_size_bytes", "Bytes of the partition's log.", partLabels, nil)
	descPSegments  = prometheus.NewDesc("sluice_partition_log_segments", "Segment files of the partition's log.", partLabels, nil)

	descWALRounds  = prometheus.NewDesc("sluice_wal_rounds_total", "Group commits of the shared write-ahead log: one write and one fdatasync for every partition's appends queued meanwhile.", nil, nil)
	descWALFailed  = prometheus.NewDesc("sluice_wal_failed_rounds_total", "Write-ahead log rounds whose write or fdatasync failed (their partitions failed and heal).", nil, nil)
	descWALEntries = prometheus.NewDesc("sluice_wal_entries_total", "Entries (one partition's coalesced appends, or a truncation) written to the write-ahead log.", nil, nil)
	descWALBytes   = prometheus.NewDesc("sluice_wal_bytes_total", "Bytes written to the write-ahead log.", nil, nil)
	descWALSeconds = prometheus.NewDesc("sluice_wal_round_seconds_total", "Time spent writing and syncing write-ahead log rounds; divided by the rounds, the mean round.", nil, nil)
	descWALSegs    = prometheus.NewDesc("sluice_wal_segments_prepared_total", "Write-ahead log segment files made ready ahead of need, by how: reused (a retired segment renamed in) or zeroed (created and written with zeros to full length).", []string{"how"}, nil)
	descWALSize    = prometheus.NewDesc("sluice_wal_size_bytes", "Bytes of write-ahead log segment files held (freed once partitions checkpoint).", nil, nil)

	descGMembers  = prometheus.NewDesc("sluice_group_members", "Members of the consumer group.", []string{"group"}, nil)
	descGLagTotal = prometheus.NewDesc("sluice_group_lag_total", "Sum of the group's lag over its committed partitions.", []string{"group"}, nil)
	descGTopicLag = prometheus.NewDesc("sluice_group_topic_lag", "The group's lag summed over the topic's committed partitions.", []string{"group", "topic"}, nil)
	descGLag      = prometheus.NewDesc("sluice_group_lag", "High watermark minus the group's committed offset for the partition.", []string{"group", "topic", "partition"}, nil)

	descGEpoch       = prometheus.NewDesc("sluice_group_epoch", "The group's epoch: a classic group's generation, a consumer group's (KIP-848) group epoch.", []string{"group", "type"}, nil)
	descGAssignEpoch = prometheus.NewDesc("sluice_group_assignment_epoch", "The epoch of a consumer group's (KIP-848) target assignment.", []string{"group"}, nil)
	descGRebalances  = prometheus.NewDesc("sluice_group_rebalances_per_group_total", "The group's rebalances since the broker started: classic rebalances begun, consumer-group epoch bumps.", []string{"group", "type"}, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBuildInfo, descReady, descUptime, descDiskTotal, descDataBytes,
		descRecordsIn, descBytesIn, descRecordsOut, descBytesOut,
		descTRecordsIn, descTBytesIn, descTRecordsOut, descTBytesOut, descTPartitions, descTSize, descTRecordsHeld,
		descPRecordsIn, descPBytesIn, descPRecordsOu, descPBytesOut, descPStart, descPEnd, descPSize, descPSegments,
		descWALRounds, descWALFailed, descWALEntries, descWALBytes, descWALSeconds, descWALSegs, descWALSize,
		descGMembers, descGLagTotal, descGTopicLag, descGLag, descGEpoch, descGAssignEpoch, descGRebalances} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descBuildInfo, 1, Version(), GoVersion())
	ready := 0.0
	if b.Ready() == nil {
		ready = 1
	}
	gauge(descReady, ready)
	gauge(descUptime, float64(b.started.UnixNano())/1e9)
	// sluice_disk_free_bytes is the disk guard's own gauge (disk.go).
	if d := b.disk.Load(); d != nil {
		gauge(descDiskTotal, float64(d.total))
	}
	if w := b.wal; w != nil {
		st := w.Stats()
		counter(descWALRounds, st.Rounds)
		counter(descWALFailed, st.FailedRounds)
		counter(descWALEntries, st.Entries)
		counter(descWALBytes, st.Bytes)
		ch <- prometheus.MustNewConstMetric(descWALSeconds, prometheus.CounterValue, st.RoundTime.Seconds())
		counter(descWALSegs, st.SegmentsReused, "reused")
		counter(descWALSegs, st.SegmentsZeroed, "zeroed")
		gauge(descWALSize, float64(w.Size()))
	}
	tr := trafficOf(&b.traffic)
	counter(descRecordsIn, tr.RecordsIn)
	counter(descBytesIn, tr.BytesIn)
	counter(descRecordsOut, tr.RecordsOut)
	counter(descBytesOut, tr.BytesOut)

	var data int64
	for _, t := range b.Topics() {
		records, size, tt := t.Totals()
		data += size
		counter(descTRecordsIn, tt.RecordsIn, t.Name)
		counter(descTBytesIn, tt.BytesIn, t.Name)
		counter(descTRecordsOut, tt.RecordsOut, t.Name)
		counter(descTBytesOut, tt.BytesOut, t.Name)
		gauge(descTPartitions, float64(len(t.Partitions)), t.Name)
		gauge(descTSize, float64(size), t.Name)
		gauge(descTRecordsHeld, float64(records), t.Name)
		if !b.cfg.partitionMetrics {
			continue
		}
		for _, p := range t.Partitions {
			ps := strconv.Itoa(int(p.Partition))
			counter(descPRecordsIn, p.Traffic.RecordsIn, t.Name, ps)
			counter(descPBytesIn, p.Traffic.BytesIn, t.Name, ps)
			counter(descPRecordsOu, p.Traffic.RecordsOut, t.Name, ps)
			counter(descPBytesOut, p.Traffic.BytesOut, t.Name, ps)
			gauge(descPStart, float64(p.StartOffset), t.Name, ps)
			gauge(descPEnd, float64(p.HighWatermark), t.Name, ps)
			gauge(descPSize, float64(p.SizeBytes), t.Name, ps)
			gauge(descPSegments, float64(p.Segments), t.Name, ps)
		}
	}
	gauge(descDataBytes, float64(data))

	for _, g := range b.Groups() {
		gauge(descGMembers, float64(g.Members), g.ID)
		gauge(descGLagTotal, float64(g.Lag), g.ID)
		gauge(descGEpoch, float64(g.Epoch), g.ID, g.Type)
		if g.Type == "consumer" {
			gauge(descGAssignEpoch, float64(g.AssignmentEpoch), g.ID)
		}
		counter(descGRebalances, int64(g.Rebalances), g.ID, g.Type)
		byTopic := map[string]int64{}
		for _, o := range g.Offsets {
			if o.HighWatermark < 0 {
				continue // the partition is gone
			}
			byTopic[o.Topic] += o.Lag
			if b.cfg.partitionMetrics {
				gauge(descGLag, float64(o.Lag), g.ID, o.Topic, strconv.Itoa(int(o.Partition)))
			}
		}
		for t, lag := range byTopic {
			gauge(descGTopicLag, float64(lag), g.ID, t)
		}
	}
}
