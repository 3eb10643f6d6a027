package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

// Failed is the write-path failure that stopped the log, or nil.
func (l *Log) Failed() error { return l.failure() }

// Abandon marks the log failed with cause, unless it failed already, so
// that Recover cuts it back to the bytes its own fsyncs covered. A writer
// whose appends are made durable elsewhere first (the shared write-ahead
// log) calls it when that fails: the bytes it wrote since are not
// acknowledged and must not survive a heal.
func (l *Log) Abandon(cause error) { _ = l.fail("abandoned after a write-ahead log failure", cause) }

// Recover brings a failed log back into service without closing it, as
// Open would after a crash: it cuts the active segment back to the bytes
// known durable (those a successful Sync or Roll covered; with
// keepUnsynced, every byte of a whole write, for callers that already
// acknowledged writes before syncing them), removes the files of a roll
// that did not finish, fsyncs, rescans the active segment's batches
// (CRC included) and rebuilds its in-memory index. On success the log
// accepts writes again from NextOffset; on failure it stays failed and
// Recover may be called again later (when the disk has room again).
//
// Recover is a writing method: the writer calls it, with no Sync running.
// A log that has not failed is left alone.
func (l *Log) Recover(keepUnsynced bool) error {
	return l.recover(keepUnsynced, -1)
}

// RecoverUpTo is Recover for a log whose appends are also durable in a
// write-ahead log that can refill them: rather than cutting the active
// segment back to its last fsync, it keeps the valid batches the file
// already holds (bytes written to it, not a write-behind tail) up to the
// first that does not scan or that ends at or past offset limit (the
// acknowledged end), fsyncs them and cuts the rest. The caller then
// refills the log from the write-ahead log up to limit. So a heal needs
// room only for what the file lost, not for everything since the last
// fsync, which the write-ahead log keeps until the log checkpoints. Bytes
// the last fsync covered must scan, as in Recover.
func (l *Log) RecoverUpTo(limit int64) error {
	return l.recover(false, limit)
}

