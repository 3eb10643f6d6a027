package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// BenchmarkCreateTopic creates a topic of n partitions on a broker with
// its write-ahead log, as CreateTopics does, and reports the heap
// allocated per partition: what a fresh broker's first touches of new
// memory scale with.
//
//	go test ./broker -run '^$' -bench CreateTopic -benchmem
func BenchmarkCreateTopic(b *testing.B) {
	for _, n := range []int32{256, 2000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			brk, err := New(DataDir(b.TempDir()), ListenAddr("127.0.0.1:0"))
			if err != nil {
				b.Fatal(err)
			}
			defer brk.Close()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				if err := brk.CreateTopic(context.Background(), fmt.Sprintf("t%d", i), n, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/partition")
		})
	}
}

// TestCreatePartitionsInParallel: a topic of parallelCreateMin or more
// partitions is made by several goroutines (createPartitions); every
// partition sits at its index and takes and serves records, and deleting
// the topic leaves no goroutine behind (the package's leak check).
func TestCreatePartitionsInParallel(t *testing.T) {
	tb := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = parallelCreateMin + 3
	if err := tb.b.CreateTopic(ctx, "wide", n, nil); err != nil {
		t.Fatal(err)
	}
	tp := tb.b.lookup("wide")
	if len(tp.parts) != n {
		t.Fatalf("%d partitions made, want %d", len(tp.parts), n)
	}
	for i, p := range tp.parts {
		if p == nil || p.Index() != int32(i) || p.Topic() != "wide" {
			t.Fatalf("partition %d is %v", i, p)
		}
	}
	for _, i := range []int32{0, n / 2, n - 1} {
		if _, err := tb.b.AppendBatch(ctx, "wide", i, storagetest.MakeBatch(3, 10, 1), -1); err != nil {
			t.Fatalf("append to partition %d: %v", i, err)
		}
		if got := tb.b.partition("wide", i).NextOffset(); got != 3 {
			t.Fatalf("partition %d ends at %d after 3 records, want 3", i, got)
		}
	}
	if err := tb.b.deleteTopic("wide"); err != nil {
		t.Fatal(err)
	}
}
