package broker

import (
	"bytes"
	"compress/gzip"
	"iter"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/encoding/protowire"
)

// alterClientMetrics sets (or, with a nil value, deletes) configs of the
// CLIENT_METRICS resource name and returns the resource's error code.
func alterClientMetrics(t *testing.T, cl *kgo.Client, name string, kv ...*string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = *kv[i], kv[i+1]
		if kv[i+1] == nil {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].ErrorCode
}

// describeClientMetrics returns the configs of CLIENT_METRICS name that
// are set on it (source CLIENT_METRICS_CONFIG).
func describeClientMetrics(t *testing.T, cl *kgo.Client, name string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("DescribeConfigs client metrics %q: %+v, %v", name, resp, err)
	}
	set := map[string]string{}
	names := 0
	for _, c := range resp.Resources[0].Configs {
		names++
		if c.Source == kmsg.ConfigSourceClientMetricsConfig {
			set[c.Name] = *c.Value
		} else if c.Source != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("config %s source %v", c.Name, c.Source)
		}
	}
	if names != 3 {
		t.Fatalf("DescribeConfigs client metrics %q: %d configs, want metrics, interval.ms and match", name, names)
	}
	return set
}

func listClientMetrics(t *testing.T, addr string) []string {
	t.Helper()
	v0 := kmsg.NewPtrListConfigResourcesRequest()
	v0.Version = 0
	resp := dialRaw(t, addr).roundTrip(v0).(*kmsg.ListConfigResourcesResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ListConfigResources v0: code %d", resp.ErrorCode)
	}
	var out []string
	for _, r := range resp.ConfigResources {
		out = append(out, r.Name)
	}
	return out
}

