package kvlog

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// walWriter writes a log's records with the shared write-ahead log
// (Config.WAL): on the caller's goroutine it appends each batch to the
// WAL's buffer, so that whichever WAL round runs next makes it durable in
// the same fdatasync as the partition appends queued with it (a
// transaction's add record with its first batch, its decision with its
// markers), and keeps it in memory (pending) for the internal log, which
// Replay reads at the next start: pending batches are written to the
// log (page cache) once they reach flushBytes, and before the log's own
// fsync, which runs when the WAL asks for a checkpoint (Behind), after a
// WAL round carrying its entries failed, and at Close. Writing them in
// bulk saves a write syscall (and a file size change) per record.
//
// A record is acknowledged (its wait returns nil) once a WAL round or
// the log's own fsync covers it. Every acknowledged record is therefore
// in the log's fsynced bytes or, past them, contiguous in the WAL: a
// round that failed is followed by a log fsync before any later record
// is acknowledged (Failures). A failed log write heals the way a
// partition's acceptor does: cut back to the log's own last fsync, refill
// from the WAL, write a truncate entry.
type walWriter struct {
	h    *wal.Handle
	log  *storage.Log
	warn func(msg string, args ...any)

	mu        sync.Mutex // guards the fields below; orders the records' WAL entries and log appends
	next      int64      // the offset after the last record written: the log's end plus pending
	pending   []byte     // batches from the log's end to next, not yet written to the log
	cleared   uint64     // h.Failures() that the log's last own fsync covered
	heals     int        // heals so far
	healedEnd int64      // the log's end after the last heal: records past it written before were lost
	retired   bool       // a compaction replaced the log: its records are in the compacted one
	lastPos   uint64     // the WAL position of the last record written
	syncedPos uint64     // a WAL round covered the records up to this position
}

// WALKey is the key of the entries of the log named name (its directory
// under the data directory: "groups", "transactions") in generation gen
// (see Log.Generation) in the shared write-ahead log. A compaction starts
// a new generation, so entries of the log it replaced never replay into
// the compacted one.
func WALKey(name string, gen int) wal.Key {
	sum := sha256.Sum256([]byte("sluice internal log " + name))
	var k wal.Key
	copy(k.Topic[:], sum[:16])
	k.Partition = int32(gen)
	return k
}

// ReplayWAL applies to the internal log of the kvlog in dir (named name,
// see WALKey) the records that the previous run made durable only in the
// shared write-ahead log, and fsyncs it. The broker calls it for each
// coordinator's log before rp.Done removes the old WAL segments.
func ReplayWAL(fs vfs.FS, dir, name string, rp *wal.Replay, lg *slog.Logger) (wal.Applied, error) {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	if _, err := fs.Stat(path.Join(dir, currentFile)); err != nil {
		return wal.Applied{}, nil // never written: no entries either
	}
	s := &Log{fs: fs, dir: dir}
	seq, err := s.readCurrent()
	if err != nil || seq == 0 {
		return wal.Applied{}, err
	}
	l, err := storage.Open(fs, path.Join(dir, logDirName(seq)), storageConfig(lg))
	if err != nil {
		return wal.Applied{}, fmt.Errorf("kvlog: open internal log to replay the write-ahead log: %w", err)
	}
	a, err := rp.ApplyNamed(WALKey(name, seq), name, l)
	if err == nil && a.Batches > 0 {
		err = l.Sync()
	}
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return a, fmt.Errorf("kvlog: replay the write-ahead log into %s: %w", dir, err)
	}
	return a, nil
}

// flushBytes is how many bytes of pending batches are written to the
// internal log at once (a variable for the tests, which write each
// batch at once too, to fail those writes).
var flushBytes = 64 << 10

// newWalWriter returns the writer of log l through h.
func newWalWriter(h *wal.Handle, l *storage.Log, warn func(string, ...any)) *walWriter {
	return &walWriter{h: h, log: l, warn: warn, next: l.NextOffset()}
}

// write appends buf (one batch of n records) at the log's end, in the
// WAL and in pending, and returns its base offset and the wait that
// returns once it is durable.
func (w *walWriter) write(buf []byte, n int) (int64, func() error, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.log.Failed() != nil {
		if err := w.healLocked(); err != nil {
			return 0, nil, err
		}
	}
	base := w.next
	end := base + int64(n)
	setBaseOffset(buf, base)
	pos, err := w.h.Append(base, end, buf)
	if err != nil {
		return 0, nil, err
	}
	w.pending = append(w.pending, buf...)
	w.next, w.lastPos = end, pos
	if len(w.pending) >= flushBytes {
		// A failure fails the log; the next write heals it, and waits
		// of records the heal could not keep return an error.
		_ = w.flushLocked()
	}
	heals := w.heals
	return base, func() error { return w.wait(pos, end, heals) }, nil
}

