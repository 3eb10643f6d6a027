package acceptor

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the acceptor's Prometheus collectors, shared by every
// partition of a broker (they carry no labels). A nil *Metrics records
// nothing.
type Metrics struct {
	QueueDepth     prometheus.Histogram // requests waiting in (or entering) the queue, seen by each append as it is taken
	WriteBytes     prometheus.Histogram // bytes per write to the log
	WriteAppends   prometheus.Histogram // appends per write (coalescing factor)
	FsyncSeconds   prometheus.Histogram // fsync latency
	FsyncAppends   prometheus.Histogram // appends made durable per fsync (group-commit factor)
	Failures       prometheus.Counter   // partitions stopped by a failed write or fsync
	RetentionFails prometheus.Counter   // retention runs that returned an error
	Heals          prometheus.Counter   // failed partitions that recovered
	HealFails      prometheus.Counter   // recovery attempts that failed (the partition stays failed)
	Inline         prometheus.Counter   // appends handled on their caller's goroutine (Acceptor.tryInline)
	InlineSynced   prometheus.Counter   // of those, appends also fsynced there (Acceptor.appendSyncInline)
}

// pow2Buckets returns 0, 1, 2, 4, ... up to and including max (a power of two).
func pow2Buckets(max float64) []float64 {
	b := []float64{0}
	for v := 1.0; v <= max; v *= 2 {
		b = append(b, v)
	}
	return b
}

// NewMetrics creates the collectors and registers them with reg (if not
// nil). It panics if they are already registered with reg, as
// prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		QueueDepth: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "queue_depth",
			Help:    "Append requests waiting in (or entering) a partition's queue, observed as each one is taken.",
			Buckets: pow2Buckets(65536),
		}),
		WriteBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "write_bytes",
			Help:    "Bytes per write to a partition log.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 11), // 256 B .. 256 MiB
		}),
		WriteAppends: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "write_appends",
			Help:    "Appends coalesced into one write.",
			Buckets: pow2Buckets(65536)[1:],
		}),
		FsyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "fsync_seconds",
			Help:    "Latency of fsync (fdatasync) of a partition's active segment.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16), // 50 µs .. 1.6 s
		}),
		FsyncAppends: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "fsync_appends",
			Help:    "Appends made durable by one fsync.",
			Buckets: pow2Buckets(65536),
		}),
		Failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "failures_total",
			Help: "Partitions stopped by a failed write or fsync (they refuse appends until they heal).",
		}),
		RetentionFails: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "retention_errors_total",
			Help: "Retention runs that returned an error.",
		}),
		Heals: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "heals_total",
			Help: "Failed partitions that recovered their log and take appends again.",
		}),
		HealFails: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "heal_attempts_failed_total",
			Help: "Attempts to recover a failed partition that failed (it stays failed and retries with backoff).",
		}),
		Inline: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "inline_appends_total",
			Help: "Appends handled and written on the producing connection's goroutine, their partition's goroutine being idle.",
		}),
		InlineSynced: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "acceptor", Name: "inline_synced_appends_total",
			Help: "Durable appends written and fsynced on the producing connection's goroutine: a connection with no other request in flight, to an idle partition that fsyncs its own segment.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.QueueDepth, m.WriteBytes, m.WriteAppends, m.FsyncSeconds, m.FsyncAppends, m.Failures, m.RetentionFails, m.Heals, m.HealFails, m.Inline, m.InlineSynced)
	}
	return m
}

func (m *Metrics) queueDepth(n int) {
	if m != nil {
		m.QueueDepth.Observe(float64(n))
	}
}

func (m *Metrics) write(bytes, appends int) {
	if m != nil {
		m.WriteBytes.Observe(float64(bytes))
		m.WriteAppends.Observe(float64(appends))
	}
}

func (m *Metrics) fsync(d time.Duration, appends int) {
	if m != nil {
		m.FsyncSeconds.Observe(d.Seconds())
		m.FsyncAppends.Observe(float64(appends))
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.Failures.Inc()
	}
}

func (m *Metrics) retentionFailed() {
	if m != nil {
		m.RetentionFails.Inc()
	}
}

func (m *Metrics) healed() {
	if m != nil {
		m.Heals.Inc()
	}
}

func (m *Metrics) healFailed() {
	if m != nil {
		m.HealFails.Inc()
	}
}

func (m *Metrics) inline() {
	if m != nil {
		m.Inline.Inc()
	}
}

func (m *Metrics) inlineSync() {
	if m != nil {
		m.Inline.Inc()
		m.InlineSynced.Inc()
	}
}
