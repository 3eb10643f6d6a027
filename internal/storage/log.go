package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

// Log is one partition's log: a directory of segment files.
//
// One goroutine (the partition's acceptor) calls the writing methods
// (Append, Roll, ApplyRetention, Close; Sync also from one other
// goroutine, see Sync); any number of goroutines may
// call the reading methods (Read, NextOffset, StartOffset, OffsetForTime,
// MaxTimestamp, ScanHeaders, and the returned Slices) concurrently with it.
// Storage starts no goroutines.
//
// Locking: mu guards the segment list and what readers see of each
// segment. Readers hold it shared only while they pick a segment and take
// a reference to it; file I/O happens outside it. The writer takes it
// exclusively only to publish the effect of a write (new size, index
// entries, segment list), never across I/O. failMu guards the failure
// alone and is never held with mu.
type Log struct {
	fs  vfs.FS
	dir string
	cfg Config

	mu     sync.RWMutex // guards segs, closed, start, and the "guarded by Log.mu" fields of each segment
	segs   []*segment   // oldest first; the last is the active segment
	closed bool
	start  int64 // set by DeleteRecordsBefore; the log start offset is max(segs[0].base, start)

	startMu sync.Mutex // serializes DeleteRecordsBefore (held across its file I/O; taken before mu)

	nextCfg atomic.Pointer[Config] // set by SetConfig, adopted by the writer

	// cleanMu serializes compaction passes (Clean, CleanStats) with
	// retention (which skips its turn while a pass runs) and Close. It is
	// taken before mu and held across the pass's file I/O.
	cleanMu sync.Mutex
	marks   []cleanMark // guarded by cleanMu: compaction history (cleaner-checkpoint)
	// tombstonesDue (unix ms, guarded by cleanMu) is when the earliest
	// tombstone kept by a pass may be dropped; 0 when none was kept.
	tombstonesDue int64
	retired       []retiredSegment                   // guarded by cleanMu: segments replaced by compaction, released RetireDelay later or by Close
	cleanBroken   error                              // guarded by cleanMu: a swap left for recovery; no further pass until reopened
	closing       atomic.Bool                        // set first by Close: a running pass aborts
	passCancel    atomic.Pointer[context.CancelFunc] // cancels the running pass (Close calls it)

	failMu     sync.Mutex // guards failed and syncFailed; taken alone, never with mu
	failed     error      // the first write-path failure; refuses writes after it
	syncFailed bool       // an fsync failed since the log last recovered (see recover)

	// dirPending is set by Create: the log's directory entries are not
	// durable yet. The first Sync with bytes to sync syncs the directory
	// and its parent too and clears it; until then a Sync has nothing to
	// do. lazy is Create's first segment file (nil after Open).
	dirPending atomic.Bool
	lazy       *lazyFile

	// durable is set when every byte the active segment holds up to its
	// synced size is known durable: after a successful Sync, and by Open
	// after a clean shutdown (the close synced everything before it wrote
	// the checkpoint). A Sync with nothing written since then has nothing
	// to do. After a crash Open leaves it unset: what recovery accepted
	// may be in the page cache only.
	durable atomic.Bool

	// cpZeroed is the checkpoint file Open zeroed and has not synced
	// (guarded by cpMu; nil once synced or closed): made durable by
	// SyncCheckpoints for many logs at once, or by the log's first Sync
	// that writes anything, whichever comes first.
	cpMu     sync.Mutex
	cpZeroed vfs.File

	// Writer-only state (the goroutine calling the writing methods).
	report RecoveryReport // what Open did; immutable afterwards
	hdrs   []appendBatch  // scratch for Append
}

// appendBatch is one batch of an Append, parsed.
type appendBatch struct {
	h   batch.Header
	pos int64 // position in the appended buffer
}

// active returns the segment being written. The caller holds mu, or is
// the writer while no compaction pass can run (it holds cleanMu).
func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// writerActive returns the segment being written, for the writer: a
// compaction pass may replace other entries of segs concurrently, so the
// list is read under mu; the active segment itself is never replaced.
func (l *Log) writerActive() *segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active()
}

// Recovery reports what Open did to bring the log up.
func (l *Log) Recovery() RecoveryReport { return l.report }

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// NextOffset is the log end offset: the offset the next batch gets.
func (l *Log) NextOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return 0
	}
	return l.active().next
}

