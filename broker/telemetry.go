package broker

// Client telemetry (KIP-714): the subscriptions configured as
// CLIENT_METRICS config resources, the client instances that asked for
// theirs (GetTelemetrySubscriptions), and the metrics they push
// (PushTelemetry), exported on the broker's Registerer as
// sluice_client_telemetry_value.
//
// A subscription has three configs, as in Kafka: metrics (a list of
// metric-name prefixes, "*" for all, empty for none), interval.ms (the
// push interval, 100 to 3600000, default 300000) and match (a list of
// key=regex, all of which must match the whole value; keys
// client_instance_id, client_id, client_software_name,
// client_software_version, client_source_address, client_source_port;
// empty matches every client). A client gets the union of the metrics
// of every subscription it matches, at the shortest of their intervals;
// with none it gets no metrics and asks again after the default interval,
// so telemetry costs nothing until a subscription is configured.
//
// Subscriptions are kept in DATA/client-metrics.json (meta.ClientMetrics,
// written atomically and fsynced before IncrementalAlterConfigs answers).
// Client instances and their values live in memory, bounded: at most
// telemetryMaxInstances instances (the least recently heard from is
// forgotten first, and any not heard from for three push intervals, at
// least a minute) and telemetryMaxSeries exported values (further ones
// are dropped and counted).

import (
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"net"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/meta"
)

// The CLIENT_METRICS configs and their bounds (Kafka's ClientMetricsConfigs).
const (
	cmMetrics  = "metrics"
	cmInterval = "interval.ms"
	cmMatch    = "match"

	cmDefaultIntervalMs = 300000
	cmMinIntervalMs     = 100
	cmMaxIntervalMs     = 3600000
)

// cmMatchKeys are the client attributes a match rule may name.
var cmMatchKeys = []string{"client_instance_id", "client_id", "client_software_name",
	"client_software_version", "client_source_address", "client_source_port"}

// Limits of client telemetry.
const (
	telemetryMaxBytes     = 1 << 20 // largest push accepted (Kafka's telemetry.max.bytes default)
	telemetryMaxInstances = 1000    // client instances remembered
	telemetryMaxSeries    = 10000   // values exported, over all instances
	telemetryMinTTL       = time.Minute
)

// telemetryCodecs are the compression types pushes may use besides none,
// in Kafka's order of preference.
var telemetryCodecs = []int8{int8(batch.CodecZstd), int8(batch.CodecLZ4), int8(batch.CodecGzip), int8(batch.CodecSnappy)}

// subscription is one parsed CLIENT_METRICS resource.
type subscription struct {
	name       string
	metrics    []string // prefixes; "*" subscribes every metric
	intervalMs int32
	match      []matchRule
}

type matchRule struct {
	key string
	re  *regexp.Regexp
}

// parseSubscription checks the configs of the CLIENT_METRICS resource
// name as Kafka does: an unknown config is INVALID_REQUEST, a bad value
// INVALID_CONFIG.
func parseSubscription(name string, m map[string]string) (subscription, error) {
	s := subscription{name: name, intervalMs: cmDefaultIntervalMs}
	if name == "" {
		return s, errCode(kerr.InvalidRequest, "a client metrics subscription needs a name")
	}
	for k, v := range m {
		switch k {
		case cmMetrics:
			s.metrics = splitList(v)
		case cmInterval:
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || n < cmMinIntervalMs || n > cmMaxIntervalMs {
				return s, errCode(kerr.InvalidConfig, "interval.ms %q must be an integer from %d to %d", v, cmMinIntervalMs, cmMaxIntervalMs)
			}
			s.intervalMs = int32(n)
		case cmMatch:
			for _, rule := range splitList(v) {
				key, pat, ok := strings.Cut(rule, "=")
				key = strings.TrimSpace(key)
				if !ok || !slices.Contains(cmMatchKeys, key) {
					return s, errCode(kerr.InvalidConfig, "match %q must be key=regex with key one of %s", rule, strings.Join(cmMatchKeys, ", "))
				}
				re, err := regexp.Compile("^(?:" + pat + ")$")
				if err != nil {
					return s, errCode(kerr.InvalidConfig, "match %q: %v", rule, err)
				}
				s.match = append(s.match, matchRule{key, re})
			}
		default:
			return s, errCode(kerr.InvalidRequest, "unknown client metrics config %q (known: metrics, interval.ms, match)", k)
		}
	}
	return s, nil
}

