package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/broker"
)

func setQuota(t *testing.T, addr string, typ string, name *string, key string, v float64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).AlterClientQuotas(ctxT(t, 30*time.Second), []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: typ, Name: name}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: key, Value: v}},
	}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, res)
	}
}

// throttleHook counts the throttles a kgo client is told of.
type throttleHook struct{ n atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// rateProducer produces value-sized records as fast as the client lets
// it until ctx is done, and records when each acknowledgement came.
type rateProducer struct {
	mu   sync.Mutex
	acks []time.Time // guarded by mu
	errs atomic.Int64
}

func (p *rateProducer) run(ctx context.Context, cl *kgo.Client, topic string, value []byte) {
	for ctx.Err() == nil {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					p.errs.Add(1)
				}
				return
			}
			p.mu.Lock()
			p.acks = append(p.acks, time.Now())
			p.mu.Unlock()
		})
	}
}

// between counts the acknowledgements in [from, to).
func (p *rateProducer) between(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.acks {
		if !a.Before(from) && a.Before(to) {
			n++
		}
	}
	return n
}

// TestQuotaProducerByteRate: a franz-go producer whose client id has
// producer_byte_rate 1 MiB/s, offering far more, is held to 1 MiB/s ±
// 15% over the 15 s after a 5 s warm-up (the first burst is the rate
// window's worth) and is told of throttles; a producer with another
// client id on the same broker is not throttled and keeps a rate well
// above the limit.
func TestQuotaProducerByteRate(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s of producing")
	}
	n := startNode(t, broker.Fsync(broker.FsyncInterval))
	slowID := "quota-slow"
	const rate = 1 << 20
	setQuota(t, n.addr, "client-id", &slowID, "producer_byte_rate", rate)
	// The quota counts request bytes: compression off, so that the
	// record bytes acknowledged are (nearly) the bytes counted.
	value := make([]byte, 16<<10)
	rand.Read(value)
	clients := map[string]*throttleHook{}
	producers := map[string]*rateProducer{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, id := range []string{slowID, "quota-free"} {
		h := &throttleHook{}
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID(id), kgo.WithHooks(h),
			kgo.MaxBufferedRecords(64), kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation(),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		p := &rateProducer{}
		clients[id], producers[id] = h, p
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(ctx, cl, "quota-"+id, value)
		}()
	}
	start := time.Now()
	const warm, measure = 5 * time.Second, 15 * time.Second
	time.Sleep(warm + measure + 500*time.Millisecond) // the test's length, not an assertion: rates are counted from acknowledgement times
	cancel()
	wg.Wait()

	from, to := start.Add(warm), start.Add(warm+measure)
	slow := float64(producers[slowID].between(from, to)*len(value)) / measure.Seconds()
	free := float64(producers["quota-free"].between(from, to)*len(value)) / measure.Seconds()
	t.Logf("over %v after %v: throttled client %.0f B/s (%d throttles), unthrottled client %.0f B/s (%d throttles)",
		measure, warm, slow, clients[slowID].n.Load(), free, clients["quota-free"].n.Load())
	if slow < rate*0.85 || slow > rate*1.15 {
		t.Errorf("throttled producer at %.0f B/s, want %d ± 15%%", slow, rate)
	}
	if clients[slowID].n.Load() == 0 {
		t.Error("the throttled producer was told of no throttle")
	}
	if clients["quota-free"].n.Load() != 0 {
		t.Errorf("the producer without a quota was throttled %d times", clients["quota-free"].n.Load())
	}
	if free < 3*rate {
		t.Errorf("the producer without a quota managed %.0f B/s, not well above the other's limit of %d", free, rate)
	}
	for id, p := range producers {
		if e := p.errs.Load(); e != 0 {
			t.Errorf("%s: %d produce errors", id, e)
		}
	}
}

// gatherValue returns the value of the series name whose labels include
// want, or -1.
func gatherValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			return metricValue(m)
		}
	}
	return -1
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return 0
}