// recover is Recover (limit < 0) and RecoverUpTo.
func (l *Log) recover(keepUnsynced bool, limit int64) error {
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	cause := l.failure()
	if cause == nil {
		return nil
	}
	// A compaction pass writes files in the directory this cleans up;
	// the healer retries later.
	if !l.cleanMu.TryLock() {
		return fmt.Errorf("storage: recover %s: a compaction pass is running; retry: %w", l.dir, cause)
	}
	defer l.cleanMu.Unlock()
	a := l.writerActive()
	l.mu.RLock()
	keep := a.synced
	if keepUnsynced {
		keep = a.size
	}
	l.mu.RUnlock()

	// A roll that failed after creating the next segment left an empty
	// segment file (and perhaps index temporaries) that the log never
	// listed.
	names, err := l.fs.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) && l.Pending() {
		// A created log whose first bytes are still in memory has no
		// directory yet, so nothing left over: the sync below makes it.
		names, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("storage: recover %s: list: %w", l.dir, err)
	}
	dirty := false
	for _, n := range names {
		stem := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, indexSuffix), timeIndexSuffix), logSuffix)
		base, ok := parseSegmentName(stem + logSuffix)
		if strings.HasSuffix(n, tmpSuffix) || (ok && base > a.base) {
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("storage: recover %s: remove leftover %s: %w", l.dir, n, err)
			}
			dirty = true
		}
	}
	// A disk that still fails leaves the log as it is: readers keep
	// reading what they could (with a write-ahead log, acknowledged
	// bytes past the log's own last fsync), rather than lose it to a cut
	// that the sync after it would not make durable anyway.
	synced := keep
	l.failMu.Lock()
	syncFailed := l.syncFailed
	l.failMu.Unlock()
	// Written bytes past the last fsync are kept only after a write the
	// disk refused for room (ENOSPC: nothing reached the device, the
	// earlier bytes sit whole in the page cache). After a failed fsync
	// the page cache may hold bytes the device lost, which a later fsync
	// would not report again: cut back to the last fsync, as Recover.
	if limit >= 0 && (syncFailed || !errors.Is(cause, syscall.ENOSPC)) {
		limit = -1
	}
	if limit >= 0 {
		// Everything written to the file is a candidate; a write-behind
		// tail is not (it is refilled).
		l.mu.RLock()
		keep = a.size
		l.mu.RUnlock()
		if t, ok := a.file.(*tailFile); ok {
			keep = min(keep, t.flushedEnd())
		}
		keep = max(keep, synced)
	}
	probe := a.file.Sync
	if t, ok := a.file.(*tailFile); ok && keep <= t.flushedEnd() {
		// The kept bytes are in the file: the tail is cut below, not
		// written (on a full disk, writing it would only fail again).
		probe = t.syncFlushed
	}
	if err := probe(); err != nil {
		return fmt.Errorf("storage: recover %s: the disk still fails: %w", a.path, err)
	}
	// The kept bytes are rescanned and published before the file is cut,
	// so that a reader never looks for a batch past the end of the file.
	s := newSegment(l.dir, a.base, a.file)
	w := &window{f: a.file, size: keep}
	if end, _, err := scan(s, w, 0, int64(l.cfg.IndexInterval), false); err != nil {
		if limit < 0 || end < synced {
			return fmt.Errorf("storage: recover %s: the kept bytes do not scan at byte %d: %w", a.path, end, err)
		}
		keep = end // unsynced bytes that did not reach the file whole: refilled
	}
	if limit >= 0 && s.next > limit {
		// Batches past the acknowledged end (a failed round's): cut at
		// the batch boundary at limit, found by a second scan.
		cut, err := batchBoundary(a.file, keep, limit)
		if err != nil || cut < synced {
			return fmt.Errorf("storage: recover %s: no batch boundary at offset %d below byte %d (%v)", a.path, limit, keep, err)
		}
		keep = cut
		s = newSegment(l.dir, a.base, a.file)
		w = &window{f: a.file, size: keep}
		if end, _, err := scan(s, w, 0, int64(l.cfg.IndexInterval), false); err != nil {
			return fmt.Errorf("storage: recover %s: the kept bytes do not scan at byte %d: %w", a.path, end, err)
		}
	}
	l.mu.Lock()
	// Fresh index slices: readers holding the old ones keep them.
	a.size, a.next, a.maxTs, a.maxTsOff = s.size, s.next, s.maxTs, s.maxTsOff
	a.offIdx, a.timeIdx = s.offIdx, s.timeIdx
	a.synced = keep
	l.mu.Unlock()
	a.sinceOff, a.sinceTime = s.sinceOff, s.sinceTime

	if err := a.file.Truncate(keep); err != nil {
		return fmt.Errorf("storage: recover %s: truncate to %d: %w", a.path, keep, err)
	}
	a.alloc = keep // zeros written ahead are gone too; Preallocate writes them again
	if err := a.file.Sync(); err != nil {
		return fmt.Errorf("storage: recover %s: sync: %w", a.path, err)
	}
	if dirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("storage: recover %s: sync directory: %w", l.dir, err)
		}
	}

	l.failMu.Lock()
	l.failed, l.syncFailed = nil, false
	l.failMu.Unlock()
	l.cfg.Logger.Info("storage: failed log recovered", "dir", l.dir, "next_offset", s.next, "cause", cause)
	return nil
}

// batchBoundary returns the position in f, below size, of the first
// batch whose base offset is at least limit (size if none), reading only
// batch headers from the start.
func batchBoundary(f vfs.File, size, limit int64) (int64, error) {
	var hb [batch.HeaderSize]byte
	for pos := int64(0); pos < size; {
		h, err := readHeader(f, pos, &hb)
		if err != nil {
			return pos, err
		}
		if h.BaseOffset >= limit {
			return pos, nil
		}
		if h.Size() < batch.HeaderSize {
			return pos, fmt.Errorf("a batch of %d bytes at byte %d", h.Size(), pos)
		}
		pos += int64(h.Size())
	}
	return size, nil
}