// clientAttrs are what match rules are checked against.
type clientAttrs map[string]string

func (s *subscription) matches(a clientAttrs) bool {
	for _, r := range s.match {
		if !r.re.MatchString(a[r.key]) {
			return false
		}
	}
	return true
}

// kafkaUUID renders an id as Kafka's Uuid.toString does (URL-safe
// base64, unpadded), the form Kafka's tools show client instance ids in.
func kafkaUUID(u [16]byte) string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// clientInstance is one client's telemetry state.
type clientInstance struct {
	id            string // kafkaUUID
	clientID      string
	software      string
	version       uint64   // the subscriptions' version it was matched against
	subID         int32    // its subscription id
	metrics       []string // requested metrics: nil none, [""] all, else prefixes
	intervalMs    int32
	lastGet       int64 // ms; 0: none since matched
	lastPush      int64
	terminating   bool
	seen          time.Time
	gauges, sums  map[seriesKey]float64
	lastKnownCode int16 // the error of its last push
}

type seriesKey struct{ metric, attrs string }

func (ci *clientInstance) series() int { return len(ci.gauges) + len(ci.sums) }

func (ci *clientInstance) ttl() time.Duration {
	return max(3*time.Duration(ci.intervalMs)*time.Millisecond, telemetryMinTTL)
}

// wants reports whether the instance's subscription asks for metric.
func (ci *clientInstance) wants(metric string) bool {
	for _, p := range ci.metrics {
		if strings.HasPrefix(metric, p) {
			return true
		}
	}
	return false
}

// telemetry is the broker's client telemetry state.
type telemetry struct {
	b *Broker

	mu        sync.Mutex // guards the fields below (held while client-metrics.json is written)
	raw       map[string]map[string]string
	subs      []subscription // sorted by name
	version   uint64         // raised at every change of subs
	instances map[[16]byte]*clientInstance
	series    int // values held over all instances

	pushes  *prometheus.CounterVec
	dropped prometheus.Counter
	value   *prometheus.Desc
	count   *prometheus.Desc
}

func newTelemetry(b *Broker) *telemetry {
	return &telemetry{
		b:         b,
		instances: map[[16]byte]*clientInstance{},
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "client_telemetry", Name: "pushes_total",
			Help: "PushTelemetry requests by result: ok or the Kafka error name.",
		}, []string{"result"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "client_telemetry", Name: "series_dropped_total",
			Help: "Pushed values not exported because sluice_client_telemetry_value held its maximum of series.",
		}),
		value: prometheus.NewDesc("sluice_client_telemetry_value",
			"The last value a client pushed of a metric its telemetry subscription asks for (KIP-714): gauges as pushed, sums cumulative.",
			[]string{"client_instance_id", "client_id", "client_software_name", "metric", "attributes"}, nil),
		count: prometheus.NewDesc("sluice_client_telemetry_instances",
			"Client instances with telemetry state (they asked for a subscription and were heard from lately).", nil, nil),
	}
}

// load reads client-metrics.json (absent: no subscription).
func (t *telemetry) load() error {
	c, err := t.b.layout.ReadClientMetrics(t.b.fs)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	subs := make([]subscription, 0, len(c.Subscriptions))
	for name, m := range c.Subscriptions {
		s, err := parseSubscription(name, m)
		if err != nil {
			return fmt.Errorf("broker: %s: subscription %q: %w", t.b.layout.ClientMetricsFile(), name, err)
		}
		subs = append(subs, s)
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].name < subs[j].name })
	t.mu.Lock()
	t.raw, t.subs = c.Subscriptions, subs
	t.version++
	t.mu.Unlock()
	return nil
}

// configs returns a copy of the configs set on subscription name.
func (t *telemetry) configs(name string) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for k, v := range t.raw[name] {
		out[k] = v
	}
	return out
}

