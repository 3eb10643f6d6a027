package bench

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram is a lock-free log-linear latency histogram: each power of two
// of nanoseconds is split into subBuckets linear buckets, so a quantile is
// reported within 1/subBuckets (about 1.6%) of the true value. Record is
// safe from many goroutines at once; it does not allocate.
type Histogram struct {
	counts [64 * subBuckets]atomic.Uint64
	n      atomic.Uint64
	max    atomic.Int64
}

const (
	subBits    = 6
	subBuckets = 1 << subBits
)

// bucketOf maps a non-negative duration in nanoseconds to its bucket.
// Values below subBuckets have a bucket each; above, the top subBits+1
// bits pick the bucket.
func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // shift that leaves subBits+1 bits
	return (e+1)*subBuckets + int(v>>uint(e)) - subBuckets
}

// lowerBound is the smallest value that falls in bucket i.
func lowerBound(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	e := i/subBuckets - 1
	return uint64(i%subBuckets+subBuckets) << uint(e)
}

// Record adds one observation.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))].Add(1)
	h.n.Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 { return h.n.Load() }

// Max is the largest observation.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Quantile returns the value below which a fraction q (0..1) of the
// observations fall: the lower bound of the bucket holding the q-th
// observation, capped at Max. It is 0 when nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(q * float64(n))
	if rank >= n {
		rank = n - 1
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen > rank {
			v := time.Duration(lowerBound(i))
			if m := h.Max(); v > m {
				v = m
			}
			return v
		}
	}
	return h.Max()
}

// Latencies are the quantiles a summary reports.
type Latencies struct {
	P50  time.Duration `json:"p50"`
	P90  time.Duration `json:"p90"`
	P99  time.Duration `json:"p99"`
	P999 time.Duration `json:"p999"`
	Max  time.Duration `json:"max"`
}

// Summary returns the reported quantiles.
func (h *Histogram) Summary() Latencies {
	return Latencies{
		P50:  h.Quantile(0.50),
		P90:  h.Quantile(0.90),
		P99:  h.Quantile(0.99),
		P999: h.Quantile(0.999),
		Max:  h.Max(),
	}
}
