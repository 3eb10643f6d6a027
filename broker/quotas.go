package broker

// Client quotas (package quota) and the broker-wide bound on request
// bytes held in memory.
//
// Enforcement: each request is counted after its handler ran (dispatch
// calls throttleRequest): a Produce's request bytes against
// producer_byte_rate, a Fetch's record bytes against consumer_byte_rate,
// the handler's time (a Fetch's long-poll wait left out) against
// request_percentage. The largest throttle goes into the response's
// throttle_time_ms and the connection is muted for that long (KIP-219):
// its read loop reads nothing more from the socket until then, so a
// client that ignores the field is held back the same. Throttled
// responses are sent at once and whole (Kafka empties a throttled
// Fetch; here the bytes already counted are sent, and the account's debt
// holds the next request back). CreateTopics, CreatePartitions and
// DeleteTopics check controller_mutation_rate first (KIP-599,
// mutationThrottle).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/quota"
	"github.com/sluicedb/sluice/internal/vfs"
)

// QuotaWindow sets the rate window of client quotas: num samples of size
// each (Kafka's quota.window.num, default 11, and
// quota.window.size.seconds, default 1). A fresh client may burst one
// window's worth of its limit; a throttle is at most one window.
func QuotaWindow(num int, size time.Duration) Opt {
	return opt(func(c *cfg) { c.quotaWindowNum, c.quotaWindowSize = num, size })
}

// QueuedMaxRequestBytes bounds the bytes of requests read from sockets
// and not yet done with (a Produce's bytes until its appends returned),
// over every connection; at the bound the broker stops reading from
// sockets until requests finish (Kafka's queued.max.request.bytes).
// It must be at least MaxRequestBytes. Default: an eighth of the
// machine's memory, between MaxRequestBytes and 1 GiB.
func QueuedMaxRequestBytes(n int64) Opt { return opt(func(c *cfg) { c.queuedMaxBytes = n }) }

// RequestReadTimeout bounds the time from a request's first byte to its
// last; a client that sends slower is disconnected. Default 30 s.
func RequestReadTimeout(d time.Duration) Opt { return opt(func(c *cfg) { c.requestReadTimeout = d }) }

// DefaultRequestReadTimeout is RequestReadTimeout's default.
const DefaultRequestReadTimeout = 30 * time.Second

// defaultQueuedMaxBytes sizes the request-byte bound from the machine.
func defaultQueuedMaxBytes(maxRequest int32) int64 {
	n := int64(1 << 30)
	if mem := physicalMemory(); mem > 0 {
		n = min(n, mem/8)
	}
	return max(n, int64(maxRequest))
}

// quotaWindow is the rate window in effect (the defaults filled in).
func (c *cfg) quotaWindow() (num int, size time.Duration) {
	num, size = c.quotaWindowNum, c.quotaWindowSize
	if num == 0 {
		num = quota.DefaultWindowNum
	}
	if size == 0 {
		size = quota.DefaultWindowSize
	}
	return num, size
}

// validateQuotaCfg checks and fills the options of this file.
func (c *cfg) validateQuotaCfg() error {
	if c.queuedMaxBytes == 0 {
		c.queuedMaxBytes = defaultQueuedMaxBytes(c.maxRequestBytes)
	}
	if c.queuedMaxBytes < int64(c.maxRequestBytes) {
		return fmt.Errorf("broker: QueuedMaxRequestBytes %d must be at least MaxRequestBytes %d", c.queuedMaxBytes, c.maxRequestBytes)
	}
	if c.requestReadTimeout == 0 {
		c.requestReadTimeout = DefaultRequestReadTimeout
	}
	if c.requestReadTimeout < 0 {
		return fmt.Errorf("broker: RequestReadTimeout %v must be positive", c.requestReadTimeout)
	}
	if c.quotaWindowNum != 0 && c.quotaWindowNum < 2 {
		return fmt.Errorf("broker: quota window count %d must be at least 2", c.quotaWindowNum)
	}
	if c.quotaWindowSize < 0 || (c.quotaWindowSize > 0 && c.quotaWindowSize < time.Millisecond) {
		return fmt.Errorf("broker: quota window size %v must be at least 1ms", c.quotaWindowSize)
	}
	return nil
}

// quotaState is the broker's quota store: the Manager applies the
// quotas, mu serializes their changes with the writes of quotas.json.
type quotaState struct {
	m  *quota.Manager
	mu sync.Mutex // guards changes to m's Set and quotas.json (held across the file write)
}

// openQuotas creates the quota manager and loads quotas.json.
func (b *Broker) openQuotas() error {
	m, err := quota.NewManager(quota.Config{WindowNum: b.cfg.quotaWindowNum, WindowSize: b.cfg.quotaWindowSize})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	b.quotas = &quotaState{m: m}
	b.reqBytes = newByteBudget(b.cfg.queuedMaxBytes)
	data, err := vfs.ReadFile(b.fs, b.layout.QuotasFile())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker: read client quotas: %w", err)
	}
	var s quota.Set
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("broker: %s: %w", b.layout.QuotasFile(), err)
	}
	m.SetQuotas(s)
	return nil
}

