package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var codecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// sampleRecords covers null and empty keys and values, headers with null
// values, negative timestamp deltas and offset-delta gaps (as compaction
// leaves them).
func sampleRecords() []Record {
	return []Record{
		{Timestamp: 1_700_000_000_000, OffsetDelta: 0, Value: []byte("plain")},
		{Timestamp: 1_700_000_000_500, OffsetDelta: 1, Key: []byte("k"), Value: bytes.Repeat([]byte("compressible "), 60)},
		{Timestamp: 1_699_999_999_000, OffsetDelta: 2, Key: []byte{}, Value: nil},
		{Timestamp: 1_700_000_003_600, OffsetDelta: 5, Value: []byte("h"), Headers: []RecordHeader{{"a", []byte("1")}, {"b", nil}, {"", []byte{}}}},
	}
}

// kmsgDecode decodes raw with franz-go's kmsg and kgo's decompressor,
// independently of this package.
func kmsgDecode(t *testing.T, raw []byte) (kmsg.RecordBatch, []kmsg.Record) {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(raw); err != nil {
		t.Fatalf("kmsg.RecordBatch.ReadFrom: %v", err)
	}
	if int(rb.Length)+LengthOffset != len(raw) {
		t.Fatalf("batchLength %d for %d bytes", rb.Length, len(raw))
	}
	body := rb.Records
	if c := kgo.CompressionCodecType(rb.Attributes & 7); c != kgo.CodecNone {
		var err error
		if body, err = kgo.DefaultDecompressor().Decompress(body, c); err != nil {
			t.Fatalf("kgo decompress %v: %v", c, err)
		}
	}
	var recs []kmsg.Record
	for len(body) > 0 {
		n, k := binary.Varint(body)
		if k <= 0 || int(n)+k > len(body) {
			t.Fatalf("bad record length")
		}
		var r kmsg.Record
		if err := r.ReadFrom(body[:k+int(n)]); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
		body = body[k+int(n):]
	}
	return rb, recs
}

// TestAppendMatchesKmsg encodes records with Append and checks, with
// franz-go's independent decoder, every header field and record; for
// uncompressed batches the bytes must equal kmsg's own encoding.
func TestAppendMatchesKmsg(t *testing.T) {
	for _, c := range codecs {
		for _, txn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/txn=%v", c, txn), func(t *testing.T) {
				recs := sampleRecords()
				p := Params{BaseOffset: 42, PartitionLeaderEpoch: 7, Codec: c, Transactional: txn,
					ProducerID: 9001, ProducerEpoch: 3, BaseSequence: 100}
				raw, err := Append([]byte("prefix"), &p, recs)
				if err != nil {
					t.Fatal(err)
				}
				if string(raw[:6]) != "prefix" {
					t.Fatal("Append overwrote dst")
				}
				raw = raw[6:]
				h, err := Validate(raw)
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				rb, got := kmsgDecode(t, raw)
				wantAttrs := int16(c)
				if txn {
					wantAttrs |= AttrTransactional
				}
				if rb.FirstOffset != 42 || rb.PartitionLeaderEpoch != 7 || rb.Magic != 2 || rb.Attributes != wantAttrs ||
					rb.LastOffsetDelta != 5 || rb.FirstTimestamp != recs[0].Timestamp || rb.MaxTimestamp != recs[3].Timestamp ||
					rb.ProducerID != 9001 || rb.ProducerEpoch != 3 || rb.FirstSequence != 100 || rb.NumRecords != 4 ||
					uint32(rb.CRC) != h.CRC {
					t.Fatalf("kmsg reads header %+v", rb)
				}
				if len(got) != len(recs) {
					t.Fatalf("kmsg reads %d records, want %d", len(got), len(recs))
				}
				for i, r := range got {
					w := recs[i]
					if rb.FirstTimestamp+r.TimestampDelta64 != w.Timestamp || r.OffsetDelta != w.OffsetDelta ||
						!sameBytes(r.Key, w.Key) || !sameBytes(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
						t.Fatalf("record %d: kmsg reads %+v, want %+v", i, r, w)
					}
					for j, hd := range r.Headers {
						if hd.Key != w.Headers[j].Key || !sameBytes(hd.Value, w.Headers[j].Value) {
							t.Fatalf("record %d header %d: %q=%q", i, j, hd.Key, hd.Value)
						}
					}
				}
				if c == CodecNone {
					if want := kmsgEncode(t, &rb, got); !bytes.Equal(raw, want) {
						t.Fatalf("Append's bytes differ from kmsg's encoding of the same batch")
					}
				}
				// And our own decoder agrees.
				mine, err := DecodeRecords(&h, raw)
				if err != nil {
					t.Fatalf("DecodeRecords: %v", err)
				}
				if !sameRecords(mine, recs) {
					t.Fatalf("DecodeRecords = %+v, want %+v", mine, recs)
				}
			})
		}
	}
}