// names lists the subscriptions, sorted.
func (t *telemetry) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, len(t.subs))
	for i, s := range t.subs {
		out[i] = s.name
	}
	return out
}

// alter changes subscription name's configs: edit returns the new set
// from the current one. The result is checked, written to
// client-metrics.json (fsynced) and applied: every client instance is
// matched again at its next request. No config left removes the
// subscription.
func (t *telemetry) alter(name string, edit configEdit, validateOnly bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := map[string]string{}
	for k, v := range t.raw[name] {
		cur[k] = v
	}
	defaults := map[string]string{cmMetrics: "", cmInterval: strconv.Itoa(cmDefaultIntervalMs), cmMatch: ""}
	next, err := edit(cur, func(k string) string {
		if v, ok := cur[k]; ok {
			return v
		}
		return defaults[k]
	})
	if err != nil {
		return err
	}
	s, err := parseSubscription(name, next)
	if err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	raw := map[string]map[string]string{}
	for k, v := range t.raw {
		raw[k] = v
	}
	subs := slices.DeleteFunc(slices.Clone(t.subs), func(x subscription) bool { return x.name == name })
	if len(next) == 0 {
		delete(raw, name)
	} else {
		raw[name] = next
		subs = append(subs, s)
		sort.Slice(subs, func(i, j int) bool { return subs[i].name < subs[j].name })
	}
	if err := t.b.layout.WriteClientMetrics(t.b.fs, meta.ClientMetrics{Subscriptions: raw}); err != nil {
		return errCode(kerr.KafkaStorageError, "persist client metrics subscriptions: %v", err)
	}
	t.raw, t.subs = raw, subs
	t.version++
	t.b.cfg.logger.Info("client metrics subscription altered", "name", name, "configs", next)
	return nil
}

// instanceLocked returns the state of client instance id, created or
// matched again against the subscriptions if they changed; attrs
// describe the client. t.mu is held.
func (t *telemetry) instanceLocked(id [16]byte, attrs func() clientAttrs, now time.Time) *clientInstance {
	ci := t.instances[id]
	if ci != nil && ci.version == t.version {
		ci.seen = now
		return ci
	}
	if ci == nil {
		t.sweepLocked(now)
	}
	a := attrs()
	a["client_instance_id"] = kafkaUUID(id)
	next := &clientInstance{id: a["client_instance_id"], clientID: a["client_id"], software: a["client_software_name"],
		version: t.version, intervalMs: cmDefaultIntervalMs, seen: now}
	if ci != nil {
		// Re-matched: values already pushed stay exported.
		next.gauges, next.sums, next.terminating = ci.gauges, ci.sums, ci.terminating
	}
	interval := int32(math.MaxInt32)
	all := false
	set := map[string]bool{}
	for i := range t.subs {
		s := &t.subs[i]
		if !s.matches(a) {
			continue
		}
		interval = min(interval, s.intervalMs)
		for _, m := range s.metrics {
			if m == "*" {
				all = true
			}
			set[m] = true
		}
	}
	if interval != math.MaxInt32 {
		next.intervalMs = interval
	}
	switch {
	case all:
		next.metrics = []string{""}
	case len(set) > 0:
		for m := range set {
			next.metrics = append(next.metrics, m)
		}
		sort.Strings(next.metrics)
	}
	h := crc32.NewIEEE()
	fmt.Fprintf(h, "%d|%s", next.intervalMs, strings.Join(next.metrics, ","))
	next.subID = int32(h.Sum32())
	// Values the new subscription no longer asks for go.
	for k := range next.gauges {
		if !next.wants(k.metric) {
			delete(next.gauges, k)
			t.series--
		}
	}
	for k := range next.sums {
		if !next.wants(k.metric) {
			delete(next.sums, k)
			t.series--
		}
	}
	t.instances[id] = next
	return next
}

