package storage

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// validSegment returns n contiguous batches from offset 0.
func validSegment(n int) []byte {
	var seg []byte
	next := int64(0)
	for i := 0; i < n; i++ {
		var b []byte
		b, next = storagetest.WithBaseOffset(storagetest.MakeBatch(1+i%3, 20+i*5, int64(i)), next)
		seg = append(seg, b...)
	}
	return seg
}

// FuzzRecover writes fuzz bytes as the only segment of a log and opens it.
//
// Invariants:
//   - Open never panics, and fails only with a *CorruptionError (the
//     in-memory FS has no I/O errors) whose position lies inside the
//     segment, with the segment left untouched and copied byte for byte
//     to the .broken file.
//   - Otherwise the recovered log is a prefix of the input, every batch
//     in it validates (CRC included) with offsets contiguous from 0, the
//     cut-off tail is exactly what the report says was truncated (as a
//     torn tail, or as preallocated zeros when every cut byte is zero),
//     and a clean reopen sees the same log without scanning.
func FuzzRecover(f *testing.F) {
	good := validSegment(6)
	f.Add(good)
	f.Add(good[:len(good)-7])                   // torn tail
	f.Add(append(append([]byte{}, good...), 0)) // one stray byte
	mid := append([]byte(nil), good...)
	mid[batch.HeaderSize+5] ^= 0xff // corrupt first batch, valid data follows
	f.Add(mid)
	f.Add([]byte{})
	f.Add(make([]byte, 100))
	f.Add(append(append([]byte{}, good...), make([]byte, 4096)...)) // preallocated zeros after the data
	torn := append([]byte{}, good...)
	torn = append(torn, good[:batch.HeaderSize+3]...) // a batch written in part over the zeros
	f.Add(append(torn, make([]byte, 4096)...))
	f.Fuzz(func(t *testing.T, seg []byte) {
		m := vfs.NewMem()
		if err := m.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		name := segPath(0)
		overwrite(t, m, name, seg)

		cfg := Config{IndexInterval: 64}
		l, err := Open(m, dir, cfg)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("Open failed with a non-corruption error: %v", err)
			}
			if ce.Segment != name || ce.Position < 0 || ce.Position >= int64(len(seg)) {
				t.Fatalf("corruption at byte %d of %s, segment %s has %d bytes", ce.Position, ce.Segment, name, len(seg))
			}
			if !bytes.Equal(fileBytes(t, m, name), seg) {
				t.Fatal("the corrupt segment was modified")
			}
			if !bytes.Equal(fileBytes(t, m, ce.Broken), seg) {
				t.Fatal("the .broken copy differs from the segment")
			}
			return
		}
		got := readAll(t, l, 0)
		if !bytes.Equal(got, seg[:len(got)]) {
			t.Fatal("recovered bytes are not a prefix of the segment")
		}
		r := l.Recovery()
		if r.TruncatedBytes+r.PreallocatedBytes != int64(len(seg)-len(got)) {
			t.Fatalf("report says %d bytes truncated and %d preallocated cut; %d of %d kept", r.TruncatedBytes, r.PreallocatedBytes, len(got), len(seg))
		}
		if zero := bytes.Count(seg[len(got):], []byte{0}) == len(seg)-len(got); r.PreallocatedBytes > 0 && !zero || r.TruncatedBytes > 0 && zero {
			t.Fatalf("cut tail %x reported as %d torn, %d preallocated", seg[len(got):], r.TruncatedBytes, r.PreallocatedBytes)
		}
		next := int64(0)
		if _, err := batch.Split(got, func(h batch.Header, _ []byte) error {
			if h.BaseOffset != next {
				t.Fatalf("batch at offset %d, want %d", h.BaseOffset, next)
			}
			next = h.LastOffset() + 1
			return nil
		}); err != nil {
			t.Fatalf("recovered an invalid batch: %v", err)
		}
		if next != l.NextOffset() {
			t.Fatalf("batches end at %d, NextOffset %d", next, l.NextOffset())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = Open(m, dir, cfg)
		if err != nil {
			t.Fatalf("clean reopen: %v", err)
		}
		defer l.Close()
		if r := l.Recovery(); !r.Clean || r.BytesScanned != 0 || l.NextOffset() != next {
			t.Fatalf("clean reopen report %+v, next %d want %d", r, l.NextOffset(), next)
		}
		if again := readAll(t, l, 0); !bytes.Equal(again, got) {
			t.Fatal("clean reopen reads different bytes")
		}
	})
}

// FuzzDecodeIndexes feeds arbitrary index files to the decoder.
//
// Invariants: it never panics; an accepted pair has entries strictly
// increasing in position (and in offset or timestamp) and inside the
// covered bytes; re-encoding an accepted pair gives the same bytes.
func FuzzDecodeIndexes(f *testing.F) {
	sum := indexSummary{base: 100, covered: 5000, next: 180, maxTs: 77, maxTsOff: 150}
	f.Add(encodeOffsetIndex(sum, []offEntry{{120, 1000}, {140, 3000}}), encodeTimeIndex(sum, []timeEntry{{50, 2000}}))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, ob, tb []byte) {
		s, offs, times, err := decodeIndexes(100, ob, tb)
		if err != nil {
			return
		}
		for i, e := range offs {
			if e.pos <= 0 || e.pos >= s.covered || (i > 0 && (e.pos <= offs[i-1].pos || e.off <= offs[i-1].off)) {
				t.Fatalf("accepted bad offset entry %d: %+v", i, e)
			}
		}
		for i, e := range times {
			if e.pos <= 0 || e.pos >= s.covered || (i > 0 && (e.pos <= times[i-1].pos || e.ts <= times[i-1].ts)) {
				t.Fatalf("accepted bad time entry %d: %+v", i, e)
			}
		}
		if !bytes.Equal(encodeOffsetIndex(s, offs), ob) || !bytes.Equal(encodeTimeIndex(s, times), tb) {
			t.Fatal("re-encoding an accepted index differs")
		}
	})
}
