package producer_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
	"github.com/sluicedb/sluice/internal/bench"
	"github.com/sluicedb/sluice/producer"
)

// BenchmarkProduce compares, on one Sluice broker over loopback, callers
// producing 100-byte inputs to one partition through:
//
//   - sluice: BatchProducer with the RecordAggregator and a KafkaSink;
//   - sluice-inflight2: the same with MaxInFlight(2);
//   - sluice-packing: BatchProducer with an aggregator packing inputs into
//     records of up to 16 KiB;
//   - sluice-inprocess: BatchProducer with the RecordAggregator and an
//     InProcessSink appending to the same broker without the network;
//   - franz-go: each caller calling kgo's ProduceSync for its own record.
//
// The broker runs in its own process (this test binary started again as a
// broker, see BenchBrokerEnv), except for sluice-inprocess, whose sink
// needs the broker in this process: that variant starts one here, whose
// CPU time then counts as this process's.
//
// Both kgo clients use kgo.ProducerLinger(0) and otherwise franz-go's
// defaults (acks=all, idempotent, snappy). Each caller runs a closed loop;
// b.N inputs are shared among the callers. Reported: inputs/s, the p50 and
// p99 of one Produce call in µs, the CPU time of the benchmark process
// (callers, producer, kgo clients) per input and as a percentage of one
// core, and the broker process's CPU time per input (from /proc). floor is
// the disk's latency floor, measured first in the broker's data directory.
func BenchmarkProduce(b *testing.B) {
	parent := b
	brk := startBrokerProcess(b)
	adm := newAdmin(b, brk.addr)
	topicN := 0
	newTopic := func(b *testing.B) string {
		topicN++
		name := fmt.Sprintf("bench-%d", topicN)
		resp, err := adm.CreateTopic(context.Background(), 1, -1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			b.Fatal(err)
		}
		return name
	}
	newClient := func(b *testing.B) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brk.addr), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		return cl
	}
	var local *broker.Broker // for sluice-inprocess, started on first use
	value := make([]byte, 100)

	variants := []struct {
		name string
		// setup returns the function each caller calls once per input, and
		// the producer's sink wrapped to measure its flushes (nil for
		// franz-go).
		setup func(b *testing.B) (produce func(ctx context.Context) error, done func(), fs *flushStats)
	}{
		{"sluice", func(b *testing.B) (func(context.Context) error, func(), *flushStats) {
			fs := &flushStats{Sink: producer.NewKafkaSink(newClient(b), newTopic(b), 0)}
			p, err := producer.NewRecordProducer(producer.WithSink(fs.sink()))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := p.Produce(ctx, producer.Record{Value: value})
				return err
			}, func() { p.Close(context.Background()) }, fs
		}},
		{"sluice-inflight2", func(b *testing.B) (func(context.Context) error, func(), *flushStats) {
			fs := &flushStats{Sink: producer.NewKafkaSink(newClient(b), newTopic(b), 0)}
			p, err := producer.NewRecordProducer(producer.MaxInFlight(2), producer.WithSink(fs.sink()))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := p.Produce(ctx, producer.Record{Value: value})
				return err
			}, func() { p.Close(context.Background()) }, fs
		}},
		{"sluice-packing", func(b *testing.B) (func(context.Context) error, func(), *flushStats) {
			fs := &flushStats{Sink: producer.NewKafkaSink(newClient(b), newTopic(b), 0)}
			p, err := producer.New[[]byte, packTag, PackedStatus](&packer{maxRecord: 16 << 10}, producer.WithSink(fs.sink()))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := p.Produce(ctx, value)
				return err
			}, func() { p.Close(context.Background()) }, fs
		}},
		{"sluice-inprocess", func(b *testing.B) (func(context.Context) error, func(), *flushStats) {
			if local == nil {
				local = brokertest.Start(parent)
			}
			topicN++
			name := fmt.Sprintf("bench-local-%d", topicN)
			if err := local.CreateTopic(context.Background(), name, 1, nil); err != nil {
				b.Fatal(err)
			}
			fs := &flushStats{Sink: producer.NewInProcessSink(local, name, 0, -1)}
			p, err := producer.NewRecordProducer(producer.WithSink(fs.sink()))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := p.Produce(ctx, producer.Record{Value: value})
				return err
			}, func() { p.Close(context.Background()) }, fs
		}},
		{"franz-go", func(b *testing.B) (func(context.Context) error, func(), *flushStats) {
			cl, topic := newClient(b), newTopic(b)
			return func(ctx context.Context) error {
				return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: value}).FirstErr()
			}, func() {}, nil
		}},
	}
	// The floor of every latency below, from the same disk and run: one
	// small write and fdatasync of a pre-zeroed file in the broker's data
	// directory (what sluice bench floor measures). b.N is ignored.
	b.Run("floor", func(b *testing.B) {
		res, err := bench.Floor(context.Background(), bench.FloorConfig{Dir: brk.dir, Ops: 1000, Size: 4096})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Latency.P50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(res.Latency.P99.Microseconds()), "p99-µs")
		b.ReportMetric(float64(res.Latency.Max.Microseconds()), "max-µs")
		b.ReportMetric(res.OpsPerSec(), "ops/s")
		b.ReportMetric(0, "ns/op")
	})
	for _, callers := range []int{1, 16, 256, 4096} {
		for _, v := range variants {
			b.Run(fmt.Sprintf("callers=%d/%s", callers, v.name), func(b *testing.B) {
				produce, done, fs := v.setup(b)
				defer done()
				pid := brk.pid
				if v.name == "sluice-inprocess" {
					pid = 0 // its broker is this process
				}
				runCallers(b, callers, produce, fs, pid)
			})
		}
	}
}

