package wal

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"

	"sluice/internal/vfs"
)

// directFS is an in-memory filesystem with direct zeroing: ZeroDirect
// writes the zeros through the MemFS (standing in for the device),
// refuses (as tmpfs does), or fails (a full disk).
type directFS struct {
	*vfs.MemFS
	mode string // "ok", "refuse" or "nospace"

	mu    sync.Mutex // guards calls
	calls int
}

func (d *directFS) ZeroDirect(name string, size int64) error {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	switch d.mode {
	case "refuse":
		return fmt.Errorf("open %s: %w", name, vfs.ErrNoDirect)
	case "nospace":
		return &os.PathError{Op: "pwrite", Path: name, Err: syscall.ENOSPC}
	}
	f, err := d.MemFS.OpenRW(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(make([]byte, size), 0)
	return err
}

func (d *directFS) zeroCalls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// TestPrepareZeroing: the preparer zeroes a new segment directly when the
// filesystem can, through the page cache when it refuses direct writes,
// and leaves it to grow when the zeros do not fit; in every case the
// segment holds the rounds' entries followed by zeros (or nothing), the
// stats count what it did, and a replay after a crash rebuilds the log.
func TestPrepareZeroing(t *testing.T) {
	const segBytes = 8 << 10
	for _, mode := range []string{"ok", "refuse", "nospace"} {
		t.Run(mode, func(t *testing.T) {
			fs := &directFS{MemFS: vfs.NewMem(), mode: mode}
			w, _ := open(t, fs, segBytes)
			h := w.For(key(1))
			var want []byte
			for i := range 10 {
				b := batches(int64(i), 1, int64(i))
				want = append(want, b...)
				p, err := h.Append(int64(i), int64(i+1), b)
				if err == nil {
					err = h.Sync(p)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if fs.zeroCalls() == 0 {
				t.Fatal("the preparer never asked the filesystem to zero directly")
			}
			st := w.Stats()
			seg := w.active
			data, err := readFile(fs, seg.path)
			if err != nil {
				t.Fatal(err)
			}
			switch mode {
			case "nospace":
				if st.SegmentsZeroed != 0 || int64(len(data)) != seg.size {
					t.Fatalf("zeros that did not fit: %d zeroed, segment %d bytes for %d of entries; want 0 zeroed, a segment that grows", st.SegmentsZeroed, len(data), seg.size)
				}
			default:
				if st.SegmentsZeroed < 1 || int64(len(data)) != segBytes {
					t.Fatalf("%d segments zeroed, segment %d bytes; want at least one zeroed to %d", st.SegmentsZeroed, len(data), segBytes)
				}
				if tail := data[seg.size:]; !bytes.Equal(tail, make([]byte, len(tail))) {
					t.Fatalf("the %d bytes after the entries are not all zeros", len(tail))
				}
			}
			crashed := fs.CrashClone(vfs.CrashOptions{})
			w.Close()
			w2, rp := open(t, crashed, segBytes)
			defer w2.Close()
			l := &memLog{}
			if _, err := rp.Apply(key(1), l); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(l.data, want) {
				t.Fatalf("replay rebuilt %d bytes, want %d", len(l.data), len(want))
			}
			if err := rp.Done(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
