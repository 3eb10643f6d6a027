package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/schemaregistry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a started broker with a console in front of it.
type env struct {
	b   *broker.Broker
	reg *prometheus.Registry
	srv *Server
	url string // the console's base URL
}

type envOpt struct {
	admin      bool
	brokerOpts []broker.Opt
	schemas    bool // open a schema registry on the broker and show it
}

func newEnv(t *testing.T, o envOpt) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := append([]broker.Opt{broker.DataDir(t.TempDir()), broker.ListenAddr("127.0.0.1:0"), broker.Registerer(reg), broker.AutoCreateTopics(false)}, o.brokerOpts...)
	b, err := broker.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		b.Close()
		t.Fatal(err)
	}
	var sr *schemaregistry.Registry
	if o.schemas {
		if sr, err = schemaregistry.New(context.Background(), schemaregistry.Config{Broker: b}); err != nil {
			b.Close()
			t.Fatal(err)
		}
	}
	s, err := New(Config{Broker: b, Gatherer: reg, Admin: o.admin, SampleEvery: 20 * time.Millisecond, History: 600, Schemas: sr})
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		s.Close()
		if sr != nil {
			sr.Close()
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return &env{b: b, reg: reg, srv: s, url: hs.URL}
}

func (e *env) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.b.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (e *env) createTopic(t *testing.T, name string, partitions int32) {
	t.Helper()
	if err := e.b.CreateTopic(context.Background(), name, partitions, nil); err != nil {
		t.Fatal(err)
	}
}

// produce writes n records to one partition of topic, acks=all, keys
// "k<i>" and values {"i":<i>}, with a header; it returns the records.
func (e *env) produce(t *testing.T, topic string, partition int32, n int) []*kgo.Record {
	t.Helper()
	cl := e.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{
			Topic: topic, Partition: partition,
			Key:     []byte(fmt.Sprintf("k%d", i)),
			Value:   []byte(fmt.Sprintf(`{"i":%d,"topic":%q}`, i, topic)),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("test")}},
		})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// commit commits offsets for an empty group, as a consumer that left would have.
func (e *env) commit(t *testing.T, group, topic string, offsets map[int32]int64) {
	t.Helper()
	adm := kadm.NewClient(e.client(t))
	var os kadm.Offsets
	for p, o := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(context.Background(), group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// get fetches path and returns the status and body.
func (e *env) get(t *testing.T, path string) (int, string) {
	t.Helper()
	return e.do(t, http.MethodGet, path, "", "")
}

func (e *env) do(t *testing.T, method, path, contentType, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// getJSON fetches path, wants status 200 and decodes into v.
func (e *env) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, body := e.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// waitSamples waits until the sampler has recorded n more samples.
func (e *env) waitSamples(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-e.srv.hist.recorded():
		case <-e.srv.stop:
			t.Fatal("console closed")
		}
	}
}
