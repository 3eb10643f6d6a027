package schemaregistry

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the registry's Prometheus series:
//
//	sluice_schema_registry_requests_total{endpoint, status}  requests answered, by route pattern and HTTP status
//	sluice_schema_registry_schemas                           schema ids registered (soft-deleted ones too)
//	sluice_schema_registry_subjects                          subjects with a live version
type metrics struct {
	reg        prometheus.Registerer
	requests   *prometheus.CounterVec
	collectors []prometheus.Collector
}

func newMetrics(pr prometheus.Registerer, r *Registry) *metrics {
	m := &metrics{
		reg: pr,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_schema_registry_requests_total",
			Help: "Schema registry requests answered, by endpoint (route pattern) and HTTP status.",
		}, []string{"endpoint", "status"}),
	}
	schemas := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_schema_registry_schemas",
		Help: "Schema ids registered in the schema registry (soft-deleted ones included).",
	}, func() float64 {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return float64(len(r.st.ids))
	})
	subjects := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_schema_registry_subjects",
		Help: "Subjects with a live (not deleted) version in the schema registry.",
	}, func() float64 {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return float64(len(r.st.subjectNames(false)))
	})
	m.collectors = []prometheus.Collector{m.requests, schemas, subjects}
	if pr != nil {
		for _, c := range m.collectors {
			pr.MustRegister(c)
		}
	}
	return m
}

func (m *metrics) request(endpoint string, status int) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
}

func (m *metrics) unregister() {
	if m == nil || m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}
