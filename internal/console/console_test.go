package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t, envOpt{})
	if code, body := e.get(t, "/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body := e.get(t, "/readyz"); code != 200 || strings.TrimSpace(body) != "ready" {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	// A readiness check that fails (as the disk guard does when it trips)
	// turns /readyz into 503 with its reason, and back when it clears.
	tripped := true
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	e.b.AddReadinessCheck("disk guard", func() error {
		<-mu
		defer func() { mu <- struct{}{} }()
		if tripped {
			return errors.New("free space 1% is below 5%")
		}
		return nil
	})
	code, body := e.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "disk guard: free space 1% is below 5%") {
		t.Fatalf("/readyz with a tripped check = %d %q", code, body)
	}
	var ci clusterInfo
	e.getJSON(t, "/api/v1/cluster", &ci)
	if ci.Ready || !strings.Contains(ci.ReadyError, "disk guard") {
		t.Fatalf("cluster ready=%v %q", ci.Ready, ci.ReadyError)
	}
	<-mu
	tripped = false
	mu <- struct{}{}
	if code, _ := e.get(t, "/readyz"); code != 200 {
		t.Fatalf("/readyz after the check cleared = %d", code)
	}
	// Shutting down is not ready either; /healthz stays up.
	e.b.Close()
	if code, body := e.get(t, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("/readyz after Close = %d %q", code, body)
	}
	if code, _ := e.get(t, "/healthz"); code != 200 {
		t.Fatalf("/healthz after Close = %d", code)
	}
}

// scrape parses /metrics.
func scrape(t *testing.T, e *env) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := e.get(t, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the value of the series of family name with exactly
// the given labels, and whether it exists.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		if len(m.Label) != len(labels)/2 {
			continue
		}
		match := true
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func TestMetricsAfterKnownProduce(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "orders", 3)
	e.createTopic(t, "audit", 1)
	counts := map[int32]int{0: 5, 1: 7, 2: 0}
	for p, n := range counts {
		if n > 0 {
			e.produce(t, "orders", p, n)
		}
	}
	e.produce(t, "audit", 0, 2)
	e.commit(t, "billing", "orders", map[int32]int64{0: 2, 1: 7})

	fams := scrape(t, e)
	want := func(name string, w float64, labels ...string) {
		t.Helper()
		got, ok := value(fams, name, labels...)
		if !ok || got != w {
			t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, w)
		}
	}
	want("sluice_topic_records_in_total", 12, "topic", "orders")
	want("sluice_topic_records_in_total", 2, "topic", "audit")
	want("sluice_records_in_total", 14)
	want("sluice_topic_partitions", 3, "topic", "orders")
	want("sluice_topic_records", 12, "topic", "orders")
	for p, n := range counts {
		ps := fmt.Sprint(p)
		want("sluice_partition_records_in_total", float64(n), "topic", "orders", "partition", ps)
		want("sluice_partition_log_end_offset", float64(n), "topic", "orders", "partition", ps)
		want("sluice_partition_log_start_offset", 0, "topic", "orders", "partition", ps)
		want("sluice_partition_log_segments", 1, "topic", "orders", "partition", ps)
	}
	// Bytes in: the per-partition counters add up to the topic's, and
	// the log holds exactly the bytes accepted.
	var sum float64
	for p := range counts {
		v, _ := value(fams, "sluice_partition_bytes_in_total", "topic", "orders", "partition", fmt.Sprint(p))
		sum += v
	}
	want("sluice_topic_bytes_in_total", sum, "topic", "orders")
	want("sluice_topic_log_size_bytes", sum, "topic", "orders")
	if sum == 0 {
		t.Error("no bytes in")
	}
	want("sluice_group_lag", 3, "group", "billing", "topic", "orders", "partition", "0")
	want("sluice_group_lag", 0, "group", "billing", "topic", "orders", "partition", "1")
	want("sluice_group_topic_lag", 3, "group", "billing", "topic", "orders")
	want("sluice_group_lag_total", 3, "group", "billing")
	want("sluice_build_info", 1, "version", broker.Version(), "goversion", broker.GoVersion())
	want("sluice_ready", 1)
	if v, ok := value(fams, "sluice_disk_free_bytes"); !ok || v <= 0 {
		t.Errorf("sluice_disk_free_bytes = %v, %v", v, ok)
	}
	// The shared write-ahead log (on by default) carried at least the
	// first append: nothing had been alone in a round before it.
	for _, name := range []string{"sluice_wal_rounds_total", "sluice_wal_entries_total", "sluice_wal_bytes_total", "sluice_wal_round_seconds_total", "sluice_wal_size_bytes"} {
		if v, ok := value(fams, name); !ok || v <= 0 {
			t.Errorf("%s = %v (present %v), want > 0", name, v, ok)
		}
	}
	// A fresh data directory has no retired segment to reuse: the
	// first segment was created and zeroed.
	if v, ok := value(fams, "sluice_wal_segments_prepared_total", "how", "zeroed"); !ok || v < 1 {
		t.Errorf("sluice_wal_segments_prepared_total{how=zeroed} = %v (present %v), want >= 1", v, ok)
	}
	if _, ok := value(fams, "sluice_wal_segments_prepared_total", "how", "reused"); !ok {
		t.Error("sluice_wal_segments_prepared_total{how=reused} missing")
	}
	if v, ok := value(fams, "sluice_wal_failed_rounds_total"); !ok || v != 0 {
		t.Errorf("sluice_wal_failed_rounds_total = %v (present %v), want 0", v, ok)
	}
	if f := fams["sluice_broker_request_seconds"]; f == nil || len(f.Metric) == 0 {
		t.Error("no request latency histogram")
	}

	// Fetch every record of orders/1 once: records out count them.
	cl := e.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {1: kgo.NewOffset().AtStart()}}))
	for got := 0; got < 7; {
		fs := cl.PollFetches(context.Background())
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	cl.Close()
	fams = scrape(t, e)
	want("sluice_partition_records_out_total", 7, "topic", "orders", "partition", "1")
	want("sluice_topic_records_out_total", 7, "topic", "orders")
	bin, _ := value(fams, "sluice_partition_bytes_in_total", "topic", "orders", "partition", "1")
	want("sluice_partition_bytes_out_total", bin, "topic", "orders", "partition", "1")
}