// sweepLocked forgets instances not heard from for their TTL, and the
// least recently heard from while more than telemetryMaxInstances-1 are
// kept, making room for one. t.mu is held.
func (t *telemetry) sweepLocked(now time.Time) {
	var oldest [16]byte
	var oldestSeen time.Time
	for id, ci := range t.instances {
		if now.Sub(ci.seen) > ci.ttl() {
			t.dropLocked(id)
			continue
		}
		if oldestSeen.IsZero() || ci.seen.Before(oldestSeen) {
			oldest, oldestSeen = id, ci.seen
		}
	}
	if len(t.instances) >= telemetryMaxInstances {
		t.dropLocked(oldest)
	}
}

func (t *telemetry) dropLocked(id [16]byte) {
	if ci := t.instances[id]; ci != nil {
		t.series -= ci.series()
		delete(t.instances, id)
	}
}

// subscriptionFor answers GetTelemetrySubscriptions: id is the client's
// instance id (zero: assign one).
func (t *telemetry) subscriptionFor(resp *kmsg.GetTelemetrySubscriptionsResponse, id [16]byte, attrs func() clientAttrs) {
	if id == ([16]byte{}) {
		id = newUUID()
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	ci := t.instanceLocked(id, attrs, now)
	ms := now.UnixMilli()
	if ms-max(ci.lastGet, ci.lastPush) < int64(ci.intervalMs) &&
		ci.lastKnownCode != kerr.UnknownSubscriptionID.Code && ci.lastKnownCode != kerr.UnsupportedCompressionType.Code {
		resp.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
		return
	}
	ci.lastGet, ci.lastKnownCode = ms, 0
	resp.ClientInstanceID = id
	resp.SubscriptionID = ci.subID
	resp.AcceptedCompressionTypes = telemetryCodecs
	resp.PushIntervalMillis = ci.intervalMs
	resp.TelemetryMaxBytes = telemetryMaxBytes
	resp.DeltaTemporality = false // cumulative sums: exported as they come
	resp.RequestedMetrics = slices.Clone(ci.metrics)
}

// push answers PushTelemetry: it checks the request against the
// instance's subscription, then decodes and keeps the metrics.
func (t *telemetry) push(req *kmsg.PushTelemetryRequest, attrs func() clientAttrs) error {
	if req.ClientInstanceID == ([16]byte{}) {
		return t.counted(errCode(kerr.InvalidRequest, "PushTelemetry needs the client instance id GetTelemetrySubscriptions gave"))
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	ci := t.instanceLocked(req.ClientInstanceID, attrs, now)
	err := t.checkPushLocked(ci, req, now.UnixMilli())
	ci.lastKnownCode = codeOf(err)
	if err != nil {
		return t.counted(err)
	}
	if req.Terminating {
		ci.terminating = true
	}
	if len(ci.metrics) == 0 || len(req.Metrics) == 0 {
		return t.counted(nil)
	}
	raw := req.Metrics
	if req.CompressionType != int8(batch.CodecNone) {
		var derr error
		if raw, derr = batch.Decompress(req.Metrics, batch.Codec(req.CompressionType), 16*telemetryMaxBytes); derr != nil {
			return t.counted(errCode(kerr.InvalidRecord, "the pushed metrics do not decompress: %v", derr))
		}
	}
	gauges := map[seriesKey]float64{}
	sums := map[seriesKey]float64{}
	var deltas []seriesKey
	err = decodeOTLP(raw, ci.wants, func(metric, attrs string, v float64, sum, delta bool) {
		k := seriesKey{metric, attrs}
		switch {
		case !sum:
			gauges[k] = v
		case delta:
			sums[k] += v
			deltas = append(deltas, k)
		default:
			sums[k] = v
		}
	})
	if err != nil {
		return t.counted(errCode(kerr.InvalidRecord, "the pushed metrics are not an OpenTelemetry ExportMetricsServiceRequest: %v", err))
	}
	t.storeLocked(ci, gauges, sums, deltas)
	return t.counted(nil)
}

func (t *telemetry) checkPushLocked(ci *clientInstance, req *kmsg.PushTelemetryRequest, ms int64) error {
	switch {
	case ci.terminating:
		return errCode(kerr.InvalidRequest, "client instance %s already sent its terminating push", ci.id)
	case req.SubscriptionID != ci.subID:
		return errCode(kerr.UnknownSubscriptionID, "subscription %d is not client instance %s's (%d): get the subscription again", req.SubscriptionID, ci.id, ci.subID)
	}
	if !req.Terminating {
		ok := ci.lastGet > ci.lastPush || ms-max(ci.lastGet, ci.lastPush) >= int64(ci.intervalMs)
		if !ok {
			return errCode(kerr.ThrottlingQuotaExceeded, "client instance %s pushed before its push interval of %d ms elapsed", ci.id, ci.intervalMs)
		}
	}
	ci.lastPush = ms
	switch {
	case req.CompressionType != int8(batch.CodecNone) && !slices.Contains(telemetryCodecs, req.CompressionType):
		return errCode(kerr.UnsupportedCompressionType, "compression type %d is not one of those offered", req.CompressionType)
	case len(req.Metrics) > telemetryMaxBytes:
		return errCode(kerr.TelemetryTooLarge, "pushed %d bytes of metrics, more than the %d offered", len(req.Metrics), telemetryMaxBytes)
	}
	return nil
}

// storeLocked replaces ci's gauges and updates its sums, within the
// series bound. t.mu is held.
func (t *telemetry) storeLocked(ci *clientInstance, gauges, sums map[seriesKey]float64, deltas []seriesKey) {
	t.series -= len(ci.gauges)
	old := ci.gauges
	ci.gauges = make(map[seriesKey]float64, len(gauges))
	for k, v := range gauges {
		if _, had := old[k]; !had && t.series >= telemetryMaxSeries {
			t.dropped.Inc()
			continue
		}
		ci.gauges[k] = v
		t.series++
	}
	if ci.sums == nil {
		ci.sums = map[seriesKey]float64{}
	}
	isDelta := map[seriesKey]bool{}
	for _, k := range deltas {
		isDelta[k] = true
	}
	for k, v := range sums {
		prev, had := ci.sums[k]
		if !had && t.series >= telemetryMaxSeries {
			t.dropped.Inc()
			continue
		}
		if !had {
			t.series++
		}
		if isDelta[k] {
			v += prev
		}
		ci.sums[k] = v
	}
}

// counted counts a push's result and returns err.
func (t *telemetry) counted(err error) error {
	result := "ok"
	if err != nil {
		result = "UNKNOWN_SERVER_ERROR"
		if e, ok := kerr.ErrorForCode(codeOf(err)).(*kerr.Error); ok {
			result = e.Message
		}
	}
	t.pushes.WithLabelValues(result).Inc()
	return err
}

// Describe and Collect make telemetry a prometheus.Collector.
func (t *telemetry) Describe(ch chan<- *prometheus.Desc) {
	t.pushes.Describe(ch)
	t.dropped.Describe(ch)
	ch <- t.value
	ch <- t.count
}

func (t *telemetry) Collect(ch chan<- prometheus.Metric) {
	t.pushes.Collect(ch)
	t.dropped.Collect(ch)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id, ci := range t.instances {
		if now.Sub(ci.seen) > ci.ttl() {
			t.dropLocked(id)
			continue
		}
		n++
		for _, m := range []map[seriesKey]float64{ci.gauges, ci.sums} {
			for k, v := range m {
				ch <- prometheus.MustNewConstMetric(t.value, prometheus.GaugeValue, v, ci.id, ci.clientID, ci.software, k.metric, k.attrs)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(t.count, prometheus.GaugeValue, float64(n))
}

// requestAttrs describes the client of r for match rules.
func requestAttrs(r *request) func() clientAttrs {
	return func() clientAttrs {
		a := clientAttrs{"client_id": r.clientID, "client_source_address": r.host}
		if r.c != nil {
			a["client_software_name"], a["client_software_version"] = r.c.softwareName, r.c.softwareVersion
			if _, port, err := net.SplitHostPort(r.c.nc.RemoteAddr().String()); err == nil {
				a["client_source_port"] = port
			}
		}
		return a
	}
}

// decodeOTLP walks an OpenTelemetry ExportMetricsServiceRequest
// (opentelemetry-proto metrics/v1, as KIP-714 clients push it) and calls
// emit for each number data point of the gauges and sums whose name keep
// accepts; attrs are the point's attributes as sorted k=v pairs joined by
// commas. Histograms and summaries are skipped.
func decodeOTLP(b []byte, keep func(string) bool, emit func(metric, attrs string, v float64, sum, delta bool)) error {
	return walkPB(b, func(f pbField) error { // ExportMetricsServiceRequest
		if f.num != 1 || f.typ != protowire.BytesType {
			return nil
		}
		return walkPB(f.bytes, func(f pbField) error { // ResourceMetrics
			if f.num != 2 || f.typ != protowire.BytesType {
				return nil
			}
			return walkPB(f.bytes, func(f pbField) error { // ScopeMetrics
				if f.num != 2 || f.typ != protowire.BytesType {
					return nil
				}
				return decodeMetric(f.bytes, keep, emit)
			})
		})
	})
}

func decodeMetric(b []byte, keep func(string) bool, emit func(metric, attrs string, v float64, sum, delta bool)) error {
	var name string
	var data []byte
	var isSum bool
	err := walkPB(b, func(f pbField) error {
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			name = string(f.bytes)
		case (f.num == 5 || f.num == 7) && f.typ == protowire.BytesType: // gauge, sum
			data, isSum = f.bytes, f.num == 7
		}
		return nil
	})
	if err != nil || data == nil || !keep(name) {
		return err
	}
	var points [][]byte
	delta := false
	if err := walkPB(data, func(f pbField) error {
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			points = append(points, f.bytes)
		case f.num == 2 && f.typ == protowire.VarintType && isSum:
			delta = f.u == 1 // AGGREGATION_TEMPORALITY_DELTA
		}
		return nil
	}); err != nil {
		return err
	}
	for _, p := range points {
		var attrs []string
		v, has := 0.0, false
		if err := walkPB(p, func(f pbField) error { // NumberDataPoint
			switch {
			case f.num == 7 && f.typ == protowire.BytesType:
				kv, err := decodeKeyValue(f.bytes)
				if err != nil {
					return err
				}
				attrs = append(attrs, kv)
			case f.num == 4 && f.typ == protowire.Fixed64Type:
				v, has = math.Float64frombits(f.u), true
			case f.num == 6 && f.typ == protowire.Fixed64Type:
				v, has = float64(int64(f.u)), true
			}
			return nil
		}); err != nil {
			return err
		}
		if has {
			sort.Strings(attrs)
			emit(name, strings.Join(attrs, ","), v, isSum, delta)
		}
	}
	return nil
}

// decodeKeyValue renders an OTLP KeyValue as key=value.
func decodeKeyValue(b []byte) (string, error) {
	var key, val string
	err := walkPB(b, func(f pbField) error {
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			key = string(f.bytes)
		case f.num == 2 && f.typ == protowire.BytesType: // AnyValue
			return walkPB(f.bytes, func(f pbField) error {
				switch {
				case f.num == 1 && f.typ == protowire.BytesType:
					val = string(f.bytes)
				case f.num == 2 && f.typ == protowire.VarintType:
					val = strconv.FormatBool(f.u != 0)
				case f.num == 3 && f.typ == protowire.VarintType:
					val = strconv.FormatInt(int64(f.u), 10)
				case f.num == 4 && f.typ == protowire.Fixed64Type:
					val = strconv.FormatFloat(math.Float64frombits(f.u), 'g', -1, 64)
				}
				return nil
			})
		}
		return nil
	})
	return key + "=" + val, err
}

// pbField is one field of a protobuf message: its number and wire type,
// and its value (bytes for length-delimited fields, u for the others).
type pbField struct {
	num   protowire.Number
	typ   protowire.Type
	bytes []byte
	u     uint64
}

// walkPB calls f for each field of the protobuf message b.
func walkPB(b []byte, f func(pbField) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		fl := pbField{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			fl.u, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			fl.u, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			fl.u = uint64(v)
		case protowire.BytesType:
			fl.bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(fl); err != nil {
			return err
		}
	}
	return nil
}
