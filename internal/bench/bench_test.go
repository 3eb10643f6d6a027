package bench

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/broker/brokertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHistogramQuantiles checks every quantile against the exact value of
// a sorted sample: within one bucket (1/64 relative) below it, never above.
func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var vals []time.Duration
	for range 100000 {
		v := time.Duration(rng.ExpFloat64() * float64(300*time.Microsecond))
		vals = append(vals, v)
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))]
		got := h.Quantile(q)
		if got > exact || float64(exact-got) > float64(exact)/subBuckets+1 {
			t.Errorf("q%.3f = %v, exact %v", q, got, exact)
		}
	}
	if h.Max() != vals[len(vals)-1] {
		t.Errorf("max %v, want %v", h.Max(), vals[len(vals)-1])
	}
	if h.Count() != uint64(len(vals)) {
		t.Errorf("count %d, want %d", h.Count(), len(vals))
	}
}

// TestBucketBounds checks that every value lands in the bucket whose
// range holds it, across the whole int64 range.
func TestBucketBounds(t *testing.T) {
	for _, v := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 540672, 1 << 40, 1<<63 - 1} {
		i := bucketOf(v)
		if lo := lowerBound(i); lo > v {
			t.Errorf("value %d in bucket %d whose lower bound is %d", v, i, lo)
		}
		if i+1 < len(Histogram{}.counts) && lowerBound(i+1) <= v {
			t.Errorf("value %d in bucket %d, but bucket %d starts at %d", v, i, i+1, lowerBound(i+1))
		}
	}
}

func TestParseStat(t *testing.T) {
	stat := []byte("1234 (my (odd) cmd) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0")
	got, faults, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Fatalf("cpu %v, want %v (300 ticks)", got, want)
	}
	if faults != 7 {
		t.Fatalf("minor faults %d, want 7 (field 10)", faults)
	}
	if _, _, err := parseStat([]byte("1234 (x) S 1 2")); err == nil {
		t.Fatal("short stat line parsed")
	}
}

func TestReadProcSelf(t *testing.T) {
	u, err := ReadProc(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if u.RSS <= 0 || u.PeakRSS < u.RSS {
		t.Fatalf("rss %d, peak %d", u.RSS, u.PeakRSS)
	}
}

// TestProduceConsume runs both loads against an embedded broker and
// checks the counts, including the broker's CPU (this process).
func TestProduceConsume(t *testing.T) {
	b := brokertest.Start(t)
	ctx := context.Background()
	for _, sync := range []bool{false, true} {
		topic := "bench-async"
		if sync {
			topic = "bench-sync"
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		if err := EnsureTopic(ctx, cl, topic, 3); err != nil {
			t.Fatal(err)
		}
		res, err := Produce(ctx, cl, ProduceConfig{Topic: topic, Records: 300, Size: 10, Callers: 4, Sync: sync, Partitions: 3, BrokerPID: os.Getpid()})
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.Records != 300 || res.Bytes != 3000 || res.Errors != 0 {
			t.Fatalf("sync=%v: %+v", sync, res)
		}
		if res.Latency.Max <= 0 || res.Latency.P50 > res.Latency.Max {
			t.Fatalf("sync=%v: latency %+v", sync, res.Latency)
		}

		cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, ConsumeClientOpts(topic)...)...)
		if err != nil {
			t.Fatal(err)
		}
		cres, err := Consume(ctx, cl, ConsumeConfig{Topic: topic})
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		if cres.Records != 300 || cres.Bytes != 3000 {
			t.Fatalf("consume: %+v", cres)
		}
	}
}

// TestProduceDurationEnd checks that the end of a --duration run stops
// issuing records without failing those in flight (they used to fail with
// the run's expired context).
func TestProduceDurationEnd(t *testing.T) {
	b := brokertest.Start(t)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := EnsureTopic(ctx, cl, "d", 2); err != nil {
		t.Fatal(err)
	}
	for _, sync := range []bool{false, true} {
		res, err := Produce(ctx, cl, ProduceConfig{Topic: "d", Duration: 200 * time.Millisecond, Size: 100, Callers: 8, Sync: sync, Partitions: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors != 0 || res.Records == 0 {
			t.Fatalf("sync=%v: %d records, %d errors (first: %s)", sync, res.Records, res.Errors, res.FirstErr)
		}
	}
}

func TestProduceConfigErrors(t *testing.T) {
	for _, c := range []ProduceConfig{
		{},
		{Topic: "t", Callers: 1, Partitions: 1},
		{Topic: "t", Records: 1, Callers: 0, Partitions: 1},
		{Topic: "t", Records: 1, Callers: 1, Partitions: 0},
		{Topic: "t", Records: 1, Callers: 1, Partitions: 1, Size: -1},
	} {
		if err := c.validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestStopProcess: a process that exits on SIGTERM is waited for; one
// that ignores it is killed after the grace.
func TestStopProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	StopProcess(cmd, time.Minute)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("process state after StopProcess: %v, want ended by SIGTERM", cmd.ProcessState)
	}

	cmd = exec.Command("sh", "-c", `trap "" TERM; echo ready; exec sleep 60`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	StopProcess(cmd, 10*time.Millisecond)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process state after StopProcess: %v, want killed", cmd.ProcessState)
	}
}