// runCallers shares b.N calls of produce among callers goroutines and
// reports throughput and latency percentiles, and, when fs is not nil, how
// the producer's flushes used the sink, and, when brokerPID is not 0, that
// process's CPU time per input. One untimed call first sets up what
// the first call would otherwise pay for inside the timing (the client's
// metadata, connection and producer id).
func runCallers(b *testing.B, callers int, produce func(context.Context) error, fs *flushStats, brokerPID int) {
	ctx := context.Background()
	if err := produce(ctx); err != nil {
		b.Fatal(err)
	}
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := 0; c < callers; c++ {
		n := b.N / callers
		if c < b.N%callers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each caller appends to its own slice and publishes it at the
			// end: appending through lat[c] would write slice headers that
			// share cache lines with other callers' on every call.
			mine := make([]time.Duration, 0, n)
			defer func() { lat[c] = mine }()
			<-start
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if err := produce(ctx); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
		}()
	}
	b.ResetTimer()
	fs.reset()
	cpu0, bcpu0 := processCPU(b), brokerCPU(b, brokerPID)
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	cpu, bcpu := processCPU(b)-cpu0, brokerCPU(b, brokerPID)-bcpu0
	b.StopTimer()
	all := slices.Concat(lat...)
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "inputs/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(len(all)), "cpu-µs/input")
	b.ReportMetric(100*cpu.Seconds()/elapsed.Seconds(), "cpu-%")
	if brokerPID != 0 {
		b.ReportMetric(float64(bcpu.Nanoseconds())/1e3/float64(len(all)), "broker-cpu-µs/input")
	}
	fs.report(b, elapsed)
	b.ReportMetric(0, "ns/op")
}

// flushStats wraps a producer's Sink and measures its flushes: how many
// records each carried, how long each sink call took, and the share of wall
// time during which at least one sink call was running (sink-busy-%). With
// one flush at a time, the rest of the time is spent waking the batch's
// callers and letting the next batch fill.
type flushStats struct {
	producer.Sink

	mu      sync.Mutex // guards the fields below
	inside  int        // sink calls running now
	since   time.Time  // when inside last rose from 0
	busy    time.Duration
	flushes int
	records int
	inSink  time.Duration // sum of every call's duration
}

func (s *flushStats) Produce(ctx context.Context, b producer.Batch) ([]int64, error) {
	t0 := time.Now()
	s.mu.Lock()
	if s.inside == 0 {
		s.since = t0
	}
	s.inside++
	s.flushes++
	s.records += len(b.Records)
	s.mu.Unlock()
	offsets, err := s.Sink.Produce(ctx, b)
	t1 := time.Now()
	s.mu.Lock()
	s.inside--
	if s.inside == 0 {
		s.busy += t1.Sub(s.since)
	}
	s.inSink += t1.Sub(t0)
	s.mu.Unlock()
	return offsets, err
}