// kmsgEncode encodes a batch with kmsg alone: records with their length
// prefix, then the batch with its length and CRC.
func kmsgEncode(t *testing.T, rb *kmsg.RecordBatch, recs []kmsg.Record) []byte {
	t.Helper()
	var body []byte
	for _, r := range recs {
		r.Length = 0
		enc := r.AppendTo(nil) // Length 0 is one byte
		body = binary.AppendVarint(body, int64(len(enc)-1))
		body = append(body, enc[1:]...)
	}
	b := *rb
	b.Records = body
	b.Length = int32(HeaderSize - LengthOffset + len(body))
	b.CRC = 0
	out := b.AppendTo(nil)
	b.CRC = int32(Checksum(out))
	return b.AppendTo(nil)
}

// TestDecodeKmsgBatches decodes batches that franz-go's client encodes
// (kgo's compressors, kmsg's framing) with every codec.
func TestDecodeKmsgBatches(t *testing.T) {
	recs := sampleRecords()
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			var body []byte
			for i := range recs {
				r := kmsg.Record{TimestampDelta64: recs[i].Timestamp - recs[0].Timestamp, OffsetDelta: recs[i].OffsetDelta, Key: recs[i].Key, Value: recs[i].Value}
				for _, h := range recs[i].Headers {
					r.Headers = append(r.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
				}
				enc := r.AppendTo(nil)
				body = binary.AppendVarint(body, int64(len(enc)-1))
				body = append(body, enc[1:]...)
			}
			attrs := int16(0)
			if c != CodecNone {
				comp, err := kgo.DefaultCompressor(kgoCodec(c))
				if err != nil {
					t.Fatal(err)
				}
				out, typ := comp.Compress(new(bytes.Buffer), body)
				if Codec(typ) != c {
					t.Fatalf("kgo compressed with %v", typ)
				}
				body, attrs = append([]byte(nil), out...), int16(c)
			}
			rb := kmsg.RecordBatch{Magic: 2, Attributes: attrs, LastOffsetDelta: 5, FirstTimestamp: recs[0].Timestamp,
				MaxTimestamp: recs[3].Timestamp, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 4, Records: body}
			rb.Length = int32(HeaderSize - LengthOffset + len(body))
			rb.CRC = int32(Checksum(rb.AppendTo(nil)))
			raw := rb.AppendTo(nil)
			h, err := Validate(raw)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeRecords(&h, raw)
			if err != nil {
				t.Fatalf("DecodeRecords: %v", err)
			}
			if !sameRecords(got, recs) {
				t.Fatalf("decoded %+v, want %+v", got, recs)
			}
		})
	}
}

func kgoCodec(c Codec) kgo.CompressionCodec {
	switch c {
	case CodecGzip:
		return kgo.GzipCompression()
	case CodecSnappy:
		return kgo.SnappyCompression()
	case CodecLZ4:
		return kgo.Lz4Compression()
	case CodecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }

func sameRecords(a, b []Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Attributes != y.Attributes || x.Timestamp != y.Timestamp || x.OffsetDelta != y.OffsetDelta ||
			!sameBytes(x.Key, y.Key) || !sameBytes(x.Value, y.Value) || len(x.Headers) != len(y.Headers) {
			return false
		}
		for j := range x.Headers {
			if x.Headers[j].Key != y.Headers[j].Key || !sameBytes(x.Headers[j].Value, y.Headers[j].Value) {
				return false
			}
		}
	}
	return true
}

