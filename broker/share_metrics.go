package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// shareCollector exports the share groups' series, computed from the
// share coordinator's state at each scrape.
//
// Cardinality: per share group 1 + 4 (records in flight by state) + 1
// (lag) series; with partition series on, 3 per share partition more.
type shareCollector struct{ b *Broker }

var (
	descSGMembers  = prometheus.NewDesc("sluice_share_group_members", "Members of the share group.", []string{"group"}, nil)
	descSGInFlight = prometheus.NewDesc("sluice_share_group_records_in_flight", "Records between the share-partition start and end offsets, over the group's share partitions, by state (available, acquired, acknowledged, archived).", []string{"group", "state"}, nil)
	descSGLag      = prometheus.NewDesc("sluice_share_group_lag", "Records of the group's share partitions not yet acknowledged or archived, up to the high watermarks.", []string{"group"}, nil)

	sharePartLabels = []string{"group", "topic", "partition"}
	descSPStart     = prometheus.NewDesc("sluice_share_partition_start_offset", "The share-partition start offset: every record below it is acknowledged or archived.", sharePartLabels, nil)
	descSPEnd       = prometheus.NewDesc("sluice_share_partition_end_offset", "The share-partition end offset: the next offset never acquired.", sharePartLabels, nil)
	descSPLag       = prometheus.NewDesc("sluice_share_partition_lag", "Records of the share partition not yet acknowledged or archived, up to the high watermark.", sharePartLabels, nil)
)

func (shareCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSGMembers, descSGInFlight, descSGLag, descSPStart, descSPEnd, descSPLag} {
		ch <- d
	}
}

func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	sc := b.shareCoordinator()
	if sc == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, s := range sc.Summaries() {
		gauge(descSGMembers, float64(len(s.Members)), s.ID)
		var avail, acq, acked, arch, lag int
		for _, p := range s.Parts {
			avail, acq, acked, arch = avail+p.Available, acq+p.Acquired, acked+p.Acknowledged, arch+p.Archived
			t := b.lookupID(p.TP.Topic)
			if t == nil || int(p.TP.Partition) >= len(t.parts) {
				continue
			}
			l := max(int(t.parts[p.TP.Partition].HighWatermark()-p.Start)-p.Acknowledged-p.Archived, 0)
			lag += l
			if b.cfg.partitionMetrics {
				part := strconv.Itoa(int(p.TP.Partition))
				gauge(descSPStart, float64(p.Start), s.ID, t.name, part)
				gauge(descSPEnd, float64(p.End), s.ID, t.name, part)
				gauge(descSPLag, float64(l), s.ID, t.name, part)
			}
		}
		gauge(descSGInFlight, float64(avail), s.ID, "available")
		gauge(descSGInFlight, float64(acq), s.ID, "acquired")
		gauge(descSGInFlight, float64(acked), s.ID, "acknowledged")
		gauge(descSGInFlight, float64(arch), s.ID, "archived")
		gauge(descSGLag, float64(lag), s.ID)
	}
}