// notKeptStats is a flushStats around a sink that keeps no records
// (KafkaSink): the producer then reuses record slices through it, as it
// does with the sink alone.
type notKeptStats struct {
	*flushStats
	producer.RecordsNotKept
}

// sink returns s as the producer's Sink: one that keeps no records
// when the sink it wraps keeps none, so that measuring the flushes does
// not change what the producer allocates.
func (s *flushStats) sink() producer.Sink {
	if producer.KeepsNoRecords(s.Sink) {
		return notKeptStats{flushStats: s}
	}
	return s
}

// reset starts the measurement; calls already running count from now.
func (s *flushStats) reset() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.since = time.Now()
	s.busy, s.flushes, s.records, s.inSink = 0, 0, 0, 0
}

// report adds the flush metrics to b; elapsed is the timed part's wall
// time, at whose end no sink call is running (every caller has its result).
func (s *flushStats) report(b *testing.B, elapsed time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flushes == 0 {
		return
	}
	b.ReportMetric(float64(s.records)/float64(s.flushes), "recs/flush")
	b.ReportMetric(float64(s.inSink.Microseconds())/float64(s.flushes), "sink-µs/flush")
	b.ReportMetric(100*s.busy.Seconds()/elapsed.Seconds(), "sink-busy-%")
}

// processCPU is the CPU time (user and system) the benchmark process has
// used so far: the callers, the producer and the kgo clients (and the
// broker of sluice-inprocess, which runs in this process).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// brokerCPU is the CPU time the broker process pid has used so far, or 0
// when pid is 0.
func brokerCPU(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	u, err := bench.ReadProc(pid)
	if err != nil {
		b.Fatal(err)
	}
	return u.CPU
}

// brokerProcess is a broker running in a process of its own.
type brokerProcess struct {
	addr string
	pid  int
	dir  string // its data directory
}

// startBrokerProcess starts this test binary again as a broker over a
// fresh data directory (see producer.BenchBrokerEnv) and stops it when b
// ends.
func startBrokerProcess(b *testing.B) *brokerProcess {
	b.Helper()
	dir := b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), producer.BenchBrokerEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop := func() {
		stdin.Close() // the broker closes and exits
		if err := cmd.Wait(); err != nil {
			b.Errorf("broker process: %v", err)
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		b.Fatalf("broker process: reading its address: %v", err)
	}
	b.Cleanup(stop)
	return &brokerProcess{addr: strings.TrimSpace(line), pid: cmd.Process.Pid, dir: dir}
}

// newAdmin returns an admin client of the broker at addr.
func newAdmin(b *testing.B, addr string) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

var _ producer.Appender = (*broker.Broker)(nil)

// BenchmarkEngine measures the producer alone, without a broker: callers
// produce 100-byte inputs through NewRecordProducer's defaults to a sink
// that returns offsets at once, so every cost left is the producer's and
// the Go runtime's (pushing under the mutex, parking and waking callers,
// one send goroutine per batch). wake-floor is the runtime's share alone:
// the same callers join a shared batch under a mutex, and the last one to
// join closes its channel, waking all. Reported: wall time and process CPU
// time per input.
func BenchmarkEngine(b *testing.B) {
	value := make([]byte, 100)
	for _, callers := range []int{1, 16, 256, 4096} {
		b.Run(fmt.Sprintf("callers=%d/producer", callers), func(b *testing.B) {
			p, err := producer.NewRecordProducer(producer.WithSink(&instantSink{}))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			runClosedLoop(b, callers, func(ctx context.Context) error {
				_, err := p.Produce(ctx, producer.Record{Value: value})
				return err
			})
		})
		b.Run(fmt.Sprintf("callers=%d/wake-floor", callers), func(b *testing.B) {
			w := &wakeFloor{n: callers, cur: make(chan struct{})}
			runClosedLoop(b, callers, w.join)
		})
	}
}

