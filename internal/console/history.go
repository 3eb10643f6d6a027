package console

import (
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/broker"
)

// maxSeries bounds the series kept in memory; per-topic and per-group
// series beyond it are not recorded (the broker-wide ones come first).
// At 1800 float32 points a series is 7 KiB, so the cap is about 28 MiB.
const maxSeries = 4000

// history is a fixed-size ring of samples shared by every series: slot
// i of each series belongs to times[i]. A series created late reads NaN
// (no data) in slots before its first sample.
type history struct {
	every time.Duration

	mu     sync.Mutex // guards the fields below
	times  []int64    // unix milliseconds of each slot; 0 when never filled
	head   int        // next slot to fill
	n      int        // slots filled, at most len(times)
	series map[string][]float32
	next   chan struct{} // closed by the next record
}

func newHistory(points int, every time.Duration) *history {
	return &history{every: every, times: make([]int64, points), series: map[string][]float32{}, next: make(chan struct{})}
}

// recorded returns a channel closed when the next sample is recorded.
func (h *history) recorded() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next
}

// record stores one sample: every series not in vals gets NaN there.
func (h *history) record(t time.Time, vals map[string]float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	slot := h.head
	h.times[slot] = t.UnixMilli()
	for name, ring := range h.series {
		v, ok := vals[name]
		if !ok {
			v = math.NaN()
		}
		ring[slot] = float32(v)
	}
	for name, v := range vals {
		if _, ok := h.series[name]; ok || len(h.series) >= maxSeries {
			continue
		}
		ring := make([]float32, len(h.times))
		for i := range ring {
			ring[i] = float32(math.NaN())
		}
		ring[slot] = float32(v)
		h.series[name] = ring
	}
	h.head = (slot + 1) % len(h.times)
	h.n = min(h.n+1, len(h.times))
	close(h.next)
	h.next = make(chan struct{})
}

// latest returns the newest value of a series, if it has one.
func (h *history) latest(name string) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ring, ok := h.series[name]
	if !ok || h.n == 0 {
		return 0, false
	}
	v := float64(ring[(h.head-1+len(h.times))%len(h.times)])
	return v, !math.IsNaN(v)
}

// forget drops series whose name starts with prefix (a deleted topic's
// or group's).
func (h *history) forget(prefix string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.series {
		if strings.HasPrefix(name, prefix) {
			delete(h.series, name)
		}
	}
}

// Series is the JSON form of a history query: times in unix
// milliseconds, oldest first, and per series one value per time (null
// when there was no data).
type Series struct {
	IntervalMs int64                 `json:"interval_ms"`
	Times      []int64               `json:"times"`
	Series     map[string][]*float64 `json:"series"`
}

// query returns the named series (unknown names are omitted) and every
// series starting with one of prefixes, at most limit series in all,
// leaving out those allow refuses (nil allows all).
func (h *history) query(names, prefixes []string, limit int, allow func(string) bool) Series {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := Series{IntervalMs: h.every.Milliseconds(), Times: make([]int64, 0, h.n), Series: map[string][]*float64{}}
	start := (h.head - h.n + len(h.times)) % len(h.times)
	for i := 0; i < h.n; i++ {
		out.Times = append(out.Times, h.times[(start+i)%len(h.times)])
	}
	add := func(name string) {
		ring, ok := h.series[name]
		if !ok || len(out.Series) >= limit || (allow != nil && !allow(name)) {
			return
		}
		vals := make([]*float64, h.n)
		for i := range vals {
			v := float64(ring[(start+i)%len(h.times)])
			if !math.IsNaN(v) {
				vals[i] = &v
			}
		}
		out.Series[name] = vals
	}
	for _, n := range names {
		add(n)
	}
	if len(prefixes) > 0 {
		var matched []string
		for name := range h.series {
			for _, p := range prefixes {
				if strings.HasPrefix(name, p) {
					matched = append(matched, name)
					break
				}
			}
		}
		slices.Sort(matched)
		for _, n := range matched {
			add(n)
		}
	}
	return out
}

// Series names.
const (
	sProduceRecords = "produce.records" // records/s accepted by Produce
	sProduceBytes   = "produce.bytes"   // bytes/s
	sFetchRecords   = "fetch.records"   // records/s sent by Fetch
	sFetchBytes     = "fetch.bytes"
	sFsyncP50       = "fsync.p50" // seconds
	sFsyncP99       = "fsync.p99"
	sFsyncAppends   = "fsync.appends" // mean appends per fsync
	sQueueDepth     = "queue.depth"   // mean acceptor queue depth seen by appends
	sConnections    = "connections"
	pRequests       = "requests." // + API name: requests/s
	pTopic          = "topic/"    // + name + "/in.records" etc.
	pGroupLag       = "group/"    // + id + "/lag"
)

// Topic names never hold "/", so "topic/NAME/" prefixes one topic's series.
func topicSeries(name, what string) string { return pTopic + name + "/" + what }
func groupLagSeries(id string) string      { return pGroupLag + id + "/lag" }

