package wal

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/vfs"
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

// TestSparesAcrossRestart: a clean shutdown (Retire) keeps a few
// full-length segment files as spares instead of removing them; the next
// start reuses them instead of zeroing new files, under numbers above
// every number they had, so their old entries fail their CRC: a crash
// after the restart replays only the new run's entries. A crash's old
// segments become spares the same way once replayed.
func TestSparesAcrossRestart(t *testing.T) {
	const segBytes = 8 << 10
	fs := vfs.NewMem()
	appendSync := func(w *WAL, k Key, from, n int64) []byte {
		t.Helper()
		h := w.For(k)
		var out []byte
		for i := from; i < from+n; i++ {
			b := batches(i, 1, i)
			out = append(out, b...)
			p, err := h.Append(i, i+1, b)
			if err == nil {
				err = h.Sync(p)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	spares := func(fs vfs.FS) (seqs []uint64) {
		t.Helper()
		names, err := fs.ReadDir("/wal")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			seg, ok := strings.CutSuffix(n, spareSuffix)
			seq, isSeg := parseSegName(seg)
			if !ok || !isSeg {
				t.Fatalf("after a clean shutdown /wal holds %q, want spares only", n)
			}
			if fi, err := fs.Stat("/wal/" + n); err != nil || fi.Size() != segBytes {
				t.Fatalf("spare %s: %v, want %d bytes", n, err, segBytes)
			}
			seqs = append(seqs, seq)
		}
		return seqs
	}

	// Run 1: key 1's entries over several segments, then a clean shutdown.
	w, rp := open(t, fs, segBytes)
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
	appendSync(w, key(1), 0, 200)
	w.mu.Lock()
	w.keep = 8 // a budget grown by many partitions: a shutdown still keeps only a start's few
	w.mu.Unlock()
	if err := w.Retire(); err != nil {
		t.Fatal(err)
	}
	old := spares(fs)
	if len(old) == 0 || len(old) > minKeepSealed {
		t.Fatalf("a clean shutdown kept %d spares, want 1 to %d", len(old), minKeepSealed)
	}

	// Run 2: nothing to replay; key 2's entries go to a reused spare.
	w, rp = open(t, fs, segBytes)
	if ks := rp.Keys(); len(ks) != 0 {
		t.Fatalf("a start after a clean shutdown replays keys %v", ks)
	}
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
	want := appendSync(w, key(2), 0, 3)
	if st := w.Stats(); st.SegmentsReused == 0 || st.SegmentsZeroed != 0 {
		t.Fatalf("after a clean restart: %d segments reused, %d zeroed; want the spares reused, none zeroed", st.SegmentsReused, st.SegmentsZeroed)
	}
	for _, s := range old {
		if w.active.seq <= s {
			t.Fatalf("the active segment is number %d, not above the spare's old number %d", w.active.seq, s)
		}
	}

	// A crash: the replay holds key 2's entries and none of key 1's
	// (stale in the reused file).
	crashed := fs.CrashClone(vfs.CrashOptions{})
	w.Close()
	w, rp = open(t, crashed, segBytes)
	defer w.Close()
	if ks := rp.Keys(); len(ks) != 1 || ks[0] != key(2) {
		t.Fatalf("replay after the crash has keys %v, want only %v", ks, key(2))
	}
	l := &memLog{}
	if _, err := rp.Apply(key(2), l); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.data, want) {
		t.Fatalf("replay rebuilt %d bytes, want %d", len(l.data), len(want))
	}
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
	// The crash's segments became spares, and the next round reuses one.
	if n := len(spares(crashed)); n == 0 || n > minKeepSealed {
		t.Fatalf("after the replay %d spares, want 1 to %d", n, minKeepSealed)
	}
	appendSync(w, key(3), 0, 1)
	if st := w.Stats(); st.SegmentsReused == 0 || st.SegmentsZeroed != 0 {
		t.Fatalf("after a replay: %d segments reused, %d zeroed; want the spares reused, none zeroed", st.SegmentsReused, st.SegmentsZeroed)
	}
}