// StartOffset is the log start offset: the first offset still stored.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return 0
	}
	return l.startLocked()
}

// Size is the number of bytes stored in every segment.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments is the number of segment files.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// checkWritable returns why the writer may not write, if it may not.
func (l *Log) checkWritable() error {
	if err := l.failure(); err != nil {
		return err
	}
	l.mu.RLock()
	closed := l.closed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	return nil
}

// fail records the first write-path failure and returns it.
func (l *Log) fail(what string, err error) error {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	if l.failed == nil {
		l.failed = &failure{what: what, cause: err}
	}
	if strings.HasPrefix(what, "sync") {
		l.syncFailed = true // even when another failure came first: see recover
	}
	return l.failed
}

// failure is the first write-path failure, or nil.
func (l *Log) failure() error {
	l.failMu.Lock()
	defer l.failMu.Unlock()
	return l.failed
}

// Append writes buf, one or more whole RecordBatches whose base offsets
// are already assigned, contiguous from NextOffset(). Nothing is synced.
// It rolls the active segment first when buf would overflow it (syncing
// the old segment) or when it is too old.
//
// hs, when not nil, are the batches' headers as batch.Validate (or
// batch.Split) returned them for exactly these bytes, with the base
// offsets since assigned: Append then trusts their CRC32C and framing and
// checks only that their sizes add up to buf and their offsets continue
// the log. With hs nil, Append validates every batch itself.
//
// Invalid input (not whole batches, a bad CRC, offsets that do not
// continue the log) returns an error matching ErrBadAppend and writes
// nothing. A failed write returns an error matching ErrFailed and the
// cause (errors.Is(err, syscall.ENOSPC) works); the log then refuses
// writes until Recover (or a reopen) brings it back.
func (l *Log) Append(buf []byte, hs []batch.Header) error { return l.AppendShared(buf, hs, nil) }

// AppendShared is Append of bytes that lie in sh's buffer: a new log
// whose file is not made yet may keep them in memory by reference,
// holding sh, instead of copying them (see Shared). The caller keeps its
// own hold on sh at least until AppendShared returns. With sh nil it is
// Append.
func (l *Log) AppendShared(buf []byte, hs []batch.Header, sh *Shared) error {
	if err := l.checkWritable(); err != nil {
		return err
	}
	l.adoptConfig()
	if len(buf) == 0 {
		return nil
	}
	if int64(len(buf)) > maxSegmentBytes {
		return fmt.Errorf("%w: %d bytes is more than a segment can hold", ErrBadAppend, len(buf))
	}
	next := l.writerActive().next
	l.hdrs = l.hdrs[:0]
	var at int64 // position of the next batch in buf
	add := func(h batch.Header, _ []byte) error {
		if h.BaseOffset != next || h.LastOffsetDelta < 0 {
			return fmt.Errorf("batch offsets %d..%d, want base offset %d", h.BaseOffset, h.LastOffset(), next)
		}
		l.hdrs = append(l.hdrs, appendBatch{h: h, pos: at})
		at += int64(h.Size())
		next = h.LastOffset() + 1
		return nil
	}
	if hs == nil {
		if pos, err := batch.Split(buf, add); err != nil {
			return fmt.Errorf("%w: at byte %d: %w", ErrBadAppend, pos, err)
		}
	} else {
		for i := range hs {
			if hs[i].Size() < batch.HeaderSize || at+int64(hs[i].Size()) > int64(len(buf)) {
				return fmt.Errorf("%w: batch %d of %d bytes at byte %d overruns the %d bytes given", ErrBadAppend, i, hs[i].Size(), at, len(buf))
			}
			if err := add(hs[i], nil); err != nil {
				return fmt.Errorf("%w: batch %d: %w", ErrBadAppend, i, err)
			}
		}
		if at != int64(len(buf)) {
			return fmt.Errorf("%w: headers cover %d of %d bytes", ErrBadAppend, at, len(buf))
		}
	}

	a := l.writerActive()
	if a.size > 0 && l.shouldRoll(a, int64(len(buf)), next) {
		if err := l.Roll(); err != nil {
			return err
		}
		a = l.writerActive()
	}
	// At the end of the data: over zeros written ahead, or past them.
	if t, ok := a.file.(*tailFile); ok {
		if err := t.append(buf, a.size, sh); err != nil {
			return l.fail("write "+a.path, err)
		}
	} else if n, err := a.file.WriteAt(buf, a.size); err != nil || n != len(buf) {
		if err == nil {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(buf))
		}
		return l.fail("write "+a.path, err)
	}
	a.alloc = max(a.alloc, a.size+int64(len(buf)))
	if a.size == 0 {
		a.created = l.cfg.Now()
	}
	interval := int64(l.cfg.IndexInterval)
	base := a.size
	l.mu.Lock()
	for i := range l.hdrs {
		a.observe(&l.hdrs[i].h, base+l.hdrs[i].pos, interval)
	}
	l.mu.Unlock()
	return nil
}

