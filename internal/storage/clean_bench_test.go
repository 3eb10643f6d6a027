package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

// BenchmarkCleanPass measures one compaction pass over a 32 MiB log on
// the OS filesystem: 1 KiB random values, 10 records per batch, 1000
// keys (so nearly every record is superseded), segments of 4 MiB, all
// sealed. MB/s is megabytes of log cleaned per second (the log's size
// over the pass's time: the pass reads it twice, once to map keys and
// once to rewrite, then writes the cleaned segments, fsyncs and swaps
// them in).
func BenchmarkCleanPass(b *testing.B) {
	for _, codec := range []batch.Codec{batch.CodecNone, batch.CodecLZ4} {
		b.Run("codec="+codec.String(), func(b *testing.B) {
			var cleaned, written int64
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				l := buildBenchLog(b, codec, 32<<20)
				cleaned += l.Size()
				b.StartTimer()
				start := time.Now()
				res, err := l.Clean(context.Background(), CleanOptions{Now: time.Now(), TargetSegmentBytes: 4 << 20})
				elapsed += time.Since(start)
				if err != nil || res.SegmentsWritten == 0 {
					b.Fatalf("pass: %+v %v", res, err)
				}
				written += res.BytesWritten
				b.StopTimer()
				l.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(cleaned)/1e6/elapsed.Seconds(), "MB/s")
			b.ReportMetric(float64(written)/float64(b.N)/1e6, "MB-written/pass")
		})
	}
}

// buildBenchLog writes about size bytes of keyed batches to a new log in
// a temporary directory and seals them.
func buildBenchLog(b *testing.B, codec batch.Codec, size int) *Log {
	b.Helper()
	l, err := Open(vfs.OS(), b.TempDir(), Config{SegmentBytes: 4 << 20, RetentionAge: -1})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 1024)
	var off int64
	for written := 0; written < size; {
		recs := make([]batch.Record, 10)
		for j := range recs {
			for k := range val {
				val[k] = byte(rng.Uint32())
			}
			recs[j] = batch.Record{OffsetDelta: int32(j), Timestamp: 1, Key: []byte(fmt.Sprintf("key-%d", rng.IntN(1000))), Value: append([]byte(nil), val...)}
		}
		p := batch.Params{BaseOffset: off, Codec: codec}.NoProducer()
		buf, err := batch.Append(nil, &p, recs)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Append(buf, nil); err != nil {
			b.Fatal(err)
		}
		off += int64(len(recs))
		written += len(buf)
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
	return l
}
