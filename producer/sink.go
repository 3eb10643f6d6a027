package producer

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Batch is what the producer hands a Sink: the records of one flushed
// batch, in order, for the sink's topic partition.
type Batch struct {
	Records []Record
	// Compression is the producer's Compression option, for sinks that
	// encode RecordBatches themselves.
	Compression kgo.CompressionCodec
}

// Sink writes batches to one topic partition. The producer calls Produce
// from background goroutines, possibly several at once (see MaxInFlight),
// so a Sink must be safe for concurrent use. Produce returns the offset of
// every record, in order, or an error that fails the whole batch; it must
// return promptly once ctx is done. A panic is recovered and fails only the
// batch being written. The producer does not touch b.Records after
// Produce returns, so a sink may keep them.
//
// Batches flushed one after the other may be written concurrently; a sink
// that must keep them in order writes them one at a time or sets
// MaxInFlight(1) on the producer.
type Sink interface {
	Produce(ctx context.Context, b Batch) ([]int64, error)
}

// recordsNotKept is implemented by the package's sinks that keep nothing
// of b.Records once Produce returns, so that the producer may reuse the
// slice for a later batch (KafkaSink).
type recordsNotKept interface {
	recordsNotKept()
}