func TestMetricsWithoutPartitionSeries(t *testing.T) {
	e := newEnv(t, envOpt{brokerOpts: []broker.Opt{broker.PartitionMetrics(false)}})
	e.createTopic(t, "orders", 4)
	e.produce(t, "orders", 2, 3)
	e.commit(t, "g", "orders", map[int32]int64{2: 1})
	fams := scrape(t, e)
	for name := range fams {
		if strings.HasPrefix(name, "sluice_partition_") || name == "sluice_group_lag" {
			t.Errorf("per-partition family %s present", name)
		}
	}
	if v, _ := value(fams, "sluice_topic_records_in_total", "topic", "orders"); v != 3 {
		t.Errorf("topic records in = %v", v)
	}
	if v, _ := value(fams, "sluice_group_topic_lag", "group", "g", "topic", "orders"); v != 2 {
		t.Errorf("group topic lag = %v", v)
	}
}

func TestAPIReads(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "orders", 2)
	e.createTopic(t, "payments", 1)
	recs := e.produce(t, "orders", 1, 30)
	e.commit(t, "billing", "orders", map[int32]int64{1: 10})

	var topics struct {
		Topics []topicRow
		Total  int
	}
	e.getJSON(t, "/api/v1/topics?q=ORD", &topics)
	if topics.Total != 1 || len(topics.Topics) != 1 || topics.Topics[0].Name != "orders" || topics.Topics[0].Records != 30 || topics.Topics[0].Partitions != 2 {
		t.Fatalf("topics?q=ORD = %+v", topics)
	}
	var one struct {
		Topic   broker.TopicInfo
		Records int64
	}
	e.getJSON(t, "/api/v1/topics/orders", &one)
	if one.Records != 30 || len(one.Topic.Partitions) != 2 || one.Topic.Partitions[1].HighWatermark != 30 {
		t.Fatalf("topic = %+v", one)
	}
	if one.Topic.Config("cleanup.policy") != "delete" {
		t.Fatalf("configs = %+v", one.Topic.Configs)
	}

	var page recordsPage
	e.getJSON(t, "/api/v1/topics/orders/partitions/1/records?limit=5", &page)
	checkPage(t, page, recs, 25, 5)
	e.getJSON(t, "/api/v1/topics/orders/partitions/1/records?limit=10&offset=3", &page)
	checkPage(t, page, recs, 3, 10)
	if page.NextOffset != 13 {
		t.Fatalf("next offset = %d", page.NextOffset)
	}
	e.getJSON(t, "/api/v1/topics/orders/partitions/1/records?offset=0&limit=100", &page)
	checkPage(t, page, recs, 0, 30)
	// By time: ListOffsets finds the record, or for a compressed batch
	// (franz-go compresses by default) the batch holding it.
	e.getJSON(t, fmt.Sprintf("/api/v1/topics/orders/partitions/1/records?timestamp=%d&limit=2", recs[4].Timestamp.UnixMilli()), &page)
	if len(page.Records) != 2 || page.From > 4 || page.Records[0].Offset != page.From {
		t.Fatalf("by timestamp: %+v", page)
	}
	e.getJSON(t, fmt.Sprintf("/api/v1/topics/orders/partitions/1/records?timestamp=%d", recs[29].Timestamp.UnixMilli()+1), &page)
	if len(page.Records) != 0 || page.From != 30 {
		t.Fatalf("after the last timestamp: %+v", page)
	}
	e.getJSON(t, "/api/v1/topics/orders/partitions/1/records?timestamp=0&limit=1", &page)
	if len(page.Records) != 1 || page.Records[0].Offset != 0 {
		t.Fatalf("from time 0: %+v", page)
	}
	e.getJSON(t, "/api/v1/topics/orders/partitions/0/records", &page)
	if len(page.Records) != 0 || page.HighWatermark != 0 {
		t.Fatalf("empty partition: %+v", page)
	}
	e.getJSON(t, "/api/v1/topics/orders/partitions/1/records?offset=30", &page)
	if len(page.Records) != 0 || page.NextOffset != 30 {
		t.Fatalf("at the end: %+v", page)
	}

	var groups struct {
		Groups []struct {
			ID  string
			Lag int64
		}
	}
	e.getJSON(t, "/api/v1/groups", &groups)
	if len(groups.Groups) != 1 || groups.Groups[0].ID != "billing" || groups.Groups[0].Lag != 20 {
		t.Fatalf("groups = %+v", groups)
	}
	var g struct {
		Group   broker.GroupInfo
		Members []memberInfo
	}
	e.getJSON(t, "/api/v1/groups/billing", &g)
	if g.Group.State != "Empty" || len(g.Group.Offsets) != 1 || g.Group.Offsets[0].Lag != 20 || g.Group.Offsets[0].Committed != 10 {
		t.Fatalf("group = %+v", g)
	}

	var ci clusterInfo
	e.getJSON(t, "/api/v1/cluster", &ci)
	if !ci.Ready || ci.Topics != 2 || ci.Partitions != 3 || ci.Version == "" || ci.Fsync != "always" || ci.DataBytes == 0 {
		t.Fatalf("cluster = %+v", ci)
	}
}

