package producer

import (
	"fmt"
	"math/bits"
	"time"
)

// Record is one Kafka record as the producer hands it to a Sink.
type Record struct {
	Key       []byte // nil is a null key
	Value     []byte // nil is a null value (a tombstone on compacted topics)
	Headers   []RecordHeader
	Timestamp time.Time // the zero time means "now" (stamped by the aggregator or the sink)
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Aggregator builds batches from inputs of type I. Each accepted input gets
// a tag of type T; when the batch is flushed, the aggregator turns it into
// records and a StatusDeaggregator that maps the records' offsets and a tag
// back to that input's status of type S.
//
// The producer calls TryPush and Flush with its mutex held, never
// concurrently, so an Aggregator needs no locking of its own.
//
// Contract:
//   - TryPush either accepts the input and returns its tag, or returns an
//     error and leaves the batch as it was. ErrNoCapacity means "the batch
//     is full, flush it and try again"; on an empty batch the producer turns
//     it into ErrTooLarge. Any other error fails only that input.
//   - Flush returns everything pushed since the last Flush and leaves the
//     aggregator empty, even when it returns an error or panics (reset the
//     state first, then encode). An error or a panic fails every input of
//     that batch, and only those.
//   - A panic in TryPush or Flush is recovered and reported as an
//     AggregatorError wrapping a *PanicError, as for an error.
type Aggregator[I, T, S any] interface {
	TryPush(input I) (T, error)
	Flush() ([]Record, StatusDeaggregator[T, S], error)
}

// StatusDeaggregator maps a flushed batch's result back to each input.
// offsets holds, in order, the offset each record of the batch was written
// at. Deaggregate is called once per input, from that input's Produce call,
// concurrently for the inputs of one batch; it must be safe for concurrent
// use. An error or a panic fails only that input.
type StatusDeaggregator[T, S any] interface {
	Deaggregate(offsets []int64, tag T) (S, error)
}

// RecordAggregator is the default Aggregator: each input Record is one
// record of the batch, its tag is its index in the batch, and its status is
// its offset. It keeps the encoded RecordBatch (header and uncompressed
// records) within a byte limit, computed exactly as the in-process sink
// encodes it.
type RecordAggregator struct {
	max   int      // limit on the encoded batch size
	size  int      // encoded size of the batch so far, header included
	recs  []Record // the batch being built
	first int64    // the first record's timestamp in ms (the batch's base timestamp)
	now   func() time.Time
	// spare holds emptied record slices of batches already written, which
	// the producer hands back (see recycle), for later batches to fill
	// instead of allocating and growing slices of their own.
	spare [][]Record
}

// maxSpare bounds the slices a RecordAggregator keeps for reuse: one per
// batch that may be written while the next fills, and one more.
const maxSpare = 2

// NewRecordAggregator returns a RecordAggregator whose batches encode to at
// most maxBatchBytes bytes.
func NewRecordAggregator(maxBatchBytes int) *RecordAggregator {
	return &RecordAggregator{max: maxBatchBytes, size: recordBatchHeaderSize, now: time.Now}
}

// TryPush adds r to the batch; records with a zero Timestamp are stamped
// with the current time. It returns ErrNoCapacity when r does not fit in
// this batch, and ErrTooLarge when it could not fit even in an empty one.
func (a *RecordAggregator) TryPush(r Record) (int, error) {
	if r.Timestamp.IsZero() {
		r.Timestamp = a.now()
	}
	ms := r.Timestamp.UnixMilli()
	first := ms
	if len(a.recs) > 0 {
		first = a.first
	}
	n := encodedRecordSize(&r, int32(len(a.recs)), ms-first)
	if a.size+n > a.max {
		if len(a.recs) == 0 {
			return 0, fmt.Errorf("%w: a %d byte record in a %d byte batch limit", ErrTooLarge, n+recordBatchHeaderSize, a.max)
		}
		return 0, ErrNoCapacity
	}
	if len(a.recs) == 0 {
		a.first = ms
	}
	a.size += n
	a.recs = append(a.recs, r)
	return len(a.recs) - 1, nil
}

// Flush hands over the batch and starts a new, empty one.
func (a *RecordAggregator) Flush() ([]Record, StatusDeaggregator[int, int64], error) {
	recs := a.recs
	if n := len(a.spare); n > 0 {
		a.recs, a.spare = a.spare[n-1], a.spare[:n-1]
	} else {
		a.recs = make([]Record, 0, len(recs))
	}
	a.size = recordBatchHeaderSize
	return recs, offsetStatus{}, nil
}

// recycle takes back the records of a flushed batch once its sink call has
// returned, for a later batch to reuse. The producer calls it with its
// mutex held, like TryPush and Flush.
func (a *RecordAggregator) recycle(recs []Record) {
	if cap(recs) == 0 || len(a.spare) >= maxSpare {
		return
	}
	clear(recs) // drop the references to the callers' keys and values
	a.spare = append(a.spare, recs[:0])
}

// offsetStatus is the RecordAggregator's deaggregator: a tag is a record
// index and the status is that record's offset.
type offsetStatus struct{}

func (offsetStatus) Deaggregate(offsets []int64, tag int) (int64, error) {
	if tag < 0 || tag >= len(offsets) {
		return -1, fmt.Errorf("record %d of a batch whose result has %d offsets", tag, len(offsets))
	}
	return offsets[tag], nil
}

// encodedRecordSize is the size of r encoded as record number offsetDelta
// of a RecordBatch, with its timestamp tsDelta ms after the batch's base
// timestamp, including the record's own length prefix.
func encodedRecordSize(r *Record, offsetDelta int32, tsDelta int64) int {
	body := 1 + // attributes
		varlongLen(tsDelta) +
		varlongLen(int64(offsetDelta)) +
		bytesLen(r.Key) +
		bytesLen(r.Value) +
		varlongLen(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		body += varlongLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return varlongLen(int64(body)) + body
}

// bytesLen is the encoded size of a nullable varint-prefixed byte string.
func bytesLen(b []byte) int {
	if b == nil {
		return varlongLen(-1)
	}
	return varlongLen(int64(len(b))) + len(b)
}

// varlongLen is the size of v as a zig-zag varint, as Kafka encodes it
// (what binary.PutVarint writes): seven bits a byte.
func varlongLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return (bits.Len64(u|1) + 6) / 7
}
