package producer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	recbatch "github.com/sluicedb/sluice/internal/batch"
)

// decodeBatch checks raw is one valid RecordBatch v2 and returns its records.
func decodeBatch(t testing.TB, raw []byte) (recbatch.Header, []kmsg.Record) {
	t.Helper()
	h, err := recbatch.Validate(raw)
	if err != nil {
		t.Fatalf("encoded batch is invalid: %v", err)
	}
	if h.Size() != len(raw) {
		t.Fatalf("batch declares %d bytes, encoding has %d", h.Size(), len(raw))
	}
	if err := h.CheckCount(); err != nil {
		t.Fatal(err)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	body := rb.Records
	if codec := kgo.CompressionCodecType(h.Compression()); codec != kgo.CodecNone {
		body, err = kgo.DefaultDecompressor().Decompress(body, codec)
		if err != nil {
			t.Fatalf("decompress: %v", err)
		}
	}
	recs := make([]kmsg.Record, 0, h.NumRecords)
	for len(body) > 0 {
		length, n := varint(body)
		if n <= 0 || int(length)+n > len(body) {
			t.Fatalf("bad record length prefix")
		}
		var r kmsg.Record
		if err := r.ReadFrom(body[:n+int(length)]); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
		body = body[n+int(length):]
	}
	if len(recs) != int(h.NumRecords) {
		t.Fatalf("decoded %d records, header says %d", len(recs), h.NumRecords)
	}
	return h, recs
}

func varint(b []byte) (int64, int) {
	var ux uint64
	for i := 0; i < len(b) && i < 10; i++ {
		ux |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return int64(ux>>1) ^ -int64(ux&1), i + 1
		}
	}
	return 0, -1
}

func TestEncodeRoundTrip(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	recs := []Record{
		{Value: []byte("plain")},
		{Key: []byte("k"), Value: bytes.Repeat([]byte("compressible "), 50), Timestamp: t0},
		{Key: []byte{}, Value: nil, Timestamp: t0.Add(-time.Second)}, // empty key, null value, earlier time
		{Value: []byte("h"), Headers: []RecordHeader{{"a", []byte("1")}, {"b", nil}}, Timestamp: t0.Add(time.Hour)},
	}
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	var enc encoder
	for _, codec := range codecs {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			const now = 1_600_000_000_000
			raw, err := enc.encode(nil, recs, codec, now)
			if err != nil {
				t.Fatal(err)
			}
			h, got := decodeBatch(t, raw)
			if h.BaseOffset != 0 || h.ProducerID != -1 || h.BaseTimestamp != now {
				t.Fatalf("header %+v", h)
			}
			if h.MaxTimestamp != t0.Add(time.Hour).UnixMilli() {
				t.Fatalf("max timestamp %d", h.MaxTimestamp)
			}
			for i, r := range got {
				want := recs[i]
				ts := int64(now)
				if !want.Timestamp.IsZero() {
					ts = want.Timestamp.UnixMilli()
				}
				if int(r.OffsetDelta) != i || h.BaseTimestamp+r.TimestampDelta64 != ts {
					t.Fatalf("record %d: offset delta %d, timestamp %d (want %d)", i, r.OffsetDelta, h.BaseTimestamp+r.TimestampDelta64, ts)
				}
				if !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) ||
					!bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) {
					t.Fatalf("record %d: key %q value %q", i, r.Key, r.Value)
				}
				if len(r.Headers) != len(want.Headers) {
					t.Fatalf("record %d: %d headers", i, len(r.Headers))
				}
				for j, hd := range r.Headers {
					if hd.Key != want.Headers[j].Key || !bytes.Equal(hd.Value, want.Headers[j].Value) {
						t.Fatalf("record %d header %d: %q=%q", i, j, hd.Key, hd.Value)
					}
				}
			}
			if codec != kgo.NoCompression() && h.Compression() == 0 {
				t.Fatalf("a compressible batch was left uncompressed with %v", codec)
			}
		})
	}
	if _, err := enc.encode(nil, nil, kgo.NoCompression(), 0); err == nil {
		t.Fatal("encoding an empty batch succeeded")
	}
}

// FuzzRecordAggregatorSize checks, for arbitrary records:
//   - the RecordAggregator never accepts a batch that encodes to more than
//     its limit, and its running size is exactly the encoded size;
//   - it answers ErrNoCapacity only for a non-empty batch, ErrTooLarge only
//     for a record that would not fit an empty one;
//   - the encoded batch is valid and decodes to the pushed records.
func FuzzRecordAggregatorSize(f *testing.F) {
	f.Add(300, []byte("key"), []byte("value"), uint8(1), int64(0), uint8(10))
	f.Add(128, []byte(nil), []byte(nil), uint8(0), int64(-5000), uint8(3))
	f.Add(4096, []byte("k"), bytes.Repeat([]byte("x"), 1000), uint8(3), int64(1<<40), uint8(9))
	f.Fuzz(func(t *testing.T, max int, key, value []byte, headers uint8, tsStep int64, n uint8) {
		if max < 128 || max > 1<<20 {
			return
		}
		a := NewRecordAggregator(max)
		base := time.UnixMilli(1_700_000_000_000)
		var pushed []Record
		for i := 0; i < int(n); i++ {
			r := Record{Key: key, Value: value, Timestamp: base.Add(time.Duration(tsStep*int64(i)%(1<<40)) * time.Millisecond)}
			for j := 0; j < int(headers%5); j++ {
				r.Headers = append(r.Headers, RecordHeader{Key: fmt.Sprint(j), Value: value})
			}
			tag, err := a.TryPush(r)
			switch {
			case err == nil:
				if tag != len(pushed) {
					t.Fatalf("tag %d, want %d", tag, len(pushed))
				}
				pushed = append(pushed, r)
			case len(pushed) == 0:
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("empty batch refused a record with %v, want ErrTooLarge", err)
				}
			default:
				if err != ErrNoCapacity {
					t.Fatalf("non-empty batch refused a record with %v, want ErrNoCapacity", err)
				}
			}
			if a.size > max {
				t.Fatalf("size %d over the limit %d", a.size, max)
			}
		}
		size := a.size
		recs, _, err := a.Flush()
		if err != nil || len(recs) != len(pushed) {
			t.Fatalf("Flush: %d records, %v; pushed %d", len(recs), err, len(pushed))
		}
		if a.size != recordBatchHeaderSize || len(a.recs) != 0 {
			t.Fatalf("Flush left the aggregator non-empty")
		}
		if len(recs) == 0 {
			return
		}
		var enc encoder
		raw, err := enc.encode(nil, recs, kgo.NoCompression(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) != size {
			t.Fatalf("encoded %d bytes, aggregator counted %d", len(raw), size)
		}
		_, got := decodeBatch(t, raw)
		for i := range got {
			if !bytes.Equal(got[i].Value, value) || !bytes.Equal(got[i].Key, key) {
				t.Fatalf("record %d does not round-trip", i)
			}
		}
	})
}

// varlongLen is the length binary.PutVarint writes, at every boundary.
func TestVarlongLen(t *testing.T) {
	vals := []int64{0, 1, -1, math.MaxInt64, math.MinInt64}
	for shift := 0; shift < 64; shift++ {
		v := int64(1) << shift
		vals = append(vals, v, v-1, v+1, -v, -v-1, -v+1)
	}
	var buf [binary.MaxVarintLen64]byte
	for _, v := range vals {
		if got, want := varlongLen(v), binary.PutVarint(buf[:], v); got != want {
			t.Fatalf("varlongLen(%d) = %d, want %d", v, got, want)
		}
	}
}
