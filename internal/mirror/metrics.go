package mirror

import "github.com/prometheus/client_golang/prometheus"

// metrics are the mirror's Prometheus series, registered on
// Config.Registerer when one is given (and unregistered when Run ends).
type metrics struct {
	reg     prometheus.Registerer
	records *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	lag     *prometheus.GaugeVec
	commits prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		reg: reg,
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_mirror_records_total", Help: "Records copied to the target, per topic.",
		}, []string{"topic"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_mirror_bytes_total", Help: "Key, value and header bytes copied to the target, per topic.",
		}, []string{"topic"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_mirror_lag_records", Help: "Source records not yet copied, per topic, at the last check.",
		}, []string{"topic"}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_mirror_commits_total", Help: "Transactions (or position commits without transactions) on the target.",
		}),
	}
	if reg != nil {
		for i, c := range m.collectors() {
			if err := reg.Register(c); err != nil {
				// Already registered by a concurrent run on the same
				// registry: count privately instead.
				for _, done := range m.collectors()[:i] {
					reg.Unregister(done)
				}
				m.reg = nil
				break
			}
		}
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.records, m.bytes, m.lag, m.commits}
}

func (m *metrics) copied(topic string, n int64) {
	m.records.WithLabelValues(topic).Inc()
	m.bytes.WithLabelValues(topic).Add(float64(n))
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}
