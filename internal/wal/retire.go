package wal

import (
	"errors"
	"math"
	"os"

	"github.com/sluicedb/sluice/internal/vfs"
)

// Checkpoint tells the WAL that k's log is fsynced below end: its entries
// below end are no longer needed. Segments every key of which
// checkpointed past its entries are removed (or kept for reuse).
func (w *WAL) Checkpoint(k Key, end int64) {
	w.mu.Lock()
	if c, ok := w.ckpt[k]; ok && c >= end {
		w.mu.Unlock()
		return
	}
	w.ckpt[k] = end
	free := false
	for _, s := range w.segs {
		if e, ok := s.ends[k]; ok && e <= end {
			delete(s.ends, k)
			free = free || len(s.ends) == 0
		}
	}
	w.mu.Unlock()
	if free {
		w.collect()
	}
}

// Checkpoints. A checkpoint costs every partition with entries in the
// sealed segments one fdatasync of its own segment file; the more
// partitions write, the more WAL the checkpoints should cover, so that
// their fsyncs stay a small share of the writes. The WAL lets sealed
// segments accumulate until they hold about ckptBytesPerKey of WAL per
// partition writing (at least minKeepSealed segments), within a budget:
// Options.MaxBytes and an eighth of the filesystem's free space.
const (
	minKeepSealed   = 2
	ckptBytesPerKey = 256 << 10
)

// keepFor returns how many sealed segments to hold before checkpoints
// when keys partitions write to each segment. It reads the filesystem's
// free space (once per sealed segment).
func (w *WAL) keepFor(keys int) int {
	budget := w.maxBytes
	if st, ok := w.fs.(vfs.Statter); ok {
		if u, err := st.Usage(w.dir); err == nil {
			budget = min(budget, int64(u.Free/8))
		}
	}
	want := (int64(keys)*ckptBytesPerKey + w.segBytes - 1) / w.segBytes
	return int(max(min(want, budget/w.segBytes), minKeepSealed))
}

// Behind reports whether k should checkpoint now: it has entries in a
// sealed segment and the WAL holds as many sealed segments as it keeps
// (keepFor).
func (w *WAL) Behind(k Key) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	sealed := w.sealedLocked()
	if len(sealed) < w.keep {
		return false
	}
	for _, s := range sealed {
		if _, ok := s.ends[k]; ok {
			return true
		}
	}
	return false
}

// sealedLocked returns the sealed segments at the head of the WAL, the
// ones checkpoints retire. The caller holds w.mu.
func (w *WAL) sealedLocked() []*seg {
	n := 0
	for n < len(w.segs) && w.segs[n].sealed {
		n++
	}
	return w.segs[:n]
}

// Forget drops k (its log was deleted): none of its entries are needed.
func (w *WAL) Forget(k Key) {
	w.Checkpoint(k, math.MaxInt64)
	w.mu.Lock()
	delete(w.ckpt, k)
	delete(w.notify, k)
	w.mu.Unlock()
}

// OnBehind registers f as k's notification (nil: none): f is called
// whenever Behind(k) may have turned true, so that a key's owner need not
// ask Behind on a timer. Behind turns true only when a segment is sealed
// (the count of sealed segments and the number the WAL keeps change
// then, and a sealed segment gains no entries), so f is called after a
// seal that leaves the WAL holding as many sealed segments as it keeps,
// for every key with entries in them, on the goroutine that sealed, with
// no lock of the WAL held. It must not block; it may be called again
// before its key checkpointed.
func (w *WAL) OnBehind(k Key, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f == nil {
		delete(w.notify, k)
		return
	}
	w.notify[k] = f
}

// notifyBehind calls the OnBehind functions of the keys Behind reports
// true for now. Called after a segment is sealed, without w.mu.
func (w *WAL) notifyBehind() {
	var fs []func()
	w.mu.Lock()
	if sealed := w.sealedLocked(); len(sealed) >= w.keep && len(w.notify) > 0 {
		seen := map[Key]bool{}
		for _, s := range sealed {
			for k := range s.ends {
				if f := w.notify[k]; f != nil && !seen[k] {
					seen[k] = true
					fs = append(fs, f)
				}
			}
		}
	}
	w.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// collect removes the oldest sealed segments that no key needs any more,
// oldest first and each removal synced before the next, so that after a
// crash the segments left are always a suffix of the WAL (a stale entry
// never comes back without the truncate entry that follows it). Their
// files go to the preparer for reuse when it has none.
func (w *WAL) collect() {
	w.rmMu.Lock()
	defer w.rmMu.Unlock()
	for {
		w.mu.Lock()
		if len(w.segs) == 0 || !w.segs[0].sealed || len(w.segs[0].ends) > 0 {
			w.mu.Unlock()
			return
		}
		s := w.segs[0]
		w.mu.Unlock()
		if !w.retire(s.path) {
			return
		}
		w.mu.Lock()
		w.segs = w.segs[1:]
		w.mu.Unlock()
	}
}

// retire removes a segment file no longer needed, or renames it for
// reuse; false if that failed (it is retried at the next collect).
func (w *WAL) retire(path string) bool {
	// As many spares as the WAL keeps sealed segments: the segments a
	// checkpoint retires at once are reused by the next ones instead of
	// being zeroed again, and the files stay within the WAL's budget.
	w.mu.Lock()
	limit := w.keep
	w.mu.Unlock()
	w.recycleMu.Lock()
	keep := len(w.recycle) < limit
	w.recycleMu.Unlock()
	if keep && w.fullSize(path) {
		// Renamed out of the sequence: replay ignores it, the preparer
		// renames it back in under a new number.
		spare := path + spareSuffix
		if err := w.fs.Rename(path, spare); err == nil {
			if err := w.fs.SyncDir(w.dir); err != nil {
				w.log.Warn("wal: sync directory after retiring a segment", "err", err)
				return false
			}
			w.recycleMu.Lock()
			w.recycle = append(w.recycle, spare)
			w.recycleMu.Unlock()
			return true
		}
	}
	// Gone already: an earlier attempt renamed it aside and then failed
	// to sync the directory; the sync below makes that rename durable.
	if err := w.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.log.Warn("wal: remove a segment no longer needed", "path", path, "err", err)
		return false
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		w.log.Warn("wal: sync directory after removing a segment", "err", err)
		return false
	}
	return true
}

// fullSize reports whether a segment file was zeroed to full length (a
// growing one is not worth reusing).
func (w *WAL) fullSize(path string) bool {
	fi, err := w.fs.Stat(path)
	return err == nil && fi.Size() == w.segBytes
}

// Retire closes the WAL and retires its segments, oldest first, each
// change synced before the next (see collect): a few become spares that
// the next start reuses (Replay.Done), the rest are removed. The caller
// has fsynced every log that appended to it (a clean shutdown), so
// nothing in them is needed: the next start has nothing to replay, and a
// log repaired offline (sluice repair) is not refilled from entries of
// before.
func (w *WAL) Retire() error {
	if err := w.Close(); err != nil {
		return err
	}
	rp, err := listSegments(w.fs, w.dir)
	if err != nil {
		return err
	}
	// As many as a start keeps (not the budget many partitions grew
	// keep to): a stopped broker holds little disk for them.
	rp.w, rp.keep = w, minKeepSealed
	err = rp.Done()
	w.recycleMu.Lock()
	w.recycle = nil // closed: the next start finds the spares on disk
	w.recycleMu.Unlock()
	return err
}
