package groups

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the coordinator's Prometheus collectors.
type metrics struct {
	groups          prometheus.Gauge
	rebalances      prometheus.Counter
	commits         prometheus.Counter
	commitsRejected prometheus.Counter
	expired         prometheus.Counter
	expiredMembers  prometheus.Counter
	staticRejoins   prometheus.Counter
	joinSeconds     prometheus.Histogram
	compactions     prometheus.Counter
	consumerWrites  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		groups: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_groups",
			Help: "Consumer groups known to the coordinator."}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_group_rebalances_total",
			Help: "Rebalances started (groups entering PreparingRebalance)."}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_group_offset_commits_total",
			Help: "Partition offsets committed durably."}),
		commitsRejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_group_offset_commits_rejected_total",
			Help: "OffsetCommit requests fenced (unknown member, stale generation, rebalance in progress)."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_group_offsets_expired_total",
			Help: "Committed offsets removed by offsets retention."}),
		expiredMembers: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_group_members_expired_total",
			Help: "Members removed because their session timed out."}),
		staticRejoins: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_group_static_rejoins_total",
			Help: "Static members that rejoined without a rebalance."}),
		joinSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_group_join_seconds",
			Help: "Time JoinGroup requests waited for their rebalance.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		compactions: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_group_log_compactions_total",
			Help: "Rewrites of the coordinator's internal log down to its live records."}),
		consumerWrites: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_group_consumer_state_writes_total",
			Help: "Consumer-protocol (KIP-848) group state changes written durably."}),
	}
	if reg == nil {
		return m
	}
	register(reg, &m.groups)
	register(reg, &m.rebalances)
	register(reg, &m.commits)
	register(reg, &m.commitsRejected)
	register(reg, &m.expired)
	register(reg, &m.expiredMembers)
	register(reg, &m.staticRejoins)
	register(reg, &m.joinSeconds)
	register(reg, &m.compactions)
	register(reg, &m.consumerWrites)
	return m
}

// register registers *c, reusing a collector already registered under
// the same description (a coordinator reopened on the same registry).
func register[C prometheus.Collector](reg prometheus.Registerer, c *C) {
	if err := reg.Register(*c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				*c = existing
			}
		}
	}
}

func (m *metrics) observeJoin(code int16, d time.Duration) {
	if code == 0 {
		m.joinSeconds.Observe(d.Seconds())
	}
}