// sampler turns cumulative broker counters into per-interval values.
type sampler struct {
	prev   broker.Stats
	topics map[string]broker.Traffic
	groups map[string]bool
}

// sample computes one slot's values from the broker's counters now.
// It also returns the prefixes of series whose topic or group is gone.
func (sp *sampler) sample(b *broker.Broker) (time.Time, map[string]float64, []string) {
	st := b.Stats()
	vals := map[string]float64{sConnections: float64(st.Connections)}
	topics := b.Topics()
	cur := make(map[string]broker.Traffic, len(topics))
	for _, t := range topics {
		_, _, tr := t.Totals()
		cur[t.Name] = tr
	}
	var gone []string
	if !sp.prev.Time.IsZero() {
		dt := st.Time.Sub(sp.prev.Time).Seconds()
		rate := func(now, then int64) float64 { return max(float64(now-then), 0) / dt }
		vals[sProduceRecords] = rate(st.Traffic.RecordsIn, sp.prev.Traffic.RecordsIn)
		vals[sProduceBytes] = rate(st.Traffic.BytesIn, sp.prev.Traffic.BytesIn)
		vals[sFetchRecords] = rate(st.Traffic.RecordsOut, sp.prev.Traffic.RecordsOut)
		vals[sFetchBytes] = rate(st.Traffic.BytesOut, sp.prev.Traffic.BytesOut)
		if q, ok := quantile(0.5, st.FsyncSeconds, sp.prev.FsyncSeconds); ok {
			vals[sFsyncP50] = q
		}
		if q, ok := quantile(0.99, st.FsyncSeconds, sp.prev.FsyncSeconds); ok {
			vals[sFsyncP99] = q
		}
		if m, ok := mean(st.FsyncAppends, sp.prev.FsyncAppends); ok {
			vals[sFsyncAppends] = m
		}
		if m, ok := mean(st.QueueDepth, sp.prev.QueueDepth); ok {
			vals[sQueueDepth] = m
		} else {
			vals[sQueueDepth] = 0
		}
		for api, n := range st.Requests {
			vals[pRequests+api] = float64(n-min(sp.prev.Requests[api], n)) / dt
		}
		for name, tr := range cur {
			was, ok := sp.topics[name]
			if !ok {
				continue
			}
			vals[topicSeries(name, "in.records")] = rate(tr.RecordsIn, was.RecordsIn)
			vals[topicSeries(name, "in.bytes")] = rate(tr.BytesIn, was.BytesIn)
			vals[topicSeries(name, "out.records")] = rate(tr.RecordsOut, was.RecordsOut)
			vals[topicSeries(name, "out.bytes")] = rate(tr.BytesOut, was.BytesOut)
		}
		for name := range sp.topics {
			if _, ok := cur[name]; !ok {
				gone = append(gone, pTopic+name+"/")
			}
		}
	}
	groups := map[string]bool{}
	for _, g := range b.Groups() {
		vals[groupLagSeries(g.ID)] = float64(g.Lag)
		groups[g.ID] = true
	}
	for id := range sp.groups {
		if !groups[id] {
			gone = append(gone, groupLagSeries(id))
		}
	}
	sp.prev, sp.topics, sp.groups = st, cur, groups
	return st.Time, vals, gone
}

// quantile estimates the q-quantile of the observations between two
// cumulative histogram snapshots, interpolating linearly inside the
// bucket (as Prometheus' histogram_quantile does).
func quantile(q float64, now, then broker.Histogram) (float64, bool) {
	total := now.Count - min(then.Count, now.Count)
	if total == 0 || len(now.Bounds) == 0 {
		return 0, false
	}
	rank := q * float64(total)
	lower, below := 0.0, 0.0
	for i, ub := range now.Bounds {
		c := float64(now.Counts[i])
		if i < len(then.Counts) {
			c -= float64(then.Counts[i])
		}
		if c >= rank {
			if c == below {
				return ub, true
			}
			return lower + (ub-lower)*(rank-below)/(c-below), true
		}
		lower, below = ub, c
	}
	return now.Bounds[len(now.Bounds)-1], true // in the +Inf bucket
}

// mean is the mean observation between two snapshots.
func mean(now, then broker.Histogram) (float64, bool) {
	n := now.Count - min(then.Count, now.Count)
	if n == 0 {
		return 0, false
	}
	return (now.Sum - then.Sum) / float64(n), true
}

// sampleLoop records a sample every SampleEvery until Close.
func (s *Server) sampleLoop() {
	defer s.wg.Done()
	var sp sampler
	tick := time.NewTicker(s.cfg.SampleEvery)
	defer tick.Stop()
	for {
		t, vals, gone := sp.sample(s.b)
		for _, p := range gone {
			s.hist.forget(p)
		}
		s.hist.record(t, vals)
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}
