package partition

import (
	"context"
	"testing"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
)

// BenchmarkProducerCheck is the idempotent-producer check of a one-batch
// append from the partition's producer, as the acceptor runs it.
func BenchmarkProducerCheck(b *testing.B) {
	tb := newProducerTable()
	hs := []batch.Header{{ProducerID: 7, LastOffsetDelta: 9}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		hs[0].BaseSequence = int32(i*10) & 0x7fffffff
		hs[0].MaxTimestamp = int64(i)
		if _, _, err := tb.check(hs, int64(i)*10); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdempotentAppend queues a 10-record idempotent batch on a
// partition over an in-memory filesystem and waits for it (acks=1), the
// broker's produce path below the request decoding. The batch's bytes
// are the same each time; its parsed header, which is all the checks
// read, carries the next sequence.
func BenchmarkIdempotentAppend(b *testing.B) {
	p, err := Open(Config{FS: vfs.NewMem(), Dir: "/data/topics/t/0", Topic: "t", Index: 0, Create: true,
		Storage: storage.Config{Preallocate: -1}, Acceptor: acceptor.Config{RetentionCheck: -1}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	raw := idemBatch(7, 0, 0, 10)
	var hdr [1]batch.Header
	if _, err := batch.Split(raw, func(h batch.Header, _ []byte) error { hdr[0] = h; return nil }); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var ap Append
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		hs := hdr[:]
		hs[0].BaseSequence = int32(i*10) & 0x7fffffff
		ap = Append{}
		pend, err := p.Enqueue(ctx, raw, hs, 10, false, &ap)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(ctx, pend); err != nil {
			b.Fatal(err)
		}
	}
}