func checkPage(t *testing.T, page recordsPage, recs []*kgo.Record, from, n int) {
	t.Helper()
	if len(page.Records) != n {
		t.Fatalf("got %d records from %d, want %d from %d", len(page.Records), page.From, n, from)
	}
	for i, r := range page.Records {
		want := recs[from+i]
		if r.Offset != int64(from+i) || string(r.Key) != string(want.Key) || string(r.Value) != string(want.Value) ||
			len(r.Headers) != 1 || r.Headers[0].Key != "source" || string(r.Headers[0].Value) != "test" {
			t.Fatalf("record %d = %+v, want offset %d key %s", i, r, from+i, want.Key)
		}
	}
}

func TestAPIBadParameters(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "orders", 2)
	cases := []struct {
		path string
		code int
		msg  string
	}{
		{"/api/v1/topics?limit=abc", 400, "limit"},
		{"/api/v1/topics?limit=0", 400, "at least 1"},
		{"/api/v1/topics/nope", 404, "does not exist"},
		{"/api/v1/topics/nope/partitions", 404, "does not exist"},
		{"/api/v1/topics/orders/partitions/x/records", 400, "partition"},
		{"/api/v1/topics/orders/partitions/99999999999/records", 400, "partition"},
		{"/api/v1/topics/orders/partitions/2/records", 404, "does not exist"},
		{"/api/v1/topics/orders/partitions/-1/records", 404, "does not exist"},
		{"/api/v1/topics/orders/partitions/0/records?limit=-5", 400, "limit"},
		{"/api/v1/topics/orders/partitions/0/records?offset=-1", 400, "offset"},
		{"/api/v1/topics/orders/partitions/0/records?offset=1e9", 400, "offset"},
		{"/api/v1/topics/orders/partitions/0/records?timestamp=yesterday", 400, "timestamp"},
		{"/api/v1/topics/orders/partitions/0/records?offset=1&timestamp=2", 400, "not both"},
		{"/api/v1/groups/nope", 404, "does not exist"},
		{"/api/v1/history", 400, "series"},
		{"/api/v1/history?series=" + strings.Repeat("a,", 100), 400, "at most"},
		{"/api/v1/nothing", 404, "no API route"},
		{"/api/v1/topics/orders/partitions/0/records/extra", 404, "no API route"},
	}
	for _, c := range cases {
		code, body := e.get(t, c.path)
		var je struct{ Error string }
		if code != c.code || json.Unmarshal([]byte(body), &je) != nil || !strings.Contains(je.Error, c.msg) {
			t.Errorf("GET %s = %d %s; want %d with %q", c.path, code, body, c.code, c.msg)
		}
	}
}

