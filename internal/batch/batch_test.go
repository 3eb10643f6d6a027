package batch

import (
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encode builds a RecordBatch v2 holding n records with kmsg and sets its CRC.
func encode(n int, value string) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(value)}
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{
		Magic:           2,
		LastOffsetDelta: int32(n - 1),
		FirstTimestamp:  1000,
		MaxTimestamp:    1000 + int64(n),
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(n),
		Records:         recs,
	}
	b := rb.AppendTo(nil)
	rb.Length = int32(len(b) - LengthOffset)
	b = rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

func TestValidate(t *testing.T) {
	good := encode(3, "hello")
	h, err := Validate(good)
	if err != nil {
		t.Fatalf("valid batch: %v", err)
	}
	if h.Size() != len(good) || h.NumRecords != 3 || h.LastOffsetDelta != 2 || h.MaxTimestamp != 1003 {
		t.Fatalf("header %+v does not match the encoded batch (len %d)", h, len(good))
	}
	if err := h.CheckCount(); err != nil {
		t.Fatalf("CheckCount: %v", err)
	}

	mutate := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return f(b)
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short header", good[:HeaderSize-1], ErrShort},
		{"truncated body", good[:len(good)-1], ErrShort},
		{"bad magic", mutate(func(b []byte) []byte { b[16] = 1; return b }), ErrBadMagic},
		{"flipped value byte", mutate(func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }), ErrBadCRC},
		{"tiny length", mutate(func(b []byte) []byte { b[8], b[9], b[10], b[11] = 0, 0, 0, 3; return b }), ErrBadLength},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Validate(c.b); !errors.Is(err, c.want) {
				t.Fatalf("Validate = %v, want %v", err, c.want)
			}
		})
	}
}

func TestBaseOffsetOutsideCRC(t *testing.T) {
	b := encode(2, "x")
	SetBaseOffset(b, 12345)
	SetPartitionLeaderEpoch(b, 7)
	h, err := Validate(b)
	if err != nil {
		t.Fatalf("after SetBaseOffset: %v", err)
	}
	if h.BaseOffset != 12345 || h.LastOffset() != 12346 || h.PartitionLeaderEpoch != 7 {
		t.Fatalf("header %+v", h)
	}
}

func TestCheckCount(t *testing.T) {
	b := encode(4, "x")
	b[60] = 9 // recordCount's low byte: 4 -> 9
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.CheckCount(); !errors.Is(err, ErrBadCount) {
		t.Fatalf("CheckCount = %v, want ErrBadCount", err)
	}
}

func TestSplit(t *testing.T) {
	var buf []byte
	for i := 1; i <= 3; i++ {
		buf = append(buf, encode(i, "v")...)
	}
	var counts []int32
	pos, err := Split(buf, func(h Header, raw []byte) error {
		counts = append(counts, h.NumRecords)
		return nil
	})
	if err != nil || pos != len(buf) || len(counts) != 3 || counts[2] != 3 {
		t.Fatalf("Split = %d, %v, counts %v", pos, err, counts)
	}
	bad := append(append([]byte(nil), buf...), 1, 2, 3)
	pos, err = Split(bad, func(Header, []byte) error { return nil })
	if !errors.Is(err, ErrShort) || pos != len(buf) {
		t.Fatalf("Split with trailing garbage = %d, %v; want %d, ErrShort", pos, err, len(buf))
	}
}

// FuzzValidate checks, for arbitrary bytes:
//   - Validate and Split never panic;
//   - a batch Validate accepts fits in the input and its CRC is right;
//   - Split consumes exactly the bytes of the batches it reports, in order.
func FuzzValidate(f *testing.F) {
	f.Add(encode(1, "a"))
	f.Add(append(encode(2, "bb"), encode(1, "c")...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := Validate(b); err == nil {
			if h.Size() > len(b) || h.Size() < HeaderSize {
				t.Fatalf("accepted batch of size %d from %d bytes", h.Size(), len(b))
			}
			if Checksum(b[:h.Size()]) != h.CRC {
				t.Fatal("accepted a batch with a wrong CRC")
			}
		}
		total := 0
		pos, err := Split(b, func(h Header, raw []byte) error {
			if len(raw) != h.Size() {
				t.Fatalf("raw %d bytes, header says %d", len(raw), h.Size())
			}
			total += len(raw)
			return nil
		})
		if pos != total {
			t.Fatalf("Split stopped at %d after %d bytes of batches", pos, total)
		}
		if err == nil && pos != len(b) {
			t.Fatalf("Split returned nil error at %d of %d", pos, len(b))
		}
	})
}

// BenchmarkSplit is the cost of one validating pass (header, CRC32C) over
// a coalesced write: the pass storage.Log.Append no longer makes for
// produce batches, whose headers the broker parsed once.
func BenchmarkSplit(b *testing.B) {
	for _, shape := range []struct {
		name         string
		n, valueSize int
	}{{"16x1KiB", 16, 1024 - 70}, {"1x128KiB", 1, 128<<10 - 70}} {
		b.Run(shape.name, func(b *testing.B) {
			var buf []byte
			for range shape.n {
				buf = append(buf, encode(1, string(make([]byte, shape.valueSize)))...)
			}
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if _, err := Split(buf, func(Header, []byte) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