// alterQuotas applies ops to e: written durably to quotas.json, then in
// force for the next request.
func (b *Broker) alterQuotas(e quota.Entity, ops []quota.Op, validateOnly bool) error {
	q := b.quotas
	q.mu.Lock()
	defer q.mu.Unlock()
	s, err := q.m.Quotas().With(e, ops)
	if err != nil || validateOnly {
		return err
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(b.fs, b.layout.QuotasFile(), append(data, '\n')); err != nil {
		return storeError{fmt.Errorf("store client quotas (nothing changed): %w", err)}
	}
	q.m.SetQuotas(s)
	return nil
}

// storeError is a failure to write quotas.json (KAFKA_STORAGE_ERROR,
// not the client's fault).
type storeError struct{ error }

func (e storeError) Unwrap() error { return e.error }

func errStored(err error) bool {
	var se storeError
	return errors.As(err, &se)
}

// quotaUser is the user a principal's quotas are set for: its name
// without the "User:" type (Kafka's user entity).
func quotaUser(principal string) string { return strings.TrimPrefix(principal, "User:") }

// throttleRequest counts a served request against its client's quotas
// and returns the throttle: set in the response, and the connection
// muted for it. frameLen is the request's size.
func (c *conn) throttleRequest(r *request, key int16, frameLen int, resp kmsg.Response, took time.Duration) time.Duration {
	m := c.b.quotas.m
	if r.internal || (!m.Any() && r.throttle == 0) {
		return 0 // the path of every request when no quota is set
	}
	user := quotaUser(r.principal)
	var d time.Duration
	switch key {
	case kmsg.Produce.Int16():
		d = m.Record(quota.ProducerByteRate, user, r.clientID, float64(frameLen))
	case kmsg.Fetch.Int16():
		if fr, ok := resp.(*fetchReply); ok && m.Active(quota.ConsumerByteRate) {
			n := 0
			for _, s := range fr.slices {
				n += s.Len()
			}
			d = m.Record(quota.ConsumerByteRate, user, r.clientID, float64(n))
		}
		took -= r.waited
	}
	if m.Active(quota.RequestPercentage) {
		d = max(d, m.Record(quota.RequestPercentage, user, r.clientID, took.Seconds()*100))
	}
	d = max(d, r.throttle)
	if d <= 0 {
		return 0
	}
	ms := int32(min(d.Milliseconds()+1, 1<<31-1))
	inner := resp
	if dr, ok := resp.(*deferredReply); ok {
		inner = dr.Response
	}
	if fr, ok := resp.(*fetchReply); ok {
		inner = fr.FetchResponse
	}
	if t, ok := inner.(kmsg.SetThrottleResponse); ok {
		if cur, _ := inner.(kmsg.ThrottleResponse).Throttle(); cur < ms {
			t.SetThrottle(ms)
		}
	}
	c.b.metrics.throttled.Inc()
	return d
}

// mutationGate is KIP-599's check of controller_mutation_rate before a
// topic of a CreateTopics, CreatePartitions or DeleteTopics is changed:
// while the client's account is in debt, strict (the versions that know
// the error) refuses the topic with THROTTLING_QUOTA_EXCEEDED; older
// versions are served and only throttled. After the change, the caller
// counts the partitions it changed with recordMutations.
func (r *request) mutationGate(strict bool) error {
	if r.internal {
		return nil
	}
	d := r.b.quotas.m.Check(quota.ControllerMutationRate, quotaUser(r.principal), r.clientID)
	if d <= 0 {
		return nil
	}
	r.throttle = max(r.throttle, d)
	if !strict {
		return nil
	}
	return errCode(kerr.ThrottlingQuotaExceeded, "controller_mutation_rate exceeded for this client: retry after %v", d.Round(time.Millisecond))
}

// recordMutations counts n partitions created or deleted; the throttle
// it gives is answered (and the connection muted) by dispatch.
func (r *request) recordMutations(n int) {
	if r.internal || n <= 0 {
		return
	}
	d := r.b.quotas.m.Record(quota.ControllerMutationRate, quotaUser(r.principal), r.clientID, float64(n))
	r.throttle = max(r.throttle, d)
}

// deleteTopicQuota deletes a topic under the mutation quota.
func (r *request) deleteTopicQuota(name string, strict bool) error {
	if err := r.mutationGate(strict); err != nil {
		return err
	}
	n := 0
	if t := r.b.lookup(name); t != nil {
		n = len(t.parts)
	}
	err := r.b.deleteTopic(name)
	if err == nil {
		r.recordMutations(n)
	}
	return err
}

// addPartitionsQuota adds partitions under the mutation quota.
func (r *request) addPartitionsQuota(name string, count int32, validateOnly, strict bool) error {
	if err := r.mutationGate(strict); err != nil {
		return err
	}
	before := 0
	if t := r.b.lookup(name); t != nil {
		before = len(t.parts)
	}
	err := r.b.addPartitions(name, count, validateOnly)
	if err == nil && !validateOnly {
		r.recordMutations(int(count) - before)
	}
	return err
}

// muteFor makes the read loop read nothing from the socket for d (from
// now, or longer if already muted further). Read loop only.
func (c *conn) muteFor(d time.Duration) {
	if until := time.Now().Add(d); until.After(c.mutedUntil) {
		c.mutedUntil = until
	}
}

// waitMuted holds the read loop until the connection's mute ends or the
// broker closes; it reports false when the broker closes.
func (c *conn) waitMuted() bool {
	d := time.Until(c.mutedUntil)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.b.stopCtx.Done():
		return false
	}
}

