package producer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	recbatch "sluice/internal/batch"
)

// recordBatchHeaderSize is the size of a RecordBatch v2 header.
const recordBatchHeaderSize = recbatch.HeaderSize

// encoder turns records into one RecordBatch v2, compressed with a codec.
// It is safe for concurrent use.
type encoder struct {
	mu    sync.Mutex                              // guards comps
	comps map[kgo.CompressionCodec]kgo.Compressor // one compressor per codec, built on first use

	bufs sync.Pool // *bytes.Buffer scratch space for compression
}

func (e *encoder) compressor(codec kgo.CompressionCodec) (kgo.Compressor, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.comps[codec]; ok {
		return c, nil
	}
	c, err := kgo.DefaultCompressor(codec)
	if err != nil {
		return nil, err
	}
	if e.comps == nil {
		e.comps = make(map[kgo.CompressionCodec]kgo.Compressor)
	}
	e.comps[codec] = c
	return c, nil
}

// encode appends to dst one RecordBatch v2 holding recs, with base offset 0,
// no producer id (not idempotent), CRC32C set, and the records compressed
// with codec when that makes them smaller. Records with a zero timestamp get
// the batch's base timestamp, which is the first record's (or nowMs when the
// first record has none).
func (e *encoder) encode(dst []byte, recs []Record, codec kgo.CompressionCodec, nowMs int64) ([]byte, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("producer: cannot encode an empty batch")
	}
	base := nowMs
	if !recs[0].Timestamp.IsZero() {
		base = recs[0].Timestamp.UnixMilli()
	}
	maxTs := base
	var body, scratch []byte
	var kr kmsg.Record
	for i := range recs {
		r := &recs[i]
		ts := base
		if !r.Timestamp.IsZero() {
			ts = r.Timestamp.UnixMilli()
		}
		maxTs = max(maxTs, ts)
		kr = kmsg.Record{
			TimestampDelta64: ts - base,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
		}
		if len(r.Headers) > 0 {
			kr.Headers = make([]kmsg.Header, len(r.Headers))
			for j, h := range r.Headers {
				kr.Headers[j] = kmsg.Header{Key: h.Key, Value: h.Value}
			}
		}
		// The record's length prefix counts the bytes after it: encode with
		// a zero length (one byte), then copy it behind the real one.
		scratch = kr.AppendTo(scratch[:0])
		body = binary.AppendVarint(body, int64(len(scratch)-1))
		body = append(body, scratch[1:]...)
	}

	var attrs int16
	if c, err := e.compressor(codec); err != nil {
		return nil, fmt.Errorf("producer: compression: %w", err)
	} else if c != nil {
		buf, _ := e.bufs.Get().(*bytes.Buffer)
		if buf == nil {
			buf = new(bytes.Buffer)
		}
		buf.Reset()
		out, typ := c.Compress(buf, body)
		if out != nil && len(out) < len(body) {
			body = append([]byte(nil), out...)
			attrs = int16(typ)
		}
		e.bufs.Put(buf)
	}

	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       base,
		MaxTimestamp:         maxTs,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              body,
	}
	start := len(dst)
	dst = rb.AppendTo(dst)
	b := dst[start:]
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-recbatch.LengthOffset))
	binary.BigEndian.PutUint32(b[17:], recbatch.Checksum(b))
	return dst, nil
}