// shouldRoll reports whether appending n bytes ending before offset next
// must go to a new segment.
func (l *Log) shouldRoll(a *segment, n int64, next int64) bool {
	switch {
	case a.size+n > l.cfg.SegmentBytes:
		return true
	case next-1-a.base > math.MaxUint32: // relative offsets must fit the index
		return true
	case l.cfg.SegmentAge > 0 && l.cfg.Now().Sub(a.created) >= l.cfg.SegmentAge:
		return true
	}
	return false
}

// Sync makes every byte appended before the call durable. Unlike the
// other writing methods it may run on a second goroutine, concurrently
// with the writer's Append, Roll and ApplyRetention (the acceptor
// overlaps an fsync with the next writes this way): it fsyncs the segment
// that is active when it starts, and a Roll syncs the segment it seals,
// so bytes appended before the call are durable either way.
func (l *Log) Sync() error {
	if err := l.checkWritable(); err != nil {
		return err
	}
	l.mu.RLock()
	var a *segment
	var size, synced int64
	if !l.closed && len(l.segs) > 0 {
		a = l.segs[len(l.segs)-1]
		size, synced = a.size, a.synced
		if !a.acquire() {
			a = nil
		}
	}
	l.mu.RUnlock()
	if a == nil {
		return ErrClosed
	}
	defer a.release()
	pending := l.dirPending.Load()
	if pending && size == 0 {
		return nil // a created log holding nothing: nothing to make durable
	}
	if !pending && size <= synced && l.durable.Load() {
		return nil // nothing written since the last sync
	}
	if err := l.syncCheckpointZeroing(); err != nil {
		return l.fail("sync", err)
	}
	var err error
	if size-synced <= vfs.HoldMaxBytes {
		// A small sync (a lone synchronous producer's, each request
		// its own): its write and fsync keep this goroutine's processor
		// (vfs.SyncHeld), so that the runtime neither wakes its monitor
		// thread nor hands the processor to another thread for them.
		_, err = vfs.SyncHeld(a.file)
	} else {
		err = a.file.Sync()
	}
	if err != nil { // a write-behind tail is flushed first either way
		if errors.Is(err, ErrFilesHeld) {
			return fmt.Errorf("storage: sync %s: %w", a.path, err) // nothing was written: the log is not failed
		}
		return l.fail("sync "+a.path, err)
	}
	if pending {
		if err := l.syncDir(); err != nil {
			return l.fail("sync", err)
		}
	}
	l.mu.Lock()
	a.synced = max(a.synced, size)
	l.mu.Unlock()
	l.durable.Store(true)
	return nil
}

// syncCheckpointZeroing makes the zeroing of the checkpoint by Open
// durable, if it is not yet, before the log's first sync makes anything
// written since durable (see SyncCheckpoints).
func (l *Log) syncCheckpointZeroing() error {
	l.cpMu.Lock()
	defer l.cpMu.Unlock()
	f := l.cpZeroed
	if f == nil {
		return nil
	}
	l.cpZeroed = nil
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("invalidate checkpoint: %w", err)
	}
	return nil
}