// Per-entity quota series, computed at each scrape from the accounts the
// quota manager keeps (an account lives while its client is active and
// two rate windows after).
var (
	quotaLabels       = []string{"quota", "user", "client_id"}
	descQuotaLimit    = prometheus.NewDesc("sluice_quota_limit", "The client quota in force for the entity (bytes/s; percent of a request thread; partition mutations/s).", quotaLabels, nil)
	descQuotaRate     = prometheus.NewDesc("sluice_quota_rate", "The entity's measured use over the quota rate window, in the quota's unit.", quotaLabels, nil)
	descQuotaThrottle = prometheus.NewDesc("sluice_quota_throttle_seconds_total", "Throttle time handed to the entity's requests.", quotaLabels, nil)
	descQueuedBytes   = prometheus.NewDesc("sluice_broker_queued_request_bytes", "Bytes of requests read and not yet done with (bounded by QueuedMaxRequestBytes).", nil, nil)
	descQueuedMax     = prometheus.NewDesc("sluice_broker_queued_request_bytes_max", "QueuedMaxRequestBytes: the bound on queued request bytes.", nil, nil)
	descQueuedWaits   = prometheus.NewDesc("sluice_broker_queued_request_waits_total", "Times a connection stopped reading because queued request bytes were at the bound.", nil, nil)
)

// quotaCollector exports the series above.
type quotaCollector struct{ b *Broker }

func (q *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQuotaLimit, descQuotaRate, descQuotaThrottle, descQueuedBytes, descQueuedMax, descQueuedWaits} {
		ch <- d
	}
}

func (q *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range q.b.quotas.m.Stats() {
		l := []string{string(s.Key), s.Who.User, s.Who.Client}
		ch <- prometheus.MustNewConstMetric(descQuotaLimit, prometheus.GaugeValue, s.Limit, l...)
		ch <- prometheus.MustNewConstMetric(descQuotaRate, prometheus.GaugeValue, s.Rate, l...)
		ch <- prometheus.MustNewConstMetric(descQuotaThrottle, prometheus.CounterValue, s.Throttle, l...)
	}
	used, limit, waits := q.b.reqBytes.stats()
	ch <- prometheus.MustNewConstMetric(descQueuedBytes, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(descQueuedMax, prometheus.GaugeValue, float64(limit))
	ch <- prometheus.MustNewConstMetric(descQueuedWaits, prometheus.CounterValue, float64(waits))
}

// QuotaUsage is one quota account's state as the console shows it.
type QuotaUsage struct {
	Quota    string  `json:"quota"`
	User     string  `json:"user,omitempty"`
	ClientID string  `json:"client_id,omitempty"`
	Limit    float64 `json:"limit"`
	Rate     float64 `json:"rate"`
	Throttle float64 `json:"throttle_seconds"`
}

// QuotaEntry is one entity's configured quotas.
type QuotaEntry struct {
	Entity string             `json:"entity"` // "user=alice, client-id=<default>"
	Values map[string]float64 `json:"values"`
}

// ClientQuotas returns the configured quotas and the accounts in use,
// for the console.
func (b *Broker) ClientQuotas() ([]QuotaEntry, []QuotaUsage) {
	s := b.quotas.m.Quotas()
	entries := []QuotaEntry{}
	for _, e := range s.Entities() {
		qe := QuotaEntry{Entity: e.String(), Values: map[string]float64{}}
		for k, v := range s.Values(e) {
			qe.Values[string(k)] = v
		}
		entries = append(entries, qe)
	}
	usage := []QuotaUsage{}
	for _, st := range b.quotas.m.Stats() {
		usage = append(usage, QuotaUsage{Quota: string(st.Key), User: st.Who.User, ClientID: st.Who.Client, Limit: st.Limit, Rate: st.Rate, Throttle: st.Throttle})
	}
	return entries, usage
}
