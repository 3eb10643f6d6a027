package integration

// Benchmarks of the broker against kfake, franz-go's in-process broker,
// with the same franz-go client (default settings: idempotent, acks=all)
// in the same run. Run them with:
//
//	go -C integration test . -run '^$' -bench . -benchtime 3s
//
// The Sluice broker runs with fsync policy "always" (every acknowledged
// write fsynced before the reply); kfake runs in memory and with
// DataDir+SyncWrites (fsync per batch).

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"

	"github.com/sluicedb/sluice/broker"
)

const benchTopic = "bench"

// target is a broker to benchmark: an address with one partition of
// benchTopic, and a way to stop it.
type target struct {
	name  string
	start func(b *testing.B) (addr string, stop func())
}

var targets = []target{
	{"sluice", func(b *testing.B) (string, func()) {
		br, err := broker.New(broker.DataDir(b.TempDir()), broker.ListenAddr("127.0.0.1:0"))
		if err != nil {
			b.Fatal(err)
		}
		if err := br.Start(); err != nil {
			b.Fatal(err)
		}
		if err := br.CreateTopic(context.Background(), benchTopic, 1, nil); err != nil {
			b.Fatal(err)
		}
		return br.Addr(), func() { br.Close() }
	}},
	{"kfake-mem", func(b *testing.B) (string, func()) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, benchTopic))
		if err != nil {
			b.Fatal(err)
		}
		return c.ListenAddrs()[0], c.Close
	}},
	{"kfake-sync", func(b *testing.B) (string, func()) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, benchTopic),
			kfake.DataDir(b.TempDir()), kfake.SyncWrites())
		if err != nil {
			b.Fatal(err)
		}
		return c.ListenAddrs()[0], c.Close
	}},
}

func benchClient(b *testing.B, addr string, opts ...kgo.Opt) *kgo.Client {
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic(benchTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Values are random, so compression would only cost CPU; leaving
		// it off measures the brokers rather than the client's codec.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	return cl
}

// produceAsync produces n records of size bytes, pipelined, and waits for
// every acknowledgement.
func produceAsync(b *testing.B, cl *kgo.Client, n, size int) {
	value := randomValue(size)
	var wg sync.WaitGroup
	var once sync.Once
	wg.Add(n)
	for i := 0; i < n; i++ {
		cl.Produce(context.Background(), &kgo.Record{Value: value, Partition: 0}, func(_ *kgo.Record, err error) {
			if err != nil {
				once.Do(func() { b.Error(err) })
			}
			wg.Done()
		})
	}
	wg.Wait()
}

// randomValue returns incompressible bytes.
func randomValue(size int) []byte {
	v := make([]byte, size)
	rand.Read(v)
	return v
}

func forTargets(b *testing.B, fn func(b *testing.B, addr string)) {
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			addr, stop := tg.start(b)
			defer stop()
			fn(b, addr)
		})
	}
}

// BenchmarkProduceAsync100B: (a) pipelined produce of 100 B records to
// one partition.
func BenchmarkProduceAsync100B(b *testing.B) {
	forTargets(b, func(b *testing.B, addr string) {
		cl := benchClient(b, addr)
		defer cl.Close()
		produceAsync(b, cl, 1000, 100) // warm up: metadata, producer id
		b.ResetTimer()
		produceAsync(b, cl, b.N, 100)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkProduceSync64: (b) 64 goroutines, each calling ProduceSync
// with one record at a time.
func BenchmarkProduceSync64(b *testing.B) {
	const callers = 64
	forTargets(b, func(b *testing.B, addr string) {
		cl := benchClient(b, addr)
		defer cl.Close()
		produceAsync(b, cl, 1000, 100)
		value := randomValue(100)
		lat := make([][]time.Duration, callers)
		b.ResetTimer()
		var wg sync.WaitGroup
		for g := 0; g < callers; g++ {
			n := b.N / callers
			if g < b.N%callers {
				n++
			}
			wg.Add(1)
			go func(g, n int) {
				defer wg.Done()
				l := make([]time.Duration, 0, n)
				for i := 0; i < n; i++ {
					start := time.Now()
					if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: value, Partition: 0}).FirstErr(); err != nil {
						b.Error(err)
						return
					}
					l = append(l, time.Since(start))
				}
				lat[g] = l
			}(g, n)
		}
		wg.Wait()
		b.StopTimer()
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		reportLatency(b, all)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

func reportLatency(b *testing.B, all []time.Duration) {
	if len(all) == 0 {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// BenchmarkConsume: (c) consume records back from the start; the records
// are produced before the timer starts.
func BenchmarkConsume(b *testing.B) {
	forTargets(b, func(b *testing.B, addr string) {
		pcl := benchClient(b, addr)
		produceAsync(b, pcl, b.N, 100)
		pcl.Close()
		cl := benchClient(b, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			benchTopic: {0: kgo.NewOffset().AtStart()},
		}), kgo.FetchMaxBytes(64<<20))
		defer cl.Close()
		b.ResetTimer()
		got := 0
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for got < b.N {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				b.Fatalf("consumed %d of %d", got, b.N)
			}
			fs.EachError(func(_ string, _ int32, err error) { b.Fatal(err) })
			got += fs.NumRecords()
		}
		b.StopTimer()
		b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkProduce16KiB: (d) pipelined produce of 16 KiB records; compare
// its MB/s with BenchmarkDiskBaseline.
func BenchmarkProduce16KiB(b *testing.B) {
	const size = 16 << 10
	forTargets(b, func(b *testing.B, addr string) {
		cl := benchClient(b, addr, kgo.ProducerBatchMaxBytes(1<<20))
		defer cl.Close()
		produceAsync(b, cl, 100, size)
		b.SetBytes(size)
		b.ResetTimer()
		produceAsync(b, cl, b.N, size)
	})
}

// BenchmarkDiskBaseline is the raw disk: sequential 1 MiB writes, each
// followed by fdatasync, in the same temp directory the brokers use.
func BenchmarkDiskBaseline(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
}