func TestAPIBoundsHugeRequests(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "big", 1)
	e.produce(t, "big", 0, maxRecords+50)
	// A record far larger than the browser shows.
	cl := e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	huge := strings.Repeat("x", 200<<10)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "big", Value: []byte(huge), Key: []byte(huge[:100])}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var page recordsPage
	e.getJSON(t, "/api/v1/topics/big/partitions/0/records?offset=0&limit=100000000", &page)
	if page.Limit != maxRecords || len(page.Records) != maxRecords {
		t.Fatalf("limit %d, %d records; want both %d", page.Limit, len(page.Records), maxRecords)
	}
	e.getJSON(t, "/api/v1/topics/big/partitions/0/records?limit=1", &page)
	r := page.Records[0]
	if !r.Truncated || len(r.Value) != maxValueBytes || r.ValueSize != len(huge) || r.KeySize != 100 {
		t.Fatalf("huge record: truncated %v, %d of %d bytes", r.Truncated, len(r.Value), r.ValueSize)
	}
	var topics struct {
		Limit int
	}
	e.getJSON(t, "/api/v1/topics?limit=99999999999999999", &topics)
	if topics.Limit != maxTopicsListed {
		t.Fatalf("topics limit = %d", topics.Limit)
	}
	// A huge or odd query string never gets a 5xx.
	for _, q := range []string{
		"limit=" + strings.Repeat("9", 5000), "offset=9223372036854775807", "timestamp=9223372036854775807",
		"offset=%00", "limit=%ff%fe", "offset=" + strings.Repeat("1", 30),
	} {
		code, body := e.get(t, "/api/v1/topics/big/partitions/0/records?"+q)
		if code >= 500 || !json.Valid([]byte(body)) {
			t.Errorf("?%.40s = %d %.200s", q, code, body)
		}
	}
}

