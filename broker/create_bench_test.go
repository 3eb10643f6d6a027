package broker

import (
	"context"
	"fmt"
	"testing"
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
