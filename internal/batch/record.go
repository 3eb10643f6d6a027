package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Record is one record of a batch, its offset and timestamp absolute.
// Key, Value and header values are nil for null; a decoded record's
// slices alias the batch (or its decompressed records) and must be
// copied to outlive them.
type Record struct {
	Attributes  int8
	Timestamp   int64 // milliseconds; baseTimestamp + timestampDelta
	OffsetDelta int32 // offset minus the batch's base offset
	Key         []byte
	Value       []byte
	Headers     []RecordHeader
}

// RecordHeader is one header of a record.
type RecordHeader struct {
	Key   string
	Value []byte
}

// ErrBadRecord reports records that do not decode: a length that
// overruns, a count that disagrees with the header, trailing bytes.
var ErrBadRecord = errors.New("batch: malformed record")

// appendRecord appends r, encoded relative to baseTs, to dst:
//
//	length varint (bytes after it), attributes int8, timestampDelta varlong,
//	offsetDelta varint, key (varint length, -1 null), value (likewise),
//	header count varint, then per header key (length, not null) and value.
func appendRecord(dst []byte, r *Record, baseTs int64) []byte {
	n := 1 + varintLen(r.Timestamp-baseTs) + varintLen(int64(r.OffsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	dst = binary.AppendVarint(dst, int64(n))
	dst = append(dst, byte(r.Attributes))
	dst = binary.AppendVarint(dst, r.Timestamp-baseTs)
	dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytes(dst, h.Value)
	}
	return dst
}

func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

// reader walks encoded records; err is set at the first problem.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrBadRecord}, args...)...)
	}
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("%s: bad varint", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(what string, nullable bool) []byte {
	n := r.varint(what + " length")
	switch {
	case r.err != nil:
		return nil
	case n == -1 && nullable:
		return nil
	case n < 0 || n > int64(len(r.b)):
		r.fail("%s of %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// readRecord decodes one record from the front of r.
func (r *reader) record(rec *Record, baseTs int64) {
	n := r.varint("record length")
	if r.err != nil {
		return
	}
	if n < 1 || n > int64(len(r.b)) {
		r.fail("record of %d bytes, %d left", n, len(r.b))
		return
	}
	body := reader{b: r.b[:n]}
	r.b = r.b[n:]
	rec.Attributes = int8(body.b[0])
	body.b = body.b[1:]
	rec.Timestamp = baseTs + body.varint("timestamp delta")
	od := body.varint("offset delta")
	if od < 0 || od > math.MaxInt32 {
		body.fail("offset delta %d", od)
	}
	rec.OffsetDelta = int32(od)
	rec.Key = body.bytes("key", true)
	rec.Value = body.bytes("value", true)
	nh := body.varint("header count")
	if nh < 0 || nh > int64(len(body.b)) { // every header takes at least 2 bytes
		body.fail("header count %d", nh)
	}
	rec.Headers = rec.Headers[:0]
	for i := int64(0); i < nh && body.err == nil; i++ {
		k := body.bytes("header key", false)
		v := body.bytes("header value", true)
		rec.Headers = append(rec.Headers, RecordHeader{Key: string(k), Value: v})
	}
	if body.err == nil && len(body.b) != 0 {
		body.fail("%d bytes left after the record's fields", len(body.b))
	}
	if body.err != nil {
		r.err = body.err
	}
}

// Records decodes the records of the whole batch raw (as Validate
// accepts it; h its header), decompressing them when the batch is
// compressed, and calls fn for each in order. The Record passed to fn is
// reused between calls. It checks that the records fill the batch's
// records section exactly, that there are as many as the header's record
// count, and that offset deltas increase and do not pass lastOffsetDelta.
func Records(h *Header, raw []byte, fn func(r *Record) error) error {
	if h.Size() > len(raw) || h.Size() < HeaderSize {
		return ErrShort
	}
	body := raw[HeaderSize:h.Size()]
	if c := h.Compression(); c != CodecNone {
		var err error
		if body, err = decompress(nil, body, c, MaxDecompressed); err != nil {
			return err
		}
	}
	if h.NumRecords < 0 || int64(h.NumRecords) > int64(len(body)) { // a record takes at least 7 bytes
		return fmt.Errorf("%w: record count %d for %d bytes", ErrBadRecord, h.NumRecords, len(body))
	}
	r := reader{b: body}
	var rec Record
	prev := int32(-1)
	for i := int32(0); i < h.NumRecords; i++ {
		r.record(&rec, h.BaseTimestamp)
		if r.err != nil {
			return fmt.Errorf("record %d: %w", i, r.err)
		}
		if rec.OffsetDelta <= prev || rec.OffsetDelta > h.LastOffsetDelta {
			return fmt.Errorf("%w: record %d has offset delta %d after %d (lastOffsetDelta %d)", ErrBadRecord, i, rec.OffsetDelta, prev, h.LastOffsetDelta)
		}
		prev = rec.OffsetDelta
		if err := fn(&rec); err != nil {
			return err
		}
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrBadRecord, len(r.b), h.NumRecords)
	}
	return nil
}

// DecodeRecords returns copies-free records of the batch raw: each
// Record's slices alias raw or the decompressed records. See Records.
func DecodeRecords(h *Header, raw []byte) ([]Record, error) {
	var out []Record
	err := Records(h, raw, func(r *Record) error {
		c := *r
		c.Headers = append([]RecordHeader(nil), r.Headers...)
		out = append(out, c)
		return nil
	})
	return out, err
}