func TestAdminActions(t *testing.T) {
	off := newEnv(t, envOpt{})
	if code, body := off.do(t, "POST", "/api/v1/topics", "application/json", `{"name":"x"}`); code != 403 || !strings.Contains(body, "--http-admin") {
		t.Fatalf("create with admin off = %d %s", code, body)
	}
	if code, _ := off.do(t, "DELETE", "/api/v1/topics/x", "", ""); code != 403 {
		t.Fatalf("delete with admin off = %d", code)
	}

	e := newEnv(t, envOpt{admin: true})
	cases := []struct {
		method, path, ctype, body string
		code                      int
		msg                       string
	}{
		{"POST", "/api/v1/topics", "text/plain", `{"name":"x"}`, 415, "application/json"},
		{"POST", "/api/v1/topics", "application/json", `{"name":`, 400, "request body"},
		{"POST", "/api/v1/topics", "application/json", `{"nam":"x"}`, 400, "unknown field"},
		{"POST", "/api/v1/topics", "application/json", `{"name":""}`, 400, "name is required"},
		{"POST", "/api/v1/topics", "application/json", `{"name":"bad/name"}`, 409, "INVALID_TOPIC_EXCEPTION"},
		{"POST", "/api/v1/topics", "application/json", `{"name":"t","configs":{"retention.ms":"soon"}}`, 409, "INVALID_CONFIG"},
		{"POST", "/api/v1/topics", "application/json", `{"name":"` + strings.Repeat("a", 100<<10) + `"}`, 400, "request body"},
		{"POST", "/api/v1/topics", "application/json", `{"name":"t","partitions":3,"configs":{"retention.ms":"60000"}}`, 201, ""},
		{"POST", "/api/v1/topics", "application/json", `{"name":"t"}`, 409, "TOPIC_ALREADY_EXISTS"},
		{"DELETE", "/api/v1/topics/nope", "", "", 404, "does not exist"},
	}
	for _, c := range cases {
		code, body := e.do(t, c.method, c.path, c.ctype, c.body)
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("%s %s %.60s = %d %s; want %d %q", c.method, c.path, c.body, code, body, c.code, c.msg)
		}
	}
	ti, ok := e.b.Topic("t")
	if !ok || len(ti.Partitions) != 3 || ti.Config("retention.ms") != "60000" {
		t.Fatalf("created topic = %+v, %v", ti, ok)
	}

	e.produce(t, "t", 0, 10)
	e.commit(t, "g", "t", map[int32]int64{0: 2})
	for _, c := range []struct {
		body string
		code int
		want int64
	}{
		{`{"topic":"t","partitions":[0],"to":"latest"}`, 200, 10},
		{`{"topic":"t","partitions":[0],"to":"earliest"}`, 200, 0},
		{`{"topic":"t","partitions":[0],"to":"offset","offset":7}`, 200, 7},
		{`{"topic":"t","partitions":[0],"to":"offset","offset":11}`, 400, 7},
		{`{"topic":"t","partitions":[5],"to":"latest"}`, 404, 7},
		{`{"topic":"t","to":"sometime"}`, 400, 7},
		{`{"topic":"nope","to":"latest"}`, 404, 7},
	} {
		code, body := e.do(t, "POST", "/api/v1/groups/g/reset", "application/json", c.body)
		if code != c.code {
			t.Errorf("reset %s = %d %s, want %d", c.body, code, body, c.code)
		}
		var committed int64 = -1
		for _, g := range e.b.Groups() {
			for _, o := range g.Offsets {
				if g.ID == "g" && o.Partition == 0 {
					committed = o.Committed
				}
			}
		}
		if committed != c.want {
			t.Errorf("after reset %s: committed %d, want %d", c.body, committed, c.want)
		}
	}

	if code, body := e.do(t, "DELETE", "/api/v1/topics/t", "", ""); code != 200 {
		t.Fatalf("delete = %d %s", code, body)
	}
	if _, ok := e.b.Topic("t"); ok {
		t.Fatal("topic still exists after delete")
	}
	req, _ := http.NewRequest("DELETE", e.url+"/api/v1/topics/x", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("cross-origin delete = %d", resp.StatusCode)
	}
}