// runClosedLoop shares about b.N calls of f among callers goroutines, each
// in a closed loop making the same number of calls, and reports wall and
// CPU time per call.
func runClosedLoop(b *testing.B, callers int, f func(context.Context) error) {
	ctx := context.Background()
	per := max(b.N/callers, 1) // every caller makes the same number of calls
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; i < per; i++ {
				if err := f(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	b.ResetTimer()
	cpu0 := processCPU(b)
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	n := float64(per * callers)
	b.ReportMetric(float64(elapsed.Nanoseconds())/n, "ns/input")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/input")
	b.ReportMetric(0, "ns/op")
}

// instantSink writes nothing and returns consecutive offsets at once.
type instantSink struct{ next atomic.Int64 }

func (s *instantSink) Produce(_ context.Context, b producer.Batch) ([]int64, error) {
	offsets := make([]int64, len(b.Records))
	base := s.next.Add(int64(len(offsets))) - int64(len(offsets))
	for i := range offsets {
		offsets[i] = base + int64(i)
	}
	return offsets, nil
}

// wakeFloor is the least a batching producer's callers can cost the
// runtime: each call joins the current batch under a mutex and parks until
// the batch is complete; the n-th caller to join completes it, starts the
// next and wakes the others by closing the batch's channel. With every
// caller in a closed loop, n callers always complete a batch.
type wakeFloor struct {
	n int

	mu     sync.Mutex    // guards the fields below
	cur    chan struct{} // closed when the current batch is complete
	joined int           // callers in the current batch
}

func (w *wakeFloor) join(context.Context) error {
	w.mu.Lock()
	ch := w.cur
	w.joined++
	if w.joined == w.n {
		w.joined = 0
		w.cur = make(chan struct{})
		w.mu.Unlock()
		close(ch)
		return nil
	}
	w.mu.Unlock()
	<-ch
	return nil
}

// The benchmarks' helpers measure what they say: flushStats counts every
// flush of a producer and its records (a lone caller's input is a flush of
// its own: adaptive linger sends it at once), and wakeFloor completes a
// batch each time all its callers have joined.
func TestBenchmarkHelpers(t *testing.T) {
	fs := &flushStats{Sink: &instantSink{}}
	p, err := producer.NewRecordProducer(producer.WithSink(fs.sink()))
	if err != nil {
		t.Fatal(err)
	}
	fs.reset()
	for i := 0; i < 5; i++ {
		off, err := p.Produce(context.Background(), producer.Record{Value: []byte("v")})
		if err != nil || off != int64(i) {
			t.Fatalf("input %d: offset %d, %v", i, off, err)
		}
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	flushes, records, inside := fs.flushes, fs.records, fs.inside
	fs.mu.Unlock()
	if flushes != 5 || records != 5 || inside != 0 {
		t.Fatalf("flushStats: %d flushes, %d records, %d calls running; want 5, 5, 0", flushes, records, inside)
	}

	const callers, rounds = 8, 3
	w := &wakeFloor{n: callers, cur: make(chan struct{})}
	var wg sync.WaitGroup
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				w.join(context.Background())
			}
		}()
	}
	wg.Wait() // each round's batch completed, or this never returns
	if w.joined != 0 {
		t.Fatalf("%d callers left in an incomplete batch", w.joined)
	}
}

// TestFlushStatsKeepsRecordReuse checks that the benchmarks' flush
// counters leave the producer reusing KafkaSink's record slices, as it
// does without them, and claim nothing for a sink that may keep records.
func TestFlushStatsKeepsRecordReuse(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kafka := producer.NewKafkaSink(cl, "t", 0)
	if !producer.KeepsNoRecords(kafka) {
		t.Fatal("KafkaSink does not promise to keep no records")
	}
	if fs := (&flushStats{Sink: kafka}); !producer.KeepsNoRecords(fs.sink()) {
		t.Error("the flush counters around KafkaSink stop the producer reusing record slices")
	}
	if fs := (&flushStats{Sink: &instantSink{}}); producer.KeepsNoRecords(fs.sink()) {
		t.Error("the flush counters around a sink that may keep records claim it keeps none")
	}
}
