package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
)

// BenchmarkProduceWhileCleaning measures produce latency (16 goroutines,
// each ProduceSync of one keyed 1 KiB record at a time, acks=all) to a
// compacted topic while the broker's cleaner compacts a 128 MiB backlog of
// another compacted topic (cleaning=on), against the same load with the
// same backlog in a delete-policy topic that nothing cleans
// (cleaning=off), and with the cleaner limited to 40 MB/s by
// log.cleaner.io.max.bytes.per.second (cleaning=throttled). It reports
// p50 and p99 latency, records per second, the process's CPU per record
// (utime+stime; client and broker share the process) and the bytes per
// second the cleaner read and wrote during the run.
func BenchmarkProduceWhileCleaning(b *testing.B) {
	for _, mode := range []string{"off", "on", "throttled"} {
		b.Run("cleaning="+mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runProduceWhileCleaning(b, mode)
			}
		})
	}
}

func runProduceWhileCleaning(b *testing.B, mode string) {
	cleaning := mode != "off"
	b.StopTimer()
	n := startNode(b, broker.CleanerInterval(10*time.Millisecond))
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	seg, ratio, compact := "4194304", "0.01", "compact"
	// The backlog: 4 partitions x 32 MiB of updates over 2000 keys,
	// written with cleanup.policy=delete so nothing cleans it yet.
	if err := n.b.CreateTopic(ctx, "backlog", 4, map[string]string{"cleanup.policy": "delete", "segment.bytes": seg}); err != nil {
		b.Fatal(err)
	}
	if err := n.b.CreateTopic(ctx, "hot", 1, map[string]string{"cleanup.policy": compact, "min.cleanable.dirty.ratio": "0.5"}); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	val := make([]byte, 1024)
	for p := int32(0); p < 4; p++ {
		var rs []*kgo.Record
		for i := 0; i < 32*1024; i++ {
			for k := range val {
				val[k] = byte(rng.Uint32())
			}
			rs = append(rs, &kgo.Record{Topic: "backlog", Partition: p, Key: []byte(fmt.Sprint("k", rng.IntN(2000))), Value: append([]byte(nil), val...)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	if mode == "throttled" {
		kc, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
		if err != nil {
			b.Fatal(err)
		}
		rate := "40000000"
		rs, err := kadm.NewClient(kc).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.io.max.bytes.per.second", Value: &rate}}, 0)
		kc.Close()
		if err != nil || rs[0].Err != nil {
			b.Fatalf("set the cleaner rate: %v %v", err, rs)
		}
	}
	// Turn cleaning on for the backlog (the cleaner is woken at once).
	if cleaning {
		if err := alterTopic(n, "backlog", map[string]string{"cleanup.policy": compact, "segment.bytes": seg, "min.cleanable.dirty.ratio": ratio}); err != nil {
			b.Fatal(err)
		}
	}
	statsBefore := n.b.CleanerStats()
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	const workers, perWorker = 16, 1000
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	b.StartTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			v := make([]byte, 1024)
			for i := 0; i < perWorker; i++ {
				r := &kgo.Record{Topic: "hot", Key: []byte(fmt.Sprint("h", w, "-", i%50)), Value: v}
				t0 := time.Now()
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	statsAfter := n.b.CleanerStats()
	all := slices.Concat(lat...)
	slices.Sort(all)
	total := len(all)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(max(total, 1))
	b.ReportMetric(float64(all[total/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[total*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Microseconds()), "cpu-µs/record")
	b.ReportMetric(float64(statsAfter.BytesProcessed-statsBefore.BytesProcessed)/1e6/elapsed.Seconds(), "cleaner-MB/s")
}

// alterTopic replaces a topic's configs through the Kafka API (kadm).
func alterTopic(n *node, topic string, configs map[string]string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	var acs []kadm.AlterConfig
	for k, v := range configs {
		acs = append(acs, kadm.AlterConfig{Name: k, Value: &v})
	}
	rs, err := kadm.NewClient(cl).AlterTopicConfigsState(context.Background(), acs, topic)
	if err != nil {
		return err
	}
	return rs[0].Err
}
