package mirror

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkMirror copies b.N records from a Sluice broker to a 3-broker
// kfake cluster, both in this process: impl=mirror is `sluice mirror
// --once` (transactional, positions committed with the records);
// impl=baseline is a hand-written franz-go consume+produce loop over the
// same data (idempotent, no positions). Filling the source is untimed.
// cpu-us/rec is this process's utime+stime (both brokers and the copier)
// per record.
func BenchmarkMirror(b *testing.B) {
	for _, size := range []int{100, 16 << 10} {
		for _, impl := range []string{"mirror", "baseline"} {
			b.Run(fmt.Sprintf("size=%d/impl=%s", size, impl), func(b *testing.B) {
				src, tgt := sluiceCluster(b), kfakeCluster(b)
				const topic, parts = "bench", 4
				createTopic(b, src, topic, parts, nil)
				fill(b, src, topic, parts, size, b.N)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()

				if impl == "baseline" {
					createTopic(b, tgt, topic, parts, nil) // the mirror creates its own, timed
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				cpu0 := cpuTime()
				b.ResetTimer()
				start := time.Now()
				switch impl {
				case "mirror":
					rep, err := Run(ctx, Config{From: src.addrs, To: tgt.addrs, Once: true, Logger: quietLogger()})
					if err != nil {
						b.Fatal(err)
					}
					if rep.Records != int64(b.N) {
						b.Fatalf("copied %d records, want %d", rep.Records, b.N)
					}
				case "baseline":
					baseline(b, ctx, src, tgt, topic, parts, b.N)
				}
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/rec")
			})
		}
	}
}

func fill(b *testing.B, c cluster, topic string, parts, size, n int) {
	cl := client(b, c, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	value := make([]byte, size)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	for range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	cl.Close()
}

// baseline copies n records with a plain franz-go consumer and producer:
// what a user would write by hand without positions or transactions.
func baseline(b *testing.B, ctx context.Context, src, tgt cluster, topic string, parts, n int) {
	offs := map[int32]kgo.Offset{}
	for p := range parts {
		offs[int32(p)] = kgo.NewOffset().AtStart()
	}
	cons := client(b, src, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	prod := client(b, tgt, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	errc := make(chan error, 1)
	for got := 0; got < n; {
		fs := cons.PollRecords(ctx, 10000)
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			prod.Produce(ctx, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp},
				func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errc <- err:
						default:
						}
					}
				})
		})
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
}

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
