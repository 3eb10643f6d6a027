package producer

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	recbatch "github.com/sluicedb/sluice/internal/batch"
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
// first record has none). The bytes come from Sluice's one RecordBatch
// encoder (internal/batch); codec's compressor (with its level) is kgo's.
func (e *encoder) encode(dst []byte, recs []Record, codec kgo.CompressionCodec, nowMs int64) ([]byte, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("producer: cannot encode an empty batch")
	}
	c, err := e.compressor(codec)
	if err != nil {
		return nil, fmt.Errorf("producer: compression: %w", err)
	}
	base := nowMs
	if !recs[0].Timestamp.IsZero() {
		base = recs[0].Timestamp.UnixMilli()
	}
	brs := make([]recbatch.Record, len(recs))
	var hdrs []recbatch.RecordHeader
	for i := range recs {
		r := &recs[i]
		ts := base
		if !r.Timestamp.IsZero() {
			ts = r.Timestamp.UnixMilli()
		}
		br := recbatch.Record{Timestamp: ts, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		if len(r.Headers) > 0 {
			at := len(hdrs)
			for _, h := range r.Headers {
				hdrs = append(hdrs, recbatch.RecordHeader{Key: h.Key, Value: h.Value})
			}
			br.Headers = hdrs[at:len(hdrs):len(hdrs)]
		}
		brs[i] = br
	}
	p := recbatch.Params{PartitionLeaderEpoch: -1, SkipCodecIfLarger: true}.NoProducer()
	if c != nil {
		buf, _ := e.bufs.Get().(*bytes.Buffer)
		if buf == nil {
			buf = new(bytes.Buffer)
		}
		defer e.bufs.Put(buf)
		p.Compress = func(src []byte) ([]byte, recbatch.Codec) {
			buf.Reset()
			out, typ := c.Compress(buf, src)
			if out == nil {
				return nil, recbatch.CodecNone
			}
			return out, recbatch.Codec(typ)
		}
	}
	return recbatch.Append(dst, &p, brs)
}