// TestQuotaKcat: kcat (librdkafka) with a throttled client id takes at
// least as long as its quota allows for what it sends (a lower bound:
// load only lengthens it), and the broker's metrics show the throttle;
// a kcat with another client id has no quota account at all.
func TestQuotaKcat(t *testing.T) {
	kcat := needKcat(t)
	reg := prometheus.NewRegistry()
	n := startNode(t, broker.QuotaWindow(2, 500*time.Millisecond), broker.Registerer(reg), broker.Fsync(broker.FsyncInterval))
	id := "kcat-slow"
	const rate = 512 << 10
	setQuota(t, n.addr, "client-id", &id, "producer_byte_rate", rate)
	line := strings.Repeat("k", 999) + "\n"
	input := strings.Repeat(line, 3<<10) // 3 MiB
	run := func(clientID string) time.Duration {
		cmd := exec.CommandContext(ctxT(t, 2*time.Minute), kcat, "-b", n.addr, "-P", "-t", "kcat-quota",
			"-X", "client.id="+clientID, "-X", "acks=all", "-X", "batch.size=65536", "-X", "linger.ms=5")
		cmd.Stdin = strings.NewReader(input)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat: %v\n%s", err, errb.String())
		}
		return time.Since(start)
	}
	took := run(id)
	// Admitted by time T: at most the window's burst (1 s of the rate)
	// plus T of the rate plus one request (64 KiB).
	minTook := time.Duration(float64(len(input)-rate-64<<10) / rate * float64(time.Second))
	t.Logf("kcat sent %d bytes under a %d B/s quota in %v (at least %v)", len(input), rate, took, minTook)
	if took < minTook {
		t.Errorf("kcat finished in %v, faster than its quota allows (%v)", took, minTook)
	}
	if v := gatherValue(t, reg, "sluice_quota_throttle_seconds_total", map[string]string{"client_id": id, "quota": "producer_byte_rate"}); v <= 0 {
		t.Errorf("sluice_quota_throttle_seconds_total for %s: %v", id, v)
	}
	run("kcat-free")
	if v := gatherValue(t, reg, "sluice_quota_limit", map[string]string{"client_id": "kcat-free"}); v != -1 {
		t.Errorf("a client without a quota has an account: limit %v", v)
	}
	out := runKcat(t, kcat, "", "-b", n.addr, "-C", "-t", "kcat-quota", "-o", "beginning", "-e", "-q", "-f", "%o\n")
	if got := strings.Count(out, "\n"); got != 2*(3<<10) {
		t.Errorf("read back %d records, want %d", got, 2*(3<<10))
	}
}

// TestQuotaRequestPercentage: a client issuing tiny requests in a loop
// with request_percentage 0.5 (5 ms of broker time per second) is
// throttled and makes a small fraction of the requests that a client
// without a quota makes in the same time.
func TestQuotaRequestPercentage(t *testing.T) {
	n := startNode(t, broker.QuotaWindow(2, 100*time.Millisecond))
	id := "chatty"
	setQuota(t, n.addr, "client-id", &id, "request_percentage", 0.5)
	counts := map[string]*atomic.Int64{}
	hooks := map[string]*throttleHook{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, cid := range []string{id, "quiet-free"} {
		h := &throttleHook{}
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ClientID(cid), kgo.WithHooks(h))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		count := &atomic.Int64{}
		counts[cid], hooks[cid] = count, h
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req := kmsg.NewPtrDescribeConfigsRequest()
				req.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}}
				if _, err := req.RequestWith(ctx, cl); err == nil {
					count.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	chatty, free := counts[id].Load(), counts["quiet-free"].Load()
	t.Logf("in 3 s: throttled client %d requests (%d throttles), client without a quota %d", chatty, hooks[id].n.Load(), free)
	if hooks[id].n.Load() == 0 {
		t.Error("the throttled client was told of no throttle")
	}
	if hooks["quiet-free"].n.Load() != 0 {
		t.Error("the client without a quota was throttled")
	}
	if chatty*3 > free {
		t.Errorf("throttled client made %d requests, the free one %d: want fewer than a third", chatty, free)
	}
}

// TestQuotaSurvivesRestart: a quota set before a restart still throttles
// after it.
func TestQuotaSurvivesRestart(t *testing.T) {
	n := startNode(t, broker.QuotaWindow(2, 100*time.Millisecond))
	setQuota(t, n.addr, "user", nil, "producer_byte_rate", 64<<10) // every user, ANONYMOUS included
	n.restart()
	h := &throttleHook{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.WithHooks(h), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("restart-quota"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 8 && h.n.Load() == 0; i++ {
		if err := cl.ProduceSync(ctxT(t, time.Minute), &kgo.Record{Value: bytes.Repeat([]byte("r"), 64<<10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if h.n.Load() == 0 {
		t.Fatal("512 KiB produced against a 64 KiB/s default-user quota after a restart and no throttle")
	}
	d, err := kadm.NewClient(cl).DescribeClientQuotas(ctxT(t, time.Minute), true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 1}})
	if err != nil || len(d) != 1 || d[0].Values[0].Value != 64<<10 {
		t.Fatalf("DescribeClientQuotas after restart: %v %+v", err, d)
	}
}

// TestQuotaDocCommands runs the commands of docs/quotas.md.
func TestQuotaDocCommands(t *testing.T) {
	needKcat(t)
	n := startNode(t)
	out := runDocCommands(t, n, docBlock(t, "docs/quotas.md", "quota-doc-commands"))
	for _, want := range []string{
		"altered client-id=batch-loader",
		"client-id=batch-loader\n\tproducer_byte_rate=1048576\nuser=<default>\n\tconsumer_byte_rate=10485760\n\trequest_percentage=50\n",
		"refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	name := "batch-loader"
	d, err := kadm.NewClient(cl).DescribeClientQuotas(ctxT(t, time.Minute), true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 0, MatchName: &name}})
	if err != nil || len(d) != 1 || d[0].Values[0].Value != 1<<20 {
		t.Fatalf("after import: %v %+v", err, d)
	}
}