// end is the offset after the last record written.
func (w *walWriter) end() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// flushLocked writes the pending batches to the log (without fsync).
// w.mu is held.
func (w *walWriter) flushLocked() error {
	if len(w.pending) == 0 {
		return nil
	}
	if err := w.log.Append(w.pending, nil); err != nil {
		return err
	}
	w.pending = w.pending[:0]
	return nil
}

// wait returns once the record ending at end, written at WAL position pos
// when heals heals had run, is durable.
func (w *walWriter) wait(pos uint64, end int64, heals int) error {
	err := w.h.Sync(pos)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.retired:
		return nil // the compacted log holds it, fsynced
	case w.heals != heals && end > w.healedEnd:
		return fmt.Errorf("kvlog: the internal log was cut back to offset %d after a failure; the record was lost", w.healedEnd)
	case err != nil:
		return err
	}
	w.syncedPos = max(w.syncedPos, pos)
	if f := w.h.Failures(); f != w.cleared {
		// A round carrying an earlier entry of this log failed: the WAL
		// may hold this record after a hole, so the log's own fsync
		// makes it durable.
		if err := w.syncLocked(f); err != nil {
			return err
		}
	}
	return nil
}

// syncLocked writes the pending batches, fsyncs the log (every record
// written so far) and checkpoints the WAL; f is h.Failures() read
// before. w.mu is held.
func (w *walWriter) syncLocked(f uint64) error {
	if err := w.flushLocked(); err != nil {
		return err
	}
	end := w.log.NextOffset()
	if err := w.log.Sync(); err != nil {
		return err
	}
	w.cleared = f
	w.h.Checkpoint(end)
	return nil
}

// healLocked brings the failed log back: it drops the pending batches,
// cuts the log back to its own last fsync, refills what the WAL's files
// hold after it, fsyncs, and writes a truncate entry so that replay
// never applies entries past the new end. w.mu is held.
func (w *walWriter) healLocked() error {
	written := w.next
	w.pending = w.pending[:0]
	if err := w.log.Recover(false); err != nil {
		return fmt.Errorf("kvlog: heal the internal log: %w", err)
	}
	if _, err := w.h.RefillAvailable(w.log, written); err != nil {
		w.log.Abandon(err)
		return fmt.Errorf("kvlog: heal the internal log: refill from the write-ahead log: %w", err)
	}
	f := w.h.Failures()
	if err := w.log.Sync(); err != nil {
		return fmt.Errorf("kvlog: heal the internal log: %w", err)
	}
	end := w.log.NextOffset()
	pos, err := w.h.Truncate(end)
	if err == nil {
		err = w.h.Sync(pos)
	}
	if err != nil {
		w.log.Abandon(err)
		return fmt.Errorf("kvlog: heal the internal log: write the WAL's truncate entry: %w", err)
	}
	w.cleared = f
	w.h.Checkpoint(end)
	w.heals++
	w.healedEnd = end
	w.next = end
	return nil
}

// checkpoint makes durable the records written without waiting (Write)
// that no WAL round covered yet, as an acceptor's periodic fsync would,
// then fsyncs the log and checkpoints the WAL if the WAL holds old
// segments for it (Behind).
func (w *walWriter) checkpoint() {
	w.mu.Lock()
	pos := w.lastPos
	due := pos > w.syncedPos
	w.mu.Unlock()
	if due {
		if err := w.h.Sync(pos); err != nil {
			w.warn("kvlog: syncing records written without waiting failed", "err", err)
		} else {
			w.mu.Lock()
			w.syncedPos = max(w.syncedPos, pos)
			w.mu.Unlock()
		}
	}
	if !w.h.Behind() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.retired {
		return
	}
	if w.log.Failed() != nil {
		if err := w.healLocked(); err != nil {
			w.warn("kvlog: healing the internal log for a WAL checkpoint failed", "err", err)
			return
		}
	}
	if err := w.syncLocked(w.h.Failures()); err != nil {
		w.warn("kvlog: fsyncing the internal log for a WAL checkpoint failed", "err", err)
	}
}

// retire marks the writer replaced by a compaction and forgets its WAL
// entries.
func (w *walWriter) retire() {
	w.mu.Lock()
	w.retired = true
	w.mu.Unlock()
	w.h.Forget()
}

// close fsyncs the log, so that the WAL's entries are no longer needed
// (a clean shutdown retires the WAL).
func (w *walWriter) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.retired {
		return nil
	}
	if w.log.Failed() != nil {
		if err := w.healLocked(); err != nil {
			return err
		}
	}
	return w.syncLocked(w.h.Failures())
}

// checkpointEvery is how often an idle log checks whether the WAL waits
// for its checkpoint.
const checkpointEvery = 500 * time.Millisecond

// checkpointLoop is the Log's checkpoint goroutine (WAL mode): it
// checkpoints the current writer every checkpointEvery until stop is
// closed, then closes done.
func (s *Log) checkpointLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.RLock()
		w := s.w
		s.mu.RUnlock()
		if w != nil {
			w.checkpoint()
		}
	}
}