// SyncCheckpoints makes durable, in a number of filesystem syncs that
// does not grow with len(logs) (vfs.SyncSet), the zeroing of the
// clean-shutdown checkpoints that Open did for logs and left unsynced:
// a broker calls it once it has opened its partitions, so that a
// restart costs no fsync per partition. A log whose zeroing is not
// durable yet is still safe to write: its checkpoint names the active
// segment's exact size at the clean close, which Open trusts only while
// the segment has exactly that size, and its own first Sync makes the
// zeroing durable first. A failed sync fails the logs (a sync is not
// retried).
func SyncCheckpoints(fs vfs.FS, logs []*Log) error {
	var files []vfs.File
	var owners []*Log
	for _, l := range logs {
		l.cpMu.Lock()
		if l.cpZeroed != nil {
			files = append(files, l.cpZeroed)
			owners = append(owners, l)
			l.cpZeroed = nil
		}
		l.cpMu.Unlock()
	}
	if len(files) == 0 {
		return nil
	}
	set := vfs.NewSyncSet(fs, owners[0].dir)
	set.AddFile(files...)
	err := set.Sync()
	set.Close()
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		for _, l := range owners {
			l.fail("invalidate checkpoint", err)
		}
		return fmt.Errorf("storage: invalidate %d checkpoints: %w", len(files), err)
	}
	return nil
}

// DirsSynced tells a log made by Create that its caller made its
// directory entries durable after Prepare succeeded (vfs.SyncDirs over
// the directories of many new logs and their parent), so that its first
// Sync syncs its file only. It does nothing otherwise.
func (l *Log) DirsSynced() {
	if l.lazy != nil && l.lazy.made() != nil {
		l.dirPending.Store(false)
	}
}

// syncDir syncs the log's directory and, the first time for a log made
// by Create (dirPending), the directory's entry in its parent: with
// Config.DirSyncs, the two in a round shared with other logs' first
// Syncs.
func (l *Log) syncDir() error {
	if d := l.cfg.DirSyncs; d != nil && l.dirPending.Load() {
		if err := d.sync(l.dir, filepath.Dir(l.dir)); err != nil {
			return fmt.Errorf("sync directories %s and its parent: %w", l.dir, err)
		}
		l.dirPending.Store(false)
		return nil
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", l.dir, err)
	}
	if l.dirPending.Load() {
		if err := l.fs.SyncDir(filepath.Dir(l.dir)); err != nil {
			return fmt.Errorf("sync directory %s: %w", filepath.Dir(l.dir), err)
		}
		l.dirPending.Store(false)
	}
	return nil
}

// Pending reports whether the log is one made by Create whose first
// segment's file is not made yet (its first bytes, if any, are in
// memory; see Config.OnPending).
func (l *Log) Pending() bool { return l.lazy != nil && l.lazy.made() == nil }

// Prepare makes the directory and first segment file of a log made by
// Create, if they do not exist yet, without syncing them (see Create).
// It may run on any goroutine; a log made by Open has nothing to do.
func (l *Log) Prepare() error {
	if l.lazy == nil {
		return nil
	}
	if _, err := l.lazy.file(); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return nil
}

// HoldFiles keeps a log made by Create from making its directory and
// file until ReleaseFiles (ErrFilesHeld meanwhile; appends that fit in
// memory are kept), so that its parent directory can be moved without
// a file appearing at the old path. It reports whether they were made
// already, in which case they move with the directory. It does nothing
// for a log made by Open.
func (l *Log) HoldFiles() (made bool) {
	if l.lazy == nil {
		return true
	}
	return l.lazy.hold()
}

// ReleaseFiles undoes HoldFiles.
func (l *Log) ReleaseFiles() {
	if l.lazy != nil {
		l.lazy.release()
	}
}

// minPreallocate is the least Preallocate writes ahead (unless
// Config.Preallocate is smaller).
const minPreallocate = 16 << 10

// zeros is what Preallocate writes (read only).
var zeros = make([]byte, 64<<10)

