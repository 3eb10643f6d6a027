package wal

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// TestBatchesEntryDetectsEveryFlip: a batches entry (its CRC over the
// batches' headers, each batch's own CRC over the rest) decodes to the
// data it was made of, and a flipped bit anywhere in it, framing, header
// or any batch's bytes, makes it fail to decode, as a data entry whose
// CRC covers every byte does; so does the wrong segment number.
func TestBatchesEntryDetectsEveryFlip(t *testing.T) {
	data := batches(100, 3, 7)
	for _, kind := range []byte{kindBatches, kindData} {
		b := appendEntry(nil, kind, key(4), 100, data)
		sealEntry(b, 42)
		e, n, err := decodeEntry(b, 42)
		if err != nil || n != len(b) || e.kind != kindData || e.key != key(4) || e.offset != 100 || !bytes.Equal(e.data, data) {
			t.Fatalf("kind %d: decode = %+v, %d, %v; want the data entry of %d bytes", kind, e, n, err, len(b))
		}
		if _, _, err := decodeEntry(b, 43); err == nil {
			t.Fatalf("kind %d: decodes in another segment", kind)
		}
		for i := range b {
			for _, bit := range []byte{0x01, 0x80} {
				b[i] ^= bit
				if _, _, err := decodeEntry(b, 42); err == nil {
					t.Fatalf("kind %d: bit %#x of byte %d flipped, the entry still decodes", kind, bit, i)
				}
				b[i] ^= bit
			}
		}
	}
}

// TestAppendWritesBatchesEntries: Append writes whole v2 batches as a
// batches entry and anything else as a data entry checksummed whole, and
// both replay.
func TestAppendWritesBatchesEntries(t *testing.T) {
	if !wholeBatches(batches(0, 2, 1)) {
		t.Fatal("two whole batches are not whole batches")
	}
	cut := batches(0, 2, 1)
	for _, d := range [][]byte{nil, []byte("not a batch"), cut[:len(cut)-1], append(cut, 0)} {
		if wholeBatches(d) {
			t.Fatalf("%d bytes that are not whole batches pass as such", len(d))
		}
	}
	fs := vfs.NewMem()
	w, _ := open(t, fs, 1<<20)
	p1, err := w.Append(key(1), 0, 2, batches(0, 2, 1))
	if err == nil {
		err = w.Sync(p1)
	}
	if err != nil {
		t.Fatal(err)
	}
	p2, err := w.Append(key(2), 0, 1, []byte("opaque"))
	if err == nil {
		err = w.Sync(p2)
	}
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	names, err := fs.ReadDir("/wal")
	if err != nil {
		t.Fatal(err)
	}
	var seg string
	for _, n := range names {
		if strings.HasSuffix(n, segSuffix) && seg == "" {
			seg = "/wal/" + n
		}
	}
	b, err := readFile(fs, seg)
	if err != nil {
		t.Fatal(err)
	}
	if b[8] != kindBatches || b[p1+8] != kindData {
		t.Fatalf("entries written as kinds %d and %d, want %d (whole batches) and %d (opaque)", b[8], b[p1+8], kindBatches, kindData)
	}
	es, err := readSegment(fs, seg, firstSeqOf(t, seg))
	if err != nil || len(es) != 2 || es[0].key != key(1) || !bytes.Equal(es[1].data, []byte("opaque")) {
		t.Fatalf("segment decodes to %d entries (%v), want both", len(es), err)
	}
}

func firstSeqOf(t *testing.T, path string) uint64 {
	t.Helper()
	seq, ok := parseSegName(path[strings.LastIndexByte(path, '/')+1:])
	if !ok {
		t.Fatalf("%s is not a segment", path)
	}
	return seq
}

// BenchmarkSealEntry: the write path's checksum of one entry of records
// of 100 B, as a data entry (every byte) and as a batches entry (the
// batches' headers only).
func BenchmarkSealEntry(b *testing.B) {
	for _, n := range []int{6, 150} {
		data, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(n, 100, 1), 0)
		for _, kind := range []byte{kindData, kindBatches} {
			name := map[byte]string{kindData: "data", kindBatches: "batches"}[kind]
			b.Run(fmt.Sprintf("records=%d/kind=%s", n, name), func(b *testing.B) {
				e := appendEntry(nil, kind, key(1), 0, data)
				b.SetBytes(int64(len(e)))
				for b.Loop() {
					sealEntry(e, 7)
				}
			})
		}
	}
}