// telemetryValues gathers sluice_client_telemetry_value as metric name
// (and attributes) to value, for the client software sw.
func telemetryValues(t *testing.T, reg *prometheus.Registry, sw string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_client_telemetry_value" {
			continue
		}
		for _, m := range mf.Metric {
			l := labels(m)
			if l["client_software_name"] != sw || l["client_instance_id"] == "" {
				continue
			}
			k := l["metric"]
			if l["attributes"] != "" {
				k += "{" + l["attributes"] + "}"
			}
			out[k] = m.GetGauge().GetValue()
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.Label {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

// TestClientTelemetry: a CLIENT_METRICS subscription is checked,
// described, listed and kept across a restart; a franz-go client that
// matches it pushes its metrics, which /metrics exports with the client's
// instance id; the request checks answer as KIP-714 says.
func TestClientTelemetry(t *testing.T) {
	tb := startTest(t)
	adm := tb.client(kgo.DisableClientMetrics())
	for _, bad := range []struct {
		name string
		kv   []*string
		want *kerr.Error
	}{
		{"bad", []*string{sp("interval.ms"), sp("50")}, kerr.InvalidConfig},
		{"bad", []*string{sp("color"), sp("red")}, kerr.InvalidRequest},
		{"bad", []*string{sp("match"), sp("client_rack=a")}, kerr.InvalidConfig},
		{"bad", []*string{sp("match"), sp("client_id=(")}, kerr.InvalidConfig},
		{"", []*string{sp("metrics"), sp("*")}, kerr.InvalidRequest},
	} {
		if code := alterClientMetrics(t, adm, bad.name, bad.kv...); code != bad.want.Code {
			t.Errorf("%q %s=%s: code %d, want %s", bad.name, *bad.kv[0], *bad.kv[1], code, bad.want.Message)
		}
	}
	if code := alterClientMetrics(t, adm, "kgo-apps", sp("metrics"), sp("org.apache.kafka.producer.,sluice.test."),
		sp("interval.ms"), sp("100"), sp("match"), sp("client_software_name=kgo,client_id=tele-.*")); code != 0 {
		t.Fatalf("alter: code %d", code)
	}
	want := map[string]string{"metrics": "org.apache.kafka.producer.,sluice.test.", "interval.ms": "100", "match": "client_software_name=kgo,client_id=tele-.*"}
	if got := describeClientMetrics(t, adm, "kgo-apps"); !mapsEqual(got, want) {
		t.Fatalf("described %v, want %v", got, want)
	}
	if got := describeClientMetrics(t, adm, "unset"); len(got) != 0 {
		t.Fatalf("a subscription never set describes %v, want defaults only", got)
	}
	if got := listClientMetrics(t, tb.addr); !slices.Equal(got, []string{"kgo-apps"}) {
		t.Fatalf("listed %v", got)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(tb.b.telemetry)
	user := func() iter.Seq[kgo.Metric] {
		return func(yield func(kgo.Metric) bool) {
			_ = yield(kgo.Metric{Name: "sluice.test.gauge", Type: kgo.MetricTypeGauge, ValueInt: 42}) &&
				yield(kgo.Metric{Name: "sluice.test.sum", Type: kgo.MetricTypeSum, ValueInt: 7}) &&
				yield(kgo.Metric{Name: "other.metric", Type: kgo.MetricTypeGauge, ValueInt: 1})
		}
	}
	cl := tb.client(kgo.ClientID("tele-1"), kgo.UserMetricsFn(user), kgo.DefaultProduceTopic("tele"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A client the subscription does not match pushes nothing.
	other := tb.client(kgo.ClientID("other"), kgo.UserMetricsFn(user), kgo.DefaultProduceTopic("tele"))
	if err := other.ProduceSync(t.Context(), &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got map[string]float64
	WaitFor(t, "the client's pushed metrics on /metrics", func() bool {
		got = telemetryValues(t, reg, "kgo")
		return got["sluice.test.gauge"] == 42 && got["sluice.test.sum"] == 7 && got["org.apache.kafka.producer.connection.creation.total"] > 0
	})
	for k := range got {
		if !strings.HasPrefix(k, "sluice.test.") && !strings.HasPrefix(k, "org.apache.kafka.producer.") {
			t.Errorf("exported %q, which the subscription does not ask for", k)
		}
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if l := labels(m); mf.GetName() == "sluice_client_telemetry_value" && l["client_id"] != "tele-1" {
				t.Errorf("exported a value of client %q: %v", l["client_id"], l)
			}
		}
	}

	tb.restart()
	adm = tb.client(kgo.DisableClientMetrics())
	if got := describeClientMetrics(t, adm, "kgo-apps"); !mapsEqual(got, want) {
		t.Fatalf("after a restart described %v, want %v", got, want)
	}
	if code := alterClientMetrics(t, adm, "kgo-apps", sp("metrics"), nil, sp("interval.ms"), nil, sp("match"), nil); code != 0 {
		t.Fatalf("delete: code %d", code)
	}
	tb.restart()
	if got := listClientMetrics(t, tb.addr); len(got) != 0 {
		t.Fatalf("listed %v after deleting every config and a restart", got)
	}
}

// otlpGauge encodes an ExportMetricsServiceRequest holding one gauge per
// name, each with one point of value v and attribute node_id=1.
func otlpGauge(v float64, names ...string) []byte {
	msg := func(b []byte, num protowire.Number, body []byte) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, body)
	}
	var scope []byte
	for _, name := range names {
		var anyv, kv, point, gauge, metric []byte
		anyv = protowire.AppendTag(anyv, 3, protowire.VarintType)
		anyv = protowire.AppendVarint(anyv, 1)
		kv = msg(kv, 1, []byte("node_id"))
		kv = msg(kv, 2, anyv)
		point = msg(point, 7, kv)
		point = protowire.AppendTag(point, 4, protowire.Fixed64Type)
		point = protowire.AppendFixed64(point, math.Float64bits(v))
		gauge = msg(gauge, 1, point)
		metric = msg(metric, 1, []byte(name))
		metric = msg(metric, 5, gauge)
		scope = msg(scope, 2, metric)
	}
	return msg(nil, 1, msg(nil, 2, scope))
}

// TestPushTelemetryChecks drives GetTelemetrySubscriptions and
// PushTelemetry by hand: id assignment, throttling, subscription ids,
// compression, decoding and the server-side metric filter.
func TestPushTelemetryChecks(t *testing.T) {
	tb := startTest(t)
	adm := tb.client(kgo.DisableClientMetrics())
	c := dialRaw(t, tb.addr) // client id raw-test
	reg := prometheus.NewRegistry()
	reg.MustRegister(tb.b.telemetry)

	get := func(id [16]byte) *kmsg.GetTelemetrySubscriptionsResponse {
		req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
		req.ClientInstanceID = id
		return c.roundTrip(req).(*kmsg.GetTelemetrySubscriptionsResponse)
	}
	push := func(id [16]byte, sub int32, codec int8, metrics []byte, terminating bool) int16 {
		req := kmsg.NewPtrPushTelemetryRequest()
		req.ClientInstanceID, req.SubscriptionID, req.CompressionType, req.Metrics, req.Terminating = id, sub, codec, metrics, terminating
		return c.roundTrip(req).(*kmsg.PushTelemetryResponse).ErrorCode
	}
	// No subscription: no metrics, the default interval.
	g := get([16]byte{})
	if g.ErrorCode != 0 || g.ClientInstanceID == ([16]byte{}) || len(g.RequestedMetrics) != 0 || g.PushIntervalMillis != 300000 ||
		g.TelemetryMaxBytes != 1<<20 || !slices.Equal(g.AcceptedCompressionTypes, []int8{4, 3, 1, 2}) {
		t.Fatalf("without a subscription: %+v", g)
	}
	id := g.ClientInstanceID
	if again := get(id); again.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("asking again at once: code %d, want THROTTLING_QUOTA_EXCEEDED", again.ErrorCode)
	}
	if code := push([16]byte{}, g.SubscriptionID, 0, nil, false); code != kerr.InvalidRequest.Code {
		t.Fatalf("push without an instance id: code %d", code)
	}

	// A subscription matching this client: the next push learns that
	// its subscription changed.
	if code := alterClientMetrics(t, adm, "raw", sp("metrics"), sp("keep."), sp("interval.ms"), sp("100"), sp("match"), sp("client_id=raw-test")); code != 0 {
		t.Fatalf("alter: code %d", code)
	}
	if code := push(id, g.SubscriptionID, 0, nil, false); code != kerr.UnknownSubscriptionID.Code {
		t.Fatalf("push on the old subscription: code %d, want UNKNOWN_SUBSCRIPTION_ID", code)
	}
	g = get(id)
	if g.ErrorCode != 0 || g.ClientInstanceID != id || !slices.Equal(g.RequestedMetrics, []string{"keep."}) || g.PushIntervalMillis != 100 {
		t.Fatalf("with the subscription: %+v", g)
	}
	if code := push(id, g.SubscriptionID, 9, []byte{1}, false); code != kerr.UnsupportedCompressionType.Code {
		t.Fatalf("push with codec 9: code %d", code)
	}
	WaitFor(t, "a push once the interval elapsed", func() bool {
		code := push(id, g.SubscriptionID, 0, []byte("not protobuf \xff\xff\xff"), false)
		if code == kerr.ThrottlingQuotaExceeded.Code {
			return false
		}
		if code != kerr.InvalidRecord.Code {
			t.Fatalf("push of garbage: code %d, want INVALID_RECORD", code)
		}
		return true
	})
	// Compressed, and filtered by the subscription on the broker's side.
	compressed, err := compressForTest(otlpGauge(2.5, "keep.me", "drop.me"))
	if err != nil {
		t.Fatal(err)
	}
	var code int16
	WaitFor(t, "a compressed push", func() bool {
		code = push(id, g.SubscriptionID, 1, compressed, false)
		return code != kerr.ThrottlingQuotaExceeded.Code
	})
	if code != 0 {
		t.Fatalf("gzip push: code %d", code)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, mf := range mfs {
		if mf.GetName() != "sluice_client_telemetry_value" {
			continue
		}
		for _, m := range mf.Metric {
			l := labels(m)
			values = append(values, l["metric"]+"{"+l["attributes"]+"}")
			if l["client_id"] != "raw-test" || l["client_instance_id"] != kafkaUUID(id) || m.GetGauge().GetValue() != 2.5 {
				t.Errorf("exported %v = %v", l, m.GetGauge().GetValue())
			}
		}
	}
	if !slices.Equal(values, []string{"keep.me{node_id=1}"}) {
		t.Fatalf("exported %v, want keep.me{node_id=1} alone", values)
	}
	// The terminating push is taken at once; nothing after it.
	if code := push(id, g.SubscriptionID, 0, nil, true); code != 0 {
		t.Fatalf("terminating push: code %d", code)
	}
	if code := push(id, g.SubscriptionID, 0, nil, true); code != kerr.InvalidRequest.Code {
		t.Fatalf("push after the terminating one: code %d, want INVALID_REQUEST", code)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func compressForTest(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	err := w.Close()
	return buf.Bytes(), err
}
