package storage

import (
	"bytes"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// appender tracks what a test appended, to compare with what the log holds.
type appender struct {
	t     *testing.T
	l     *Log
	next  int64
	data  []byte // every appended byte, in order
	sizes []int  // appended batch sizes
}

func newAppender(t *testing.T, l *Log) *appender {
	return &appender{t: t, l: l, next: l.NextOffset()}
}

// add appends one batch of records records; it returns the batch bytes.
func (a *appender) add(records, valueSize int, ts int64) []byte {
	a.t.Helper()
	b, next := storagetest.WithBaseOffset(storagetest.MakeBatch(records, valueSize, ts), a.next)
	if err := a.l.Append(b, nil); err != nil {
		a.t.Fatalf("Append at %d: %v", a.next, err)
	}
	a.next = next
	a.data = append(a.data, b...)
	a.sizes = append(a.sizes, len(b))
	return b
}

// readAll reads every batch from offset from to the log end through Read.
func readAll(t *testing.T, l *Log, from int64) []byte {
	t.Helper()
	var out []byte
	end := l.NextOffset()
	for off := from; off < end; {
		s, err := l.Read(off, end, 1<<20)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		b, err := s.Bytes()
		if err != nil {
			t.Fatalf("Bytes at %d: %v", off, err)
		}
		if len(b) == 0 {
			t.Fatalf("Read(%d) returned nothing below the end %d", off, end)
		}
		if _, err := batch.Split(b, func(h batch.Header, _ []byte) error {
			if h.BaseOffset > off || h.LastOffset() < off {
				t.Fatalf("batch %d..%d does not continue at %d", h.BaseOffset, h.LastOffset(), off)
			}
			off = h.LastOffset() + 1
			return nil
		}); err != nil {
			t.Fatalf("Read(%d) returned invalid batches: %v", off, err)
		}
		out = append(out, b...)
	}
	return out
}

func mustOpen(t *testing.T, fs vfs.FS, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(fs, dir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func TestOpenAppendReadReopen(t *testing.T) {
	for _, fsys := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"os", vfs.OS(), t.TempDir()}, {"mem", vfs.NewMem(), "/data/p0"}} {
		t.Run(fsys.name, func(t *testing.T) {
			l := mustOpen(t, fsys.fs, fsys.dir, Config{SegmentBytes: 8 << 10, IndexInterval: 512})
			a := newAppender(t, l)
			for i := 0; i < 100; i++ {
				a.add(1+i%5, 10+i*7%300, int64(1000+i))
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
				t.Fatalf("read %d bytes, appended %d; contents differ", len(got), len(a.data))
			}
			if l.Segments() < 3 {
				t.Fatalf("only %d segments after %d bytes with 8 KiB segments", l.Segments(), len(a.data))
			}
			next := l.NextOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if _, err := l.Read(0, next, 100); !errors.Is(err, ErrClosed) {
				t.Fatalf("Read after Close: %v", err)
			}
			l = mustOpen(t, fsys.fs, fsys.dir, Config{SegmentBytes: 8 << 10, IndexInterval: 512})
			defer l.Close()
			r := l.Recovery()
			if !r.Clean || r.BytesScanned != 0 || r.IndexesRebuilt != 0 {
				t.Fatalf("clean reopen: %+v", r)
			}
			if l.NextOffset() != next {
				t.Fatalf("NextOffset %d after reopen, want %d", l.NextOffset(), next)
			}
			if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
				t.Fatal("contents differ after reopen")
			}
			// Appending continues where the log ended.
			a.l = l
			a.add(3, 10, 5000)
			if got := readAll(t, l, 0); !bytes.Equal(got, a.data) {
				t.Fatal("contents differ after appending to a reopened log")
			}
		})
	}
}