// Preallocate writes zeros ahead of the active segment's data and syncs
// them, when fewer than half of the bytes it keeps ahead are left, so
// that the fsyncs after the next appends cover data only: the file's
// size and extents are already durable (a filesystem journals a file
// that grows at every fdatasync). It is a writing method, for the writer
// to call while idle, with nothing appended since the last Sync; it never
// changes what the log holds or what readers see. It keeps as many bytes
// ahead as the segment already holds, at least 16 KiB and at most
// Config.Preallocate, never past the segment size: idle partitions,
// which never call it, cost nothing, a partition written little zeroes
// little, and a small disk is not filled ahead of need.
//
// A failed write of zeros (a full disk) cuts them off again and is
// returned with the log still healthy: appends then grow the file, as
// without preallocation. A failed sync fails the log, as every failed
// sync does.
func (l *Log) Preallocate() error {
	if l.cfg.Preallocate <= 0 {
		return nil
	}
	if err := l.checkWritable(); err != nil {
		return err
	}
	if l.lazy != nil && l.lazy.made() == nil {
		return nil // a new log's first bytes kept until its file is made (lazyFile)
	}
	a := l.writerActive()
	end, due := l.preallocEnd(a)
	if !due {
		return nil
	}
	for pos := a.alloc; pos < end; {
		n, err := a.file.WriteAt(zeros[:min(end-pos, int64(len(zeros)))], pos)
		pos += int64(n)
		if err != nil {
			if terr := a.file.Truncate(a.alloc); terr != nil {
				return l.fail("cut preallocated zeros off "+a.path, terr)
			}
			return fmt.Errorf("storage: preallocate %s: %w", a.path, err)
		}
	}
	if err := a.file.Sync(); err != nil {
		return l.fail("sync "+a.path+" after preallocating", err)
	}
	a.alloc = end
	return nil
}

// preallocEnd returns how far Preallocate would zero the active segment
// a, and whether it would write at all: as far ahead as the segment
// already holds, so that a partition written little (one of thousands)
// zeroes little, and only once fewer than half of those bytes are left.
func (l *Log) preallocEnd(a *segment) (end int64, due bool) {
	ahead := min(l.cfg.Preallocate, max(minPreallocate, a.size))
	end = min(a.size+ahead, l.cfg.SegmentBytes)
	return end, a.alloc-a.size < ahead/2 && end > a.alloc
}

// PreallocateDue reports whether Preallocate would write zeros (or
// report an error) if called now, so that a writer that just appended
// and synced need not schedule an idle turn for it when it would do
// nothing. Writer only, as Preallocate.
func (l *Log) PreallocateDue() bool {
	if l.cfg.Preallocate <= 0 || l.lazy != nil && l.lazy.made() == nil {
		return false
	}
	if l.checkWritable() != nil {
		return true // Preallocate reports it
	}
	_, due := l.preallocEnd(l.writerActive())
	return due
}

// trimAlloc cuts the zeros written ahead off the active segment, so that
// a sealed segment, or one named by the clean-shutdown checkpoint, is
// exactly its data. The caller syncs.
func (l *Log) trimAlloc(a *segment) error {
	if a.alloc <= a.size {
		return nil
	}
	if err := a.file.Truncate(a.size); err != nil {
		return fmt.Errorf("cut preallocated zeros off %s: %w", a.path, err)
	}
	a.alloc = a.size
	return nil
}

// Roll seals the active segment and starts a new one at NextOffset: it
// cuts the zeros written ahead off the old segment, syncs it, writes its
// indexes, creates the new file and syncs the directory. An empty active
// segment is not rolled.
func (l *Log) Roll() error {
	if err := l.checkWritable(); err != nil {
		return err
	}
	a := l.writerActive()
	if a.size == 0 {
		return nil
	}
	if err := l.trimAlloc(a); err != nil {
		return l.fail("roll", err)
	}
	if err := a.file.Sync(); err != nil { // flushes a write-behind tail first
		return l.fail("sync "+a.path+" before roll", err)
	}
	if t, ok := a.file.(*tailFile); ok {
		t.release() // sealed: no tail any more
	}
	l.mu.Lock()
	a.synced = a.size
	l.mu.Unlock()
	if err := writeIndexes(l.fs, a); err != nil {
		return l.fail("roll", err)
	}
	s, err := l.createSegment(a.next)
	if err != nil {
		return l.fail("roll", err)
	}
	if err := l.syncDir(); err != nil {
		s.release()
		return l.fail("roll", err)
	}
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	return nil
}

// Close syncs, writes the clean-shutdown checkpoint and closes files. It
// is idempotent. A log that failed closes its files without a checkpoint,
// so the next Open scans it, and Close returns nil: the failure was
// reported when it happened. Slices taken earlier stop working; a read in
// progress finishes first. CloseAll closes many logs this way together.
func (l *Log) Close() error { return CloseAll(l.fs, []*Log{l}, nil)[0] }
