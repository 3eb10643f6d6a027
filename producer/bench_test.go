package producer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"sluice/broker"
	"sluice/broker/brokertest"
	"sluice/producer"
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
// Both kgo clients use kgo.ProducerLinger(0) and otherwise franz-go's
// defaults (acks=all, idempotent, snappy). Each caller runs a closed loop;
// b.N inputs are shared among the callers. Reported: inputs/s, the p50 and
// p99 of one Produce call in µs, and the CPU time of the benchmark process
// (callers, producer, kgo clients and the broker, all in one process) per
// input and as a percentage of one core.
func BenchmarkProduce(b *testing.B) {
	brk := brokertest.Start(b)
	topicN := 0
	newTopic := func(b *testing.B) string {
		topicN++
		name := fmt.Sprintf("bench-%d", topicN)
		if err := brk.CreateTopic(context.Background(), name, 1, nil); err != nil {
			b.Fatal(err)
		}
		return name
	}
	newClient := func(b *testing.B) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brk.Addr()), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		return cl
	}
	value := make([]byte, 100)

	variants := []struct {
		name string
		// setup returns the function each caller calls once per input.
		setup func(b *testing.B) (produce func(ctx context.Context) error, done func())
	}{
		{"sluice", func(b *testing.B) (func(context.Context) error, func()) {
			p, err := producer.NewRecordProducer(producer.WithSink(producer.NewKafkaSink(newClient(b), newTopic(b), 0)))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := p.Produce(ctx, producer.Record{Value: value})
				return err
			}, func() { p.Close(context.Background()) }
		}},
		{"sluice-inflight2", func(b *testing.B) (func(context.Context) error, func()) {
			p, err := producer.NewRecordProducer(producer.MaxInFlight(2), producer.WithSink(producer.NewKafkaSink(newClient(b), newTopic(b), 0)))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := p.Produce(ctx, producer.Record{Value: value})
				return err
			}, func() { p.Close(context.Background()) }
		}},
		{"sluice-packing", func(b *testing.B) (func(context.Context) error, func()) {
			p, err := producer.New[[]byte, packTag, PackedStatus](&packer{maxRecord: 16 << 10}, producer.WithSink(producer.NewKafkaSink(newClient(b), newTopic(b), 0)))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := p.Produce(ctx, value)
				return err
			}, func() { p.Close(context.Background()) }
		}},
		{"sluice-inprocess", func(b *testing.B) (func(context.Context) error, func()) {
			p, err := producer.NewRecordProducer(producer.WithSink(producer.NewInProcessSink(brk, newTopic(b), 0, -1)))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context) error {
				_, err := p.Produce(ctx, producer.Record{Value: value})
				return err
			}, func() { p.Close(context.Background()) }
		}},
		{"franz-go", func(b *testing.B) (func(context.Context) error, func()) {
			cl, topic := newClient(b), newTopic(b)
			return func(ctx context.Context) error {
				return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: value}).FirstErr()
			}, func() {}
		}},
	}
	for _, callers := range []int{1, 16, 256, 4096} {
		for _, v := range variants {
			b.Run(fmt.Sprintf("callers=%d/%s", callers, v.name), func(b *testing.B) {
				produce, done := v.setup(b)
				defer done()
				runCallers(b, callers, produce)
			})
		}
	}
}

// runCallers shares b.N calls of produce among callers goroutines and
// reports throughput and latency percentiles. One untimed call first sets
// up what the first call would otherwise pay for inside the timing (the
// client's metadata, connection and producer id).
func runCallers(b *testing.B, callers int, produce func(context.Context) error) {
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
	cpu0 := processCPU(b)
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	cpu := processCPU(b) - cpu0
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
	b.ReportMetric(0, "ns/op")
}

// processCPU is the CPU time (user and system) the benchmark process has
// used so far: the callers, the producer, the kgo clients and the broker,
// which runs in the same process.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var _ producer.Appender = (*broker.Broker)(nil)
