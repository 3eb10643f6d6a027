package storage

import (
	"fmt"
	"path/filepath"

	"github.com/sluicedb/sluice/internal/vfs"
)

// CloseAll closes logs as Close closes each, with a number of syncs that
// does not grow with the number of logs, and without holding more files
// open than the logs do: a broker's clean shutdown of thousands of
// partitions. It runs in phases over every log:
//
//  1. cut the zeros written ahead off the active segment, write its
//     write-behind tail to the file, and write its index files in place
//     (their inodes reused), syncing nothing;
//  2. make all of that durable, with what the caller added to set (the
//     partitions' producer snapshots; set nil: nothing), in one
//     vfs.SyncSet.Sync: one syncfs on Linux (a sync of each file and
//     directory elsewhere, or for a few logs);
//  3. write each log's clean-shutdown checkpoint in place: what it
//     describes (the active segment's size, its indexes) is durable now;
//  4. make the checkpoints durable with a second SyncSet.
//
// set, when not nil, was started before the caller's writes it holds;
// CloseAll closes it.
//
// A crash at any point leaves each log either with no valid checkpoint
// (Open scans its active segment, as after any crash; a torn index or
// checkpoint fails its checksum) or with a checkpoint whose segment
// bytes and indexes were durable before it was written. The result holds
// each log's error at its position (nil when it closed cleanly), as
// Close returns it. When a batched sync fails, every log in it reports
// the error: the first sync's logs get no checkpoint (their next Open
// scans), the second's keep one that is right either way (see failAll).
// A log that failed before closes without a checkpoint and nil, as in
// Close. CloseAll is idempotent per log; the logs must be on one
// filesystem, fs, and their writers stopped.
func CloseAll(fs vfs.FS, logs []*Log, set *vfs.SyncSet) []error {
	errs := make([]error, len(logs))
	cs := make([]*closing, len(logs))
	for i, l := range logs {
		cs[i] = l.beginClose()
	}
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.finish()
			}
		}
	}()
	dir := "."
	if len(logs) > 0 {
		dir = logs[0].dir
	}
	if set == nil {
		set = vfs.NewSyncSet(fs, dir)
	}
	defer set.Close()
	// Phase 1: every byte the checkpoints will describe, written.
	for i, c := range cs {
		if c == nil || !c.write {
			continue
		}
		if err := c.writeData(set); err != nil {
			errs[i] = fmt.Errorf("storage: close: %w", err)
			c.write = false
		}
	}
	// Phase 2: durable.
	if err := set.Sync(); err != nil {
		failAll(cs, errs, err)
	}
	// Phase 3: the checkpoints, written once what they describe is durable.
	set2 := vfs.NewSyncSet(fs, dir)
	defer set2.Close()
	for i, c := range cs {
		if c == nil || !c.write {
			continue
		}
		if err := c.writeCheckpoint(set2); err != nil {
			errs[i] = fmt.Errorf("storage: close: %w", err)
			c.write = false
		}
	}
	// Phase 4: the checkpoints durable. If that fails, a checkpoint may
	// still become durable, and is right: what it describes is.
	if err := set2.Sync(); err != nil {
		failAll(cs, errs, err)
	}
	return errs
}

// Discard closes l without writing anything more to its files (no
// index, no checkpoint, no flush of a write-behind tail): for a log
// whose directory is being removed, such as a deleted topic's.
func (l *Log) Discard() {
	if c := l.beginClose(); c != nil {
		c.write = false
		c.finish()
	}
}

// failAll fails every log still closing cleanly after a batched sync
// failed: it may have failed for any of their files, and a sync is not
// retried (after a failed writeback the kernel may report a second sync
// of the same pages as a success, though they never reached the disk).
// They get no checkpoint, or keep one that is correct (phase 4), and
// report the error.
func failAll(cs []*closing, errs []error, err error) {
	for i, c := range cs {
		if c == nil || !c.write {
			continue
		}
		errs[i] = fmt.Errorf("storage: close: sync the logs closed with %s: %w", c.l.dir, err)
		c.write = false
	}
}

// closing is one log in CloseAll, which holds its cleanMu from
// beginClose to finish.
type closing struct {
	l     *Log
	a     *segment
	write bool // the log is healthy: it gets a checkpoint
}

// beginClose starts closing l: a running compaction pass is stopped and
// waited for. It returns nil when l is closed already.
func (l *Log) beginClose() *closing {
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return nil
	}
	l.closing.Store(true)
	if c := l.passCancel.Load(); c != nil {
		(*c)() // wakes a pass waiting in its Throttle
	}
	l.cleanMu.Lock() // waits for a compaction pass, which aborts at its next batch
	for _, r := range l.retired {
		r.s.release()
	}
	l.retired = nil
	a := l.active()
	// A created log never written has nothing to keep: it closes without
	// making its files, and Open makes it again, empty.
	unwritten := l.lazy != nil && l.lazy.made() == nil && a.size == 0
	return &closing{l: l, a: a, write: l.failure() == nil && !unwritten}
}

// writeData is phase 1 for one log: the active segment cut to its data
// and written out, its indexes written in place, all added to set.
func (c *closing) writeData(set *vfs.SyncSet) error {
	l, a := c.l, c.a
	if err := l.Prepare(); err != nil { // a created log whose first bytes are in memory: make its file
		return err
	}
	if err := l.trimAlloc(a); err != nil {
		return err
	}
	f := a.file
	if t, ok := f.(*tailFile); ok {
		if err := t.flush(); err != nil {
			return fmt.Errorf("write %s: %w", a.path, err)
		}
		f = t.f
	}
	if z, ok := f.(*lazyFile); ok {
		f = z.made()
	}
	created, err := rewriteIndexes(l.fs, a)
	if err != nil {
		return err
	}
	set.AddFile(f)
	set.AddName(a.indexPath(), a.timeIndexPath())
	if created || l.dirPending.Load() {
		set.AddDir(l.dir)
	}
	if l.dirPending.Load() {
		set.AddDir(filepath.Dir(l.dir))
	}
	return nil
}

// writeCheckpoint is phase 3 for one log.
func (c *closing) writeCheckpoint(set *vfs.SyncSet) error {
	a := c.a
	created, err := rewriteCheckpoint(c.l.fs, c.l.dir, checkpoint{activeBase: a.base, activeSize: a.size, next: a.next})
	if err != nil {
		return err
	}
	set.AddName(filepath.Join(c.l.dir, checkpointName))
	if created {
		set.AddDir(c.l.dir)
	}
	return nil
}

// finish marks the log closed and releases its files.
func (c *closing) finish() {
	l := c.l
	if c.write {
		l.dirPending.Store(false)
	}
	l.mu.Lock()
	l.closed = true
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	for _, s := range segs {
		s.release()
	}
	l.cpMu.Lock()
	if l.cpZeroed != nil {
		l.cpZeroed.Close() // rewritten by a clean close, or left as Open found it (see recover)
		l.cpZeroed = nil
	}
	l.cpMu.Unlock()
	l.cleanMu.Unlock()
}
