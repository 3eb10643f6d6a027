package broker

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the broker's Prometheus collectors.
type metrics struct {
	requests      *prometheus.HistogramVec // handling latency by API (its count is the request count)
	conns         prometheus.Gauge
	connsRejected prometheus.Counter
	badRequests   prometheus.Counter
	authFailures  prometheus.Counter
	oversized     prometheus.Counter
	topics        prometheus.Gauge
	fetchBytes    prometheus.Counter
	diskFree      prometheus.Gauge
	walDropped    prometheus.Counter
	// hangingAborted counts hanging transactions aborted (hanging.go).
	hangingAborted prometheus.Counter
	// throttled counts requests answered with a quota throttle (quotas.go).
	throttled prometheus.Counter

	// byKey caches requests' child per API key (looking a label value
	// up hashes and locks on every request); entries are set once.
	byKey [128]atomic.Pointer[prometheus.Observer]
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "broker", Name: "request_seconds",
			Help:    "Time from reading a request to writing its response, by API.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50 µs .. 6.5 s
		}, []string{"api"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sluice", Subsystem: "broker", Name: "connections",
			Help: "Open client connections.",
		}),
		connsRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "broker", Name: "connections_rejected_total",
			Help: "Connections closed at once because MaxConnections was reached.",
		}),
		badRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "broker", Name: "bad_requests_total",
			Help: "Connections closed because of a request that could not be served (malformed, unknown API, unsupported version).",
		}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "broker", Name: "authentication_failures_total",
			Help: "Connections closed because a TLS handshake or SASL authentication failed.",
		}),
		throttled: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "broker", Name: "throttled_requests_total",
			Help: "Requests answered with a client-quota throttle (their connection muted for it).",
		}),
		oversized: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "broker", Name: "oversized_requests_total",
			Help: "Connections closed because a request exceeded MaxRequestBytes.",
		}),
		topics: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sluice", Subsystem: "broker", Name: "topics",
			Help: "Topics that exist.",
		}),
		fetchBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "broker", Name: "fetch_record_bytes_total",
			Help: "Record bytes sent in Fetch responses.",
		}),
		diskFree: newDiskFreeGauge(),
		hangingAborted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "txn", Name: "hanging_aborted_total",
			Help: "Transactions aborted on a partition because they were open longer than transaction.max.timeout.ms with no live transaction coordinator state (KIP-664 hanging transactions).",
		}),
		walDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "wal", Name: "replay_dropped_entries_total",
			Help: "Write-ahead log entries dropped at start because they did not continue their log (the log ended before them; the warning names the log and offsets).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.conns, m.connsRejected, m.badRequests, m.authFailures, m.oversized, m.topics, m.fetchBytes, m.diskFree, m.walDropped, m.hangingAborted)
		reg.MustRegister(m.throttled)
	}
	return m
}

// observe records a request's handling time under its API's name; key
// is its API key (-1 when it was not decoded).
func (m *metrics) observe(key int16, api string, d time.Duration) {
	if key < 0 || int(key) >= len(m.byKey) {
		m.requests.WithLabelValues(api).Observe(d.Seconds())
		return
	}
	o := m.byKey[key].Load()
	if o == nil {
		obs := m.requests.WithLabelValues(api)
		o = &obs
		m.byKey[key].Store(o)
	}
	(*o).Observe(d.Seconds())
}