func TestHistory(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "orders", 1)
	e.waitSamples(t, 1)
	e.produce(t, "orders", 0, 40)
	e.waitSamples(t, 2)
	var h Series
	e.getJSON(t, "/api/v1/history?series=produce.records,fsync.p50,fsync.appends&prefix=topic/orders/,requests.", &h)
	if len(h.Times) < 3 {
		t.Fatalf("%d samples", len(h.Times))
	}
	sumRate := func(name string) (s float64) {
		vals, ok := h.Series[name]
		if !ok || len(vals) != len(h.Times) {
			t.Fatalf("series %s: %d values for %d times (present %v)", name, len(vals), len(h.Times), ok)
		}
		for i, v := range vals {
			if v != nil && i > 0 {
				s += *v * float64(h.Times[i]-h.Times[i-1]) / 1000
			}
		}
		return s
	}
	// Rates times intervals add up to the records produced (the sampler
	// times each sample itself, so allow for its clock being read a
	// moment apart from the history's timestamps).
	if got := sumRate("produce.records"); got < 30 || got > 50 {
		t.Errorf("produce.records integrates to %v, want about 40", got)
	}
	if got := sumRate("topic/orders/in.records"); got < 30 || got > 50 {
		t.Errorf("topic in.records integrates to %v, want about 40", got)
	}
	var fsyncs int
	for _, v := range h.Series["fsync.p50"] {
		if v != nil && *v > 0 {
			fsyncs++
		}
	}
	if fsyncs == 0 {
		t.Error("no fsync latency recorded")
	}
	if _, ok := h.Series["requests.Produce"]; !ok {
		t.Errorf("no requests.Produce series in %v", keys(h.Series))
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestAuthHook(t *testing.T) {
	e := newEnv(t, envOpt{})
	auth := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		if u, p, ok := r.BasicAuth(); ok && u == "alice" && p == "secret" {
			return u, true
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="sluice"`)
		writeErr(w, http.StatusUnauthorized, "log in")
		return "", false
	}
	s, err := New(Config{Broker: e.b, Gatherer: e.reg, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr, err := s.ListenAndServe("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, login bool) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if login {
			req.SetBasicAuth("alice", "secret")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp.StatusCode, b.String()
	}
	for _, p := range []string{"/", "/static/app.js", "/api/v1/cluster", "/api/v1/topics"} {
		if code, _ := get(p, false); code != http.StatusUnauthorized {
			t.Errorf("GET %s without login = %d", p, code)
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := get(p, false); code != 200 {
			t.Errorf("GET %s without login = %d, want 200", p, code)
		}
	}
	code, body := get("/api/v1/cluster", true)
	if code != 200 || !strings.Contains(body, `"user":"alice"`) {
		t.Errorf("cluster with login = %d %s", code, body)
	}
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, envOpt{})
	for _, p := range []string{"/", "/api/v1/cluster", "/healthz"} {
		resp, err := http.Get(e.url + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s headers: %v", p, resp.Header)
		}
	}
	resp, err := http.Get(e.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("console page CSP = %q", csp)
	}
}

// TestAPIGroupMembers: a live consumer group shows its member and the
// partitions assigned to it, as DescribeGroups reports them.
func TestAPIGroupMembers(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "orders", 3)
	e.produce(t, "orders", 2, 4)
	cl := e.client(t, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("orders"), kgo.ClientID("reader-1"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	// The member has joined once it has fetched the records.
	for got := 0; got < 4; {
		fs := cl.PollFetches(context.Background())
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	var g struct {
		Group   broker.GroupInfo
		Members []memberInfo
	}
	e.getJSON(t, "/api/v1/groups/live", &g)
	if g.Group.State != "Stable" || g.Group.Members != 1 || g.Group.ProtocolType != "consumer" || len(g.Members) != 1 {
		t.Fatalf("group = %+v", g)
	}
	m := g.Members[0]
	if m.ClientID != "reader-1" || fmt.Sprint(m.Assigned["orders"]) != "[0 1 2]" {
		t.Fatalf("member = %+v", m)
	}
}

// TestAdvertisedAddressUnreachable: the console reads records and acts
// through the broker's own listener even when the address advertised to
// clients does not resolve from the broker's host.
func TestAdvertisedAddressUnreachable(t *testing.T) {
	e := newEnv(t, envOpt{admin: true, brokerOpts: []broker.Opt{broker.AdvertiseAddr("sluice.invalid:19092")}})
	e.createTopic(t, "orders", 1)
	// Kafka clients here would be sent to sluice.invalid: append in process.
	if _, err := e.b.AppendBatch(context.Background(), "orders", 0, storagetest.MakeBatch(3, 10, 1), -1); err != nil {
		t.Fatal(err)
	}
	var page recordsPage
	code, body := e.do(t, "POST", "/api/v1/topics", "application/json", `{"name":"made-here"}`)
	if code != http.StatusCreated {
		t.Fatalf("create through the console = %d %s", code, body)
	}
	if _, ok := e.b.Topic("made-here"); !ok {
		t.Fatal("the console's create did not create the topic")
	}
	e.getJSON(t, "/api/v1/topics/orders/partitions/0/records", &page)
	if len(page.Records) != 3 || page.Records[2].Offset != 2 {
		t.Fatalf("records = %+v", page.Records)
	}
}

// TestAPIStuckPartitions: /api/v1/stuck lists a partition whose last
// stable offset lags its high watermark because of a transaction open
// longer than the transaction timeout bound (here the bound is tiny and
// the sweeps far apart, so the transaction stays open and is listed),
// with whether the coordinator holds live state for it.
func TestAPIStuckPartitions(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.New(broker.DataDir(dir), broker.ListenAddr("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	if err := b.CreateTopic(ctx, "held", 2, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("tx-held"), kgo.DefaultProduceTopic("held"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open"), Partition: 1}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpt{brokerOpts: []broker.Opt{broker.DataDir(dir),
		broker.TransactionMaxTimeout(time.Nanosecond), broker.TransactionSweepInterval(time.Hour)}})
	var got struct {
		Partitions []stuckRow `json:"partitions"`
	}
	e.getJSON(t, "/api/v1/stuck", &got)
	if len(got.Partitions) != 1 {
		t.Fatalf("stuck partitions %+v, want held/1", got.Partitions)
	}
	p := got.Partitions[0]
	if p.Topic != "held" || p.Partition != 1 || p.LastStable != 0 || p.HighWatermark != 1 || !p.CoordinatorLive || p.OpenSinceMs <= 0 {
		t.Fatalf("stuck partition %+v, want held/1 stable at 0 below 1 with live coordinator state", p)
	}
}
