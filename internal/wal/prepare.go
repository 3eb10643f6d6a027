package wal

import (
	"errors"

	"github.com/sluicedb/sluice/internal/vfs"
)

// prepare is the preparer goroutine: it keeps one segment file ready,
// full length and zeroed (or a reused one, whose old entries fail their
// CRC under the new sequence number), synced with its directory entry.
// It stops when stop is closed.
func (w *WAL) prepare(seq uint64) {
	defer close(w.prepDone)
	first := seq
	for {
		// An attempt runs ahead of demand; a failed one is handed over
		// too, and the next attempt starts once it was taken (rotate
		// then asks again, so a stale failure fails no round).
		p := w.makeSegment(seq)
		if p.err != nil {
			w.log.Warn("wal: cannot prepare a segment", "seq", seq, "err", p.err)
		}
		if seq == first {
			select {
			case <-w.firstReady:
			default:
				close(w.firstReady) // Start waits for the first attempt
			}
		}
		select {
		case w.prepC <- p:
		case <-w.stop:
			if p.file != nil {
				_ = p.file.Close()
			}
			if p.direct != nil {
				_ = p.direct.Close()
			}
			return
		}
		if p.err == nil {
			seq++
		}
	}
}

// zeros is what makeSegment writes (read only).
var zeros = make([]byte, 1<<20)

// makeSegment makes segment seq ready.
func (w *WAL) makeSegment(seq uint64) prepared {
	path := w.segPath(seq)
	w.recycleMu.Lock()
	var spare string
	if n := len(w.recycle); n > 0 {
		spare = w.recycle[n-1]
		w.recycle = w.recycle[:n-1]
	}
	w.recycleMu.Unlock()
	if spare != "" {
		if err := w.fs.Rename(spare, path); err == nil {
			if f, err := w.fs.OpenRW(path); err == nil {
				if size, err := f.Size(); err == nil && size == w.segBytes {
					if err := w.fs.SyncDir(w.dir); err == nil {
						w.mu.Lock()
						w.stats.SegmentsReused++
						w.mu.Unlock()
						return prepared{seq: seq, path: path, file: f, direct: w.openDirect(path)}
					}
				}
				_ = f.Close()
			}
		}
		_ = w.fs.Remove(path)
		_ = w.fs.Remove(spare)
	}
	_ = w.fs.Remove(path) // left by an earlier failed attempt
	f, err := w.fs.Create(path)
	if err != nil {
		return prepared{err: err}
	}
	fail := func(err error) prepared {
		_ = f.Close()
		_ = w.fs.Remove(path)
		return prepared{err: err}
	}
	zeroed := false
	if w.roomToZero() {
		var err error
		if zeroed, err = w.zero(f, path); err != nil {
			return fail(err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		return fail(err)
	}
	var direct vfs.File
	if zeroed {
		w.mu.Lock()
		w.stats.SegmentsZeroed++
		w.mu.Unlock()
		direct = w.openDirect(path)
	}
	return prepared{seq: seq, path: path, file: f, direct: direct}
}

// openDirect opens the full-length segment at path for direct writes
// (vfs.DirectOpener), or returns nil when the filesystem cannot, or when
// the segment's length is not a whole number of blocks (a direct write's
// padding to the end of its block would carry the file past it): rounds
// are then written through the page cache.
func (w *WAL) openDirect(path string) vfs.File {
	do, ok := w.fs.(vfs.DirectOpener)
	if !ok || w.segBytes%vfs.DirectAlign != 0 {
		return nil
	}
	f, err := do.OpenDirect(path)
	if err != nil {
		return nil
	}
	return f
}

// zero fills the new segment f (at path) with zeros to full length:
// directly when the filesystem can, else through the page cache. If the
// zeros do not fit after all, it leaves the file empty, a segment that
// grows as it is written (its fsyncs commit its size too), and reports
// false; err is a failure to empty it.
func (w *WAL) zero(f vfs.File, path string) (bool, error) {
	err := w.zeroDirect(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, vfs.ErrNoDirect) {
		for off := int64(0); off < w.segBytes; {
			n := min(w.segBytes-off, int64(len(zeros)))
			if _, err = f.WriteAt(zeros[:n], off); err != nil {
				break
			}
			off += n
		}
		if err == nil {
			return true, nil
		}
	}
	if err := f.Truncate(0); err != nil {
		return false, err
	}
	return false, nil
}

// zeroDirect writes the zeros of the new segment at path bypassing the
// page cache, when the filesystem can (vfs.DirectZeroer): the preparer
// then spends no CPU copying 32 MiB of zeros into cached pages, and its
// fsync has no dirty pages to write back. vfs.ErrNoDirect when it
// cannot; the caller writes the zeros through the page cache.
func (w *WAL) zeroDirect(path string) error {
	dz, ok := w.fs.(vfs.DirectZeroer)
	if !ok {
		return vfs.ErrNoDirect
	}
	return dz.ZeroDirect(path, w.segBytes)
}

// roomToZero reports whether the filesystem has room for a zeroed
// segment with plenty to spare. On a nearly full disk a segment is not
// zeroed ahead: it grows as it is written, like a partition's, and the
// disk guard sees the WAL's bytes as it sees the logs'.
func (w *WAL) roomToZero() bool {
	st, ok := w.fs.(vfs.Statter)
	if !ok {
		return true
	}
	u, err := st.Usage(w.dir)
	return err != nil || u.Free >= uint64(4*w.segBytes)
}