// TestRewrite drops records as compaction does: the rebuilt batch keeps
// its codec, producer fields, flags and offset range, and holds exactly
// the kept records.
func TestRewrite(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.String(), func(t *testing.T) {
			p := Params{BaseOffset: 1000, Codec: c, Transactional: true, ProducerID: 5, ProducerEpoch: 1, BaseSequence: 10}
			raw, err := Append(nil, &p, sampleRecords())
			if err != nil {
				t.Fatal(err)
			}
			h, _ := Validate(raw)
			out, err := Rewrite(nil, &h, raw, func(r *Record) bool { return r.OffsetDelta != 1 })
			if err != nil {
				t.Fatal(err)
			}
			nh, err := Validate(out)
			if err != nil {
				t.Fatalf("rewritten batch: %v", err)
			}
			if nh.Compression() != c || nh.BaseOffset != 1000 || nh.LastOffsetDelta != 5 || nh.NumRecords != 3 ||
				!nh.Transactional() || nh.ProducerID != 5 || nh.ProducerEpoch != 1 || nh.BaseSequence != 10 {
				t.Fatalf("rewritten header %+v", nh)
			}
			got, err := DecodeRecords(&nh, out)
			if err != nil {
				t.Fatal(err)
			}
			want := sampleRecords()
			want = append(want[:1], want[2:]...)
			if !sameRecords(got, want) {
				t.Fatalf("kept %+v, want %+v", got, want)
			}
			// Dropping every record keeps an empty batch with its offset range.
			out, err = Rewrite(nil, &h, raw, func(*Record) bool { return false })
			if err != nil {
				t.Fatal(err)
			}
			if eh, err := Validate(out); err != nil || eh.NumRecords != 0 || eh.LastOffsetDelta != 5 || eh.BaseSequence != 10 {
				t.Fatalf("emptied batch %+v, %v", eh, err)
			}
		})
	}
}

func TestAppendRejectsBadOffsets(t *testing.T) {
	p := Params{}.NoProducer()
	recs := []Record{{OffsetDelta: 1}, {OffsetDelta: 1}}
	if out, err := Append([]byte("x"), &p, recs); err == nil || string(out) != "x" {
		t.Fatalf("Append with repeated offset delta = %q, %v", out, err)
	}
}

func TestSkipCodecIfLarger(t *testing.T) {
	p := Params{Codec: CodecGzip, SkipCodecIfLarger: true}.NoProducer()
	raw, err := Append(nil, &p, []Record{{Value: []byte{1, 2, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := Validate(raw); h.Compression() != CodecNone {
		t.Fatalf("a 3-byte value was stored with %v", h.Compression())
	}
}

func TestMarker(t *testing.T) {
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		m := Marker{Type: typ, ProducerID: 77, ProducerEpoch: 4, CoordinatorEpoch: 12, Timestamp: 1_700_000_000_000}
		raw := AppendMarker(nil, 500, 2, m)
		h, err := Validate(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Control() || !h.Transactional() || h.BaseOffset != 500 || h.PartitionLeaderEpoch != 2 ||
			h.NumRecords != 1 || h.LastOffsetDelta != 0 || h.BaseSequence != -1 || h.ProducerID != 77 || h.ProducerEpoch != 4 {
			t.Fatalf("marker header %+v", h)
		}
		got, err := ParseMarker(&h, raw)
		if err != nil || got != m {
			t.Fatalf("ParseMarker = %+v, %v; want %+v", got, err, m)
		}
		// franz-go reads the same control record: key version 0 and
		// type, value version 0 and coordinator epoch.
		_, recs := kmsgDecode(t, raw)
		var key kmsg.ControlRecordKey
		if err := key.ReadFrom(recs[0].Key); err != nil || key.Version != 0 || int16(key.Type) != int16(typ) {
			t.Fatalf("kmsg control key %+v, %v", key, err)
		}
		var val kmsg.EndTxnMarker
		if err := val.ReadFrom(recs[0].Value); err != nil || val.Version != 0 || val.CoordinatorEpoch != 12 {
			t.Fatalf("kmsg marker value %+v, %v", val, err)
		}
	}
	// Not markers: a data batch, an unknown control type.
	p := Params{}.NoProducer()
	data, _ := Append(nil, &p, sampleRecords())
	h, _ := Validate(data)
	if _, err := ParseMarker(&h, data); !errors.Is(err, ErrNotControl) {
		t.Fatalf("ParseMarker(data batch) = %v", err)
	}
	p.Control = true
	odd, _ := Append(nil, &p, []Record{{Key: []byte{0, 0, 0, 9}, Value: []byte{0, 0, 0, 0, 0, 1}}})
	h, _ = Validate(odd)
	if _, err := ParseMarker(&h, odd); !errors.Is(err, ErrNotControl) {
		t.Fatalf("ParseMarker(control type 9) = %v", err)
	}
}

// TestDecompressBomb: a batch whose records would decompress past
// the limit (MaxDecompressed in Records) is refused, not decoded.
func TestDecompressBomb(t *testing.T) {
	const limit = 1 << 20
	big := make([]byte, limit+1)
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		z, err := compress(nil, big, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decompress(nil, z, c, limit); !errors.Is(err, ErrCodec) {
			t.Fatalf("%v: decompressing %d bytes: %v, want ErrCodec", c, len(big), err)
		}
		if out, err := decompress(nil, z, c, limit+1); err != nil || !bytes.Equal(out, big) {
			t.Fatalf("%v: decompressing within the limit: %d bytes, %v", c, len(out), err)
		}
	}
}
