package acceptor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
)

// runState is the run goroutine's private state; nothing else touches it.
type runState struct {
	a   *Acceptor
	cfg *Config

	made bool // the log's files exist (alone)

	next    int64 // the offset the next append gets
	written int64 // every offset below it has been written to the log
	synced  int64 // every offset below it has been fsynced (the segment, or the WAL)

	// With a WAL (Config.WAL): the segment file is fsynced below
	// logSynced; walPos is the position of the last entry this partition
	// appended to the WAL; direct says that a write since the last fsync
	// started did not go to the WAL (the cycle was large), so the next
	// fsync must be the segment's.
	logSynced int64
	walPos    uint64
	direct    bool
	// ckptWanted: the WAL asked for a checkpoint while a sync ran; the
	// next sync to start is the segment's.
	ckptWanted bool
	walDone    func(error) // a.walSynced, made once

	buf       []byte         // coalescing buffer, from bufPools while it holds bytes (small, then full-size if the cycle outgrows it); nil otherwise
	bufp      *[]byte        // the pool's handle on buf
	bufHdrs   []batch.Header // headers of the batches in buf, in order
	scratch   []batch.Header // headers of a request the acceptor parsed itself
	pending   []*waiter      // appends written by the next write: copied into buf, or about to be written as-is
	unsynced  []*waiter      // written durable appends waiting for fsync (FsyncAlways)
	sinceSync int            // appends written since the last fsync started
	syncBytes int            // bytes written since the last fsync started
	lastBytes int            // bytes the last fsync started covered (written since the one before)
	prepared  bool           // Preallocate ran since the last write
	failed    *failure       // set once; every later append fails with it

	// An fsync runs inline on the run goroutine while appends arrive one
	// at a time (a lone synchronous producer: no hand-off to wake), and
	// on the sync goroutine (syncLoop) under load, so that the run
	// goroutine keeps taking and writing appends meanwhile. overlap says
	// which: it is set when appends arrived during the last fsync and
	// cleared when one finds nothing new. At most one fsync is in
	// flight; it covers every offset below syncTarget.
	overlap    bool
	syncing    bool
	syncTarget int64     // written when the running fsync started
	syncCount  int       // appends it covers that were written since the previous one
	syncStart  time.Time // when it started
	syncWAL    bool      // the running fsync is a WAL Sync (else the segment's)
	lastWAL    bool      // the last fsync of appends (not a checkpoint) was a WAL Sync
	syncPos    uint64    // the WAL position it waits for
	syncReq    chan syncJob
	syncDone   chan error
	syncExited chan struct{}

	flushTick, retainTick <-chan time.Time // retainTick is nil when retention is off
	stopTickers           func()
	// tickOnDemand: the WAL says when it may want a checkpoint
	// (walNotifier), so an idle partition whose appends are all durable
	// waits without the flush tick until it does: thousands of idle
	// partitions then cost no wake-up a second each.
	tickOnDemand bool

	// While failed, healTimer fires the next attempt to recover the log;
	// healC is its channel (nil when none is armed), healDelay the wait
	// that armed it.
	healTimer *time.Timer
	healC     <-chan time.Time
	healDelay time.Duration
}

// init sets the run state up before the run goroutine starts (an
// inline append may come first). The log has been synced: everything in
// it is durable.
func (r *runState) init(a *Acceptor) {
	r.a, r.cfg = a, &a.cfg
	r.walDone = a.walSynced
	r.next = a.log.NextOffset()
	r.written, r.synced, r.logSynced = r.next, r.next, r.next
	r.prepared = true // nothing written yet: an idle partition allocates nothing
}

// startRun sets up what only the run goroutine uses (its sync
// goroutine's channels and its tickers), just before it starts
// (Acceptor.ensureRun): a partition whose run goroutine never starts
// holds no goroutine and no timer.
func (r *runState) startRun() {
	a := r.a
	r.syncReq = make(chan syncJob, 1)
	r.syncDone = make(chan error, 1)
	r.syncExited = make(chan struct{})
	var stopFlush, stopRet func()
	r.flushTick, stopFlush = a.cfg.NewTicker(a.cfg.FlushInterval)
	stopRet = func() {}
	if a.cfg.RetentionCheck > 0 {
		r.retainTick, stopRet = a.cfg.NewTicker(a.cfg.RetentionCheck)
	}
	r.stopTickers = func() { stopFlush(); stopRet() }
	if n, ok := a.cfg.WAL.(walNotifier); ok && a.cfg.Fsync == FsyncAlways {
		r.tickOnDemand = true
		n.OnBehind(a.walBehind)
		if a.cfg.WAL.Behind() { // asked before it listened
			a.behind.Store(true)
		}
	}
}

// walNotifier is a WAL that says when a partition's checkpoint may be
// wanted (wal.Handle.OnBehind): it calls f whenever Behind may have
// turned true.
type walNotifier interface {
	OnBehind(f func())
}

// walBehind is the WAL's notification that it may want a checkpoint: the
// run goroutine waits with the flush tick again, which asks Behind.
func (a *Acceptor) walBehind() {
	if !a.behind.Swap(true) { // else the run goroutine was told already
		a.kickRun()
	}
}

// flushTickC is the flush tick's channel for the run goroutine's wait, or
// nil when the tick has nothing to do until the WAL says otherwise (see
// tickOnDemand): everything written is durable and the WAL has not asked.
// A wait that began while a WAL sync was running keeps the tick (the
// flusher finishes the sync without waking the run goroutine): the
// partition takes at most one tick more before it waits without.
func (r *runState) flushTickC() <-chan time.Time {
	if r.tickOnDemand && r.written <= r.synced && len(r.pending) == 0 && !r.ckptWanted && !r.a.behind.Load() {
		return nil
	}
	return r.flushTick
}

// preallocMaxSync: the log writes zeros ahead (storage.Log.Preallocate)
// only after fsyncs covering at most this many bytes. Pre-zeroing saves
// an fsync the file-size metadata it would commit, a fixed cost that
// matters for small synchronous appends; after large writes the fsync is
// mostly data and writing zeros first would only double the I/O.
const preallocMaxSync = 64 << 10

// Coalescing buffers come in two sizes: a cycle starts in a small one
// and moves to a full one (Config.BufferSize) only if its appends
// outgrow it. With many partitions each cycle holds a few KiB per
// partition, so the memory held follows the bytes being coalesced, not
// the number of partitions busy at once.
const smallBufSize = 64 << 10

// bufPools hold coalescing buffers between uses, shared by every
// acceptor: [0] the small ones, [1] the full ones (whose capacity is the
// acceptor's BufferSize; one of another size is dropped). A partition
// holds one only while appends are being coalesced.
var bufPools [2]sync.Pool // of *[]byte

// takeBuf gives the run goroutine an empty coalescing buffer with room
// for at least need bytes (need <= BufferSize).
func (r *runState) takeBuf(need int) {
	if r.buf != nil {
		return
	}
	size, pool := r.cfg.BufferSize, &bufPools[1]
	if need <= smallBufSize && smallBufSize < size {
		size, pool = smallBufSize, &bufPools[0]
	}
	if p, ok := pool.Get().(*[]byte); ok && cap(*p) == size {
		r.buf, r.bufp = (*p)[:0], p
		return
	}
	r.buf = make([]byte, 0, size)
	r.bufp = new([]byte)
}

// growBuf moves the buffer's bytes to a full-size buffer when the next
// need bytes would not fit.
func (r *runState) growBuf(need int) {
	if len(r.buf)+need <= cap(r.buf) {
		return
	}
	old, oldp := r.buf, r.bufp
	r.buf, r.bufp = nil, nil
	r.takeBuf(r.cfg.BufferSize)
	r.buf = append(r.buf, old...)
	*oldp = old[:0]
	bufPools[0].Put(oldp)
}

// dropBuf returns the (written) coalescing buffer to its pool.
func (r *runState) dropBuf() {
	if r.buf == nil {
		return
	}
	*r.bufp = r.buf[:0]
	if cap(r.buf) == r.cfg.BufferSize {
		bufPools[1].Put(r.bufp)
	} else {
		bufPools[0].Put(r.bufp)
	}
	r.buf, r.bufp = nil, nil
}

// syncJob is one fsync for the sync goroutine: the WAL's up to pos, or
// the segment's.
type syncJob struct {
	wal bool
	pos uint64
}

// syncLoop is the sync goroutine, started and stopped by the run
// goroutine (loop): it runs one fsync per request on syncReq and
// reports on syncDone, until syncReq is closed.
func (a *Acceptor) syncLoop() {
	defer close(a.run.syncExited)
	for j := range a.run.syncReq {
		a.run.syncDone <- a.doSync(j)
	}
}

// doSync runs one fsync: a WAL Sync (shared by every partition waiting
// on the same round; it takes no slot of the semaphore) or the log's.
func (a *Acceptor) doSync(j syncJob) error {
	if j.wal {
		return a.cfg.WAL.Sync(j.pos)
	}
	return a.syncLog()
}

// syncLog fsyncs the log, holding a slot of the shared semaphore if
// there is one.
func (a *Acceptor) syncLog() error {
	if s := a.cfg.Syncs; s != nil {
		s <- struct{}{}
		defer func() { <-s }()
	}
	return a.log.Sync()
}

// loop is the run goroutine. Each turn takes one request if one is
// queued; when the queue is empty it first writes the buffer (without
// fsync), and only on a later turn that still finds the queue empty does
// it start an fsync: writing gives producers a moment to refill the
// queue, so that one fsync covers as many appends as possible (group
// commit). Under load the fsync runs on the sync goroutine while this one
// goes on taking and writing appends, which the next fsync covers; when
// appends come one at a time it runs inline (see runState.overlap).
func (a *Acceptor) loop() {
	r := &a.run
	c := a.ch.Load() // stored before the goroutine started
	defer close(c.done)
	// Until the goroutine holds runMu, appends are handled inline, as
	// while it waits in its select.
	a.runMu.Lock()
	defer a.runMu.Unlock()
	defer r.stopTickers()
	go a.syncLoop()
	flushC := r.flushTick

	for {
		var w *waiter
		var ok bool
		q := *a.queue.Load()
		select {
		case w, ok = <-q:
			if !ok {
				continue // the queue grew: take from the new one
			}
			a.queued.Add(-1)
		default:
			if r.idle() {
				continue
			}
			// Wait without runMu, so that Enqueue callers and the
			// WAL's flusher can work in this goroutine's stead; what
			// they change that this select waits on comes with a kick.
			healC, retainC, flushWait := r.healC, r.retainTick, r.flushTickC()
			var err error
			ev := evNone
			a.runMu.Unlock()
			select {
			case w, ok = <-q:
				if !ok {
					ev = evKick // the queue grew: look again
				}
			case err = <-r.syncDone:
				ev = evSync
			case <-flushWait:
				ev = evFlush
			case <-retainC:
				ev = evRetain
			case <-healC:
				ev = evHeal
			case <-c.kick:
				ev = evKick
			case <-c.stop:
				ev = evStop
			}
			a.runMu.Lock()
			switch ev {
			case evNone:
				a.queued.Add(-1)
			case evSync:
				r.finishSync(err)
				continue
			case evFlush:
				r.onFlushTick()
				continue
			case evRetain:
				r.retention()
				continue
			case evHeal:
				r.heal()
				continue
			case evKick:
				continue
			case evStop:
				r.shutdown()
				return
			}
		}
		// Under sustained load the queue never empties: poll the fsync
		// and the tickers (single-case selects with default are cheap
		// non-blocking receives).
		select {
		case err := <-r.syncDone:
			r.finishSync(err)
		default:
		}
		select {
		case <-flushC:
			r.onFlushTick()
		default:
		}
		select {
		case <-r.retainTick:
			r.retention()
		default:
		}
		r.handle(w)
	}
}

// What woke the run goroutine's select (evNone: an append).
const (
	evNone = iota
	evSync
	evFlush
	evRetain
	evHeal
	evKick
	evStop
)

// idle runs when the queue is empty: it writes the buffer, or, if there
// is nothing to write, fsyncs what was written (FsyncAlways), or, once
// all is durable after writes, has the log write zeros ahead of its data
// (Preallocate) so that the next fsyncs cover data only. It reports
// whether it did anything.
func (r *runState) idle() bool {
	if len(r.pending) > 0 {
		r.write(r.buf, r.bufHdrs, nil)
		return true
	}
	if r.cfg.Fsync != FsyncAlways || r.failed != nil || r.syncing {
		return false
	}
	if r.ckptWanted {
		r.ckptWanted = false
		if r.logSynced < r.written {
			r.startSync(true)
			return true
		}
	}
	if r.written > r.synced {
		if r.overlap {
			r.startSync(false)
		} else {
			r.syncInline()
		}
		return true
	}
	if !r.prepared {
		r.prepared = true
		if r.lastBytes > preallocMaxSync || r.lastWAL {
			// While appends go through the WAL the segment is
			// fsynced only by checkpoints, in the background: zeros
			// ahead would only add I/O (a write of zeros and an
			// fsync for each checkpoint).
			return false // large writes: the fsync is mostly data, zeros would double the I/O
		}
		// A failure to write the zeros (a full disk) leaves the log
		// healthy; appends then grow the file as they would anyway.
		if err := r.a.log.Preallocate(); errors.Is(err, storage.ErrFailed) {
			r.fail(err)
		}
		return true
	}
	return false
}

// skipPrepare marks the log prepared when the idle turn that would have
// it write zeros ahead (idle) has nothing to do: the last fsync covered
// large writes or was the WAL's, or the log has enough zeros ahead
// (PreallocateDue, for a log that tells). Appends made inline then need
// not wake the run goroutine after each for nothing.
func (r *runState) skipPrepare() {
	if r.prepared || r.failed != nil || r.syncing || r.written > r.synced || len(r.pending) > 0 {
		return
	}
	if r.lastBytes > preallocMaxSync || r.lastWAL {
		r.prepared = true
		return
	}
	if d, ok := r.a.log.(interface{ PreallocateDue() bool }); ok && !d.PreallocateDue() {
		r.prepared = true
	}
}

// onFlushTick fsyncs at least once per FlushInterval while appends keep
// coming (FsyncAlways, FsyncInterval).
func (r *runState) onFlushTick() {
	if r.cfg.Fsync == FsyncNever || r.failed != nil {
		return
	}
	// Cleared before Behind is asked: a seal after the question sets it
	// again, and the next tick looks.
	r.a.behind.Store(false)
	if len(r.pending) > 0 {
		r.write(r.buf, r.bufHdrs, nil)
	}
	if r.failed != nil {
		return
	}
	// The checkpoint: the segment's own fsync, after which the WAL no
	// longer needs this partition's entries below it. Only when the WAL
	// asks (it holds old segments with them), so that the segment fsyncs
	// stay rare. A partition busy with a sync checkpoints when it ends
	// (ckptWanted), since its syncs may be running at every tick.
	ckpt := r.cfg.WAL != nil && r.logSynced < r.written && r.cfg.WAL.Behind()
	if r.syncing {
		r.ckptWanted = r.ckptWanted || ckpt
		return
	}
	switch {
	case ckpt:
		r.ckptWanted = false
		r.startSync(true)
	case r.written > r.synced:
		r.startSync(false)
	}
}

// retention applies the log's retention limits. A failure to delete old
// segments does not endanger appended data, so it is logged and counted,
// and the partition keeps accepting appends.
func (r *runState) retention() {
	if r.failed != nil {
		return
	}
	if _, err := r.a.log.ApplyRetention(); err != nil {
		if errors.Is(err, storage.ErrFailed) {
			r.fail(err)
			return
		}
		r.cfg.Metrics.retentionFailed()
		r.cfg.Logger.Warn("acceptor: retention failed", "err", err)
	}
}

// handle takes one queued append: checks it, assigns its offsets and
// places it in the buffer or writes it.
func (r *runState) handle(w *waiter) {
	if !w.state.CompareAndSwap(wQueued, wTaken) {
		r.a.recycle(w) // cancelled by its caller while queued
		return
	}
	r.cfg.Metrics.queueDepth(int(r.a.queued.Load()))
	if r.failed != nil {
		r.release(w, r.failed)
		return
	}
	req := w.req
	hs, records, err := headers(req, r.scratch)
	if req.Headers == nil {
		r.scratch = hs[:0]
	}
	if err != nil {
		r.release(w, err)
		return
	}
	base := r.next
	if req.Check != nil {
		dupBase, dup, err := req.Check(base)
		if err != nil {
			r.release(w, err)
			return
		}
		if dup {
			w.res = Result{BaseOffset: dupBase, Duplicate: true}
			w.end = r.next
			r.freed(w)
			r.track(w)
			return
		}
	}
	assignOffsets(req.Batches, hs, base)
	r.next += records
	w.res.BaseOffset, w.end = base, r.next

	n := len(req.Batches)
	switch {
	case r.cfg.NoCoalesce, n >= r.cfg.BufferSize, len(r.pending) == 0 && r.a.queued.Load() == 0:
		// Written as-is: coalescing is off, the append would fill the
		// buffer on its own, or nothing else is waiting to share a write
		// with it.
		if len(r.pending) > 0 {
			r.write(r.buf, r.bufHdrs, nil)
			if r.failed != nil {
				r.release(w, r.failed)
				return
			}
		}
		r.pending = append(r.pending, w)
		r.write(req.Batches, hs, req.Shared)
	default:
		if len(r.buf)+n > r.cfg.BufferSize {
			r.write(r.buf, r.bufHdrs, nil) // full: write it; this append starts the emptied buffer
		}
		if r.failed != nil {
			r.release(w, r.failed)
			return
		}
		r.takeBuf(n)
		r.growBuf(n)
		r.buf = append(r.buf, req.Batches...)
		r.bufHdrs = append(r.bufHdrs, hs...)
		r.freed(w)
		r.pending = append(r.pending, w)
	}
}

// track places an append that writes nothing (a duplicate): it is
// released with the next write, or at once if everything before it is
// already as durable as it asks.
func (r *runState) track(w *waiter) {
	switch {
	case len(r.pending) > 0:
		r.pending = append(r.pending, w)
	case !w.durable || r.cfg.Fsync != FsyncAlways || r.synced >= w.end:
		r.release(w, nil)
	default:
		r.unsynced = append(r.unsynced, w)
	}
}

// write appends b (the buffer, or one append's own bytes), whose batch
// headers are hs, to the log and settles the pending appends it holds.
// sh is the Shared buffer an append's own bytes lie in (Request.Shared),
// nil for the buffer.
func (r *runState) write(b []byte, hs []batch.Header, sh *storage.Shared) {
	if len(r.pending) == 0 {
		return
	}
	var err error
	if len(b) > 0 {
		if sl, ok := r.a.log.(sharedLog); ok && sh != nil {
			err = sl.AppendShared(b, hs, sh)
		} else {
			err = r.a.log.Append(b, hs)
		}
		r.cfg.Metrics.write(len(b), len(r.pending))
	}
	if err == nil && r.cfg.WAL != nil && len(b) > 0 {
		// Before the buffer goes back to the pool: the WAL copies b.
		r.toWAL(r.written, r.pending[len(r.pending)-1].end, b)
	}
	r.dropBuf()
	r.bufHdrs = r.bufHdrs[:0]
	pending := r.pending
	r.pending = r.pending[:0]
	if err != nil {
		for _, w := range pending {
			r.freed(w)
		}
		r.unsynced = append(r.unsynced, pending...)
		clear(pending)
		r.fail(err)
		return
	}
	r.written = pending[len(pending)-1].end
	r.sinceSync += len(pending)
	r.syncBytes += len(b)
	r.prepared = false
	always := r.cfg.Fsync == FsyncAlways
	if !always {
		// Published before any release, so that a released caller reads
		// its own append.
		r.a.setHW(r.written)
	}
	for i, w := range pending {
		r.freed(w)
		if w.durable && always {
			r.unsynced = append(r.unsynced, w)
		} else {
			r.release(w, nil)
		}
		pending[i] = nil
	}
}

// alone reports whether the partition writes alone (wal.Handle.Alone)
// and so fsyncs its segment directly. A new log whose first bytes are
// still in memory (storage.Log.Pending: its file is being made off the
// request path) stays on the WAL: fsyncing the segment would make its
// file and sync its directories in the acknowledgement's way.
func (r *runState) alone() bool {
	return r.cfg.WAL.Alone() && !r.pendingLog()
}

// pendingLog reports whether the log is a new one whose file is not made
// yet (storage.Log.Pending): its first bytes are in memory, and an fsync
// of its segment would make the file, and sync its directories, in the
// acknowledgement's way. Once the file is made it stays made.
func (r *runState) pendingLog() bool {
	if r.made {
		return false
	}
	if p, ok := r.a.log.(interface{ Pending() bool }); ok && p.Pending() {
		return true
	}
	r.made = true
	return false
}

// toWAL hands the bytes just written to the log (offsets first up to
// end) to the WAL, while the cycle stays small and other partitions
// write too; a large cycle, or one of a partition writing alone, is
// fsynced in the segment directly, which covers every earlier byte of
// the file too. A new log whose file is not made yet hands large cycles
// to the WAL as well: its segment's fsync would make the file in the
// acknowledgement's way (pendingLog), where the WAL's round costs one
// sequential write more.
func (r *runState) toWAL(first, end int64, b []byte) {
	if r.direct || r.syncBytes+len(b) > r.cfg.WALMaxCycle && !r.pendingLog() || r.alone() {
		r.direct = true
		return
	}
	pos, err := r.cfg.WAL.Append(first, end, b)
	if err != nil {
		r.direct = true // closed, or too large: the segment's fsync covers it
		return
	}
	r.walPos = pos
}

// beginSync notes the start of an fsync of everything written so far and
// returns what it is: the WAL's when the cycle went to the WAL (unless
// log asks for the segment's), else the segment's.
func (r *runState) beginSync(log bool) syncJob {
	r.syncing = true
	r.syncTarget, r.syncCount, r.sinceSync = r.written, r.sinceSync, 0
	r.lastBytes, r.syncBytes = r.syncBytes, 0
	r.syncStart = time.Now()
	r.syncWAL = r.cfg.WAL != nil && !log && !r.direct
	if !log {
		r.lastWAL = r.syncWAL
	}
	r.syncPos = r.walPos
	r.direct = false
	return syncJob{wal: r.syncWAL, pos: r.syncPos}
}

// startSync hands an fsync of everything written so far to the sync
// goroutine (log: the segment's, even for a small cycle).
func (r *runState) startSync(log bool) {
	r.syncReq <- r.beginSync(log)
}

// startAsync starts an fsync of everything written so far without
// waiting for it, from any goroutine holding runMu: a WAL sync's end is
// taken by the WAL's flusher (walSynced), a segment's by the run
// goroutine (syncDone).
func (r *runState) startAsync() {
	j := r.beginSync(false)
	if !j.wal {
		r.syncReq <- j // free: no sync was running
		return
	}
	r.cfg.WAL.SyncAsync(j.pos, r.walDone)
}

// inlineOK reports whether an append of n bytes may be handled inline
// (Acceptor.tryInline): the partition is healthy, nothing is being
// coalesced, and the cycle stays small and goes to the WAL.
func (r *runState) inlineOK(n int) bool {
	return r.failed == nil && len(r.pending) == 0 && !r.direct && !r.cfg.NoCoalesce &&
		r.syncBytes+n <= r.cfg.WALMaxCycle && !r.alone()
}

// inlineSyncOK reports whether a durable append may be written and
// fsynced on its caller's goroutine (Acceptor.appendSyncInline): the
// partition is healthy and fsyncs its own segment under FsyncAlways (no
// WAL, or it writes alone; or the append asks to lead the WAL round,
// Request.LeadWAL, stays small and no round is running: under load the
// partition's run state is not held through a round another leads),
// nothing is being coalesced or synced, and
// appends come one at a time (no overlap: the run goroutine would sync
// inline too).
func (r *runState) inlineSyncOK(w *waiter) bool {
	return w.durable && r.cfg.Fsync == FsyncAlways && r.failed == nil && len(r.pending) == 0 &&
		!r.cfg.NoCoalesce && !r.syncing && !r.overlap && !r.direct &&
		(r.cfg.WAL == nil || r.alone() || w.req.LeadWAL && r.syncBytes+len(w.req.Batches) <= r.cfg.WALMaxCycle && r.cfg.WAL.Idle())
}

// walSynced ends an asynchronous WAL sync (startAsync), on the WAL's
// flusher goroutine. If the run state is free it finishes the sync
// there, releasing what it made durable, and starts the next one if more
// was written meanwhile; otherwise it hands the result to whoever holds
// the run state, through syncDone (the run goroutine waits on it).
func (a *Acceptor) walSynced(err error) {
	if !a.runMu.TryLock() {
		a.run.syncDone <- err // one sync runs at a time: room in the buffer
		return
	}
	r := &a.run
	r.finishSync(err)
	kick := r.failed != nil || len(r.pending) > 0
	if !kick && !r.syncing {
		switch {
		case r.ckptWanted:
			kick = true // the run goroutine starts the checkpoint (idle)
		case r.written > r.synced:
			r.startAsync()
		}
	}
	a.runMu.Unlock()
	if kick {
		a.kickRun()
	}
}

// syncInline fsyncs everything written so far on the run goroutine and
// releases what it made durable. Appends that arrived meanwhile (the
// queue is not empty) mean load: the next fsyncs overlap with writes.
func (r *runState) syncInline() {
	err := r.a.doSync(r.beginSync(false))
	busy := r.a.queued.Load() > 0 // read before the release lets callers queue their next appends
	r.finishSync(err)
	r.overlap = busy
}

// finishSync takes the result of the running fsync and releases the
// appends it made durable: those written before it started. An fsync
// during which nothing new was written or queued ends the overlap: the
// next one runs inline.
func (r *runState) finishSync(err error) {
	r.syncing = false
	r.overlap = r.written > r.syncTarget || r.a.queued.Load() > 0
	r.cfg.Metrics.fsync(time.Since(r.syncStart), r.syncCount)
	if r.failed != nil {
		return // its waiters were failed already
	}
	if err != nil {
		r.fail(err)
		return
	}
	r.synced = r.syncTarget
	if !r.syncWAL {
		r.logSynced = r.syncTarget
		if r.cfg.WAL != nil {
			r.cfg.WAL.Checkpoint(r.syncTarget)
		}
	}
	r.healDelay = 0 // the disk works again: a later failure starts the backoff afresh
	r.a.setHW(r.synced)
	n := 0
	for _, w := range r.unsynced {
		if w.end > r.synced {
			break // written after the fsync started; the next one covers it
		}
		r.release(w, nil)
		n++
	}
	rest := copy(r.unsynced, r.unsynced[n:])
	clear(r.unsynced[rest:])
	r.unsynced = r.unsynced[:rest]
}

// syncNow runs an fsync of the segment covering everything written and
// waits for it (with a WAL, it checkpoints too).
func (r *runState) syncNow() {
	if r.syncing {
		r.finishSync(<-r.syncDone)
	}
	if r.failed == nil && (r.written > r.synced || r.logSynced < r.written) {
		r.startSync(true)
		r.finishSync(<-r.syncDone)
	}
}

// fail stops the partition: the appends the failed write or fsync covers,
// and every later one, fail with the error. A failed fsync cannot be
// retried safely (the kernel may have dropped the dirty pages), so the
// partition refuses appends until its log is recovered (heal).
func (r *runState) fail(err error) {
	if r.failed == nil {
		r.failed = &failure{cause: err}
		r.a.failure.Store(r.failed)
		r.cfg.Metrics.failed()
		r.cfg.Logger.Error("acceptor: partition failed; it refuses appends until it heals", "err", err)
		r.armHeal()
		r.a.healthChanged()
	}
	for _, list := range [][]*waiter{r.pending, r.unsynced} {
		for i, w := range list {
			r.freed(w)
			r.release(w, r.failed)
			list[i] = nil
		}
	}
	r.pending, r.unsynced, r.bufHdrs = r.pending[:0], r.unsynced[:0], r.bufHdrs[:0]
	r.dropBuf()
}

// armHeal schedules the next attempt to recover the failed log, backing
// off from HealBackoff to HealBackoffMax.
func (r *runState) armHeal() {
	if r.healDelay == 0 {
		r.healDelay = r.cfg.HealBackoff
	} else {
		r.healDelay = min(2*r.healDelay, r.cfg.HealBackoffMax)
	}
	if r.healTimer == nil {
		r.healTimer = time.NewTimer(r.healDelay)
	} else {
		r.healTimer.Reset(r.healDelay)
	}
	r.healC = r.healTimer.C
}

// heal tries to bring the failed partition back: once no fsync is
// running, the log cuts itself back to its durable bytes and rescans its
// tail (storage.Log.Recover; under FsyncInterval and FsyncNever it keeps
// every whole write, which was acknowledged already), then
// Config.Recovered rebuilds what the caller derives from the log. Only
// then does the partition take appends again, from the log's end. The
// appends that failed were never acknowledged; any of their bytes the log
// kept were fsynced, so a consumer may read them (and an idempotent
// producer's retry finds them as duplicates).
func (r *runState) heal() {
	r.healC = nil
	if r.failed == nil {
		return
	}
	if r.syncing {
		r.finishSync(<-r.syncDone) // failed already: this only collects it
	}
	if r.cfg.WAL != nil {
		// The failure may be the WAL's, leaving the log healthy but
		// holding bytes never acknowledged: cut them too.
		r.a.log.Abandon(r.failed.cause)
	}
	var err error
	if r.cfg.WAL != nil {
		// Keep what the segment file holds whole up to the acknowledged
		// end, and refill the rest from the WAL: cutting back to the
		// segment's last fsync would need room for everything since,
		// which the WAL cannot free before this partition checkpoints.
		if err = r.a.log.RecoverUpTo(r.synced); err == nil {
			err = r.healWAL()
		}
	} else {
		err = r.a.log.Recover(r.cfg.Fsync != FsyncAlways)
	}
	if err == nil && r.cfg.Recovered != nil {
		err = r.cfg.Recovered()
	}
	if err != nil {
		r.cfg.Metrics.healFailed()
		r.cfg.Logger.Debug("acceptor: partition still failed", "err", err, "retry_in", min(2*r.healDelay, r.cfg.HealBackoffMax))
		r.armHeal()
		return
	}
	next := r.a.log.NextOffset()
	r.next, r.written, r.synced, r.logSynced, r.sinceSync = next, next, next, next, 0
	r.direct, r.syncBytes, r.ckptWanted = false, 0, false
	// healDelay is kept until an fsync succeeds, so that a disk still
	// full fails, heals and fails again ever more slowly.
	r.failed = nil
	r.a.failure.Store(nil)
	r.a.setHW(next) // everything the recovered log holds was fsynced
	r.cfg.Metrics.healed()
	r.cfg.Logger.Info("acceptor: partition healed; it takes appends again", "next_offset", next)
	r.a.healthChanged()
}

// healWAL finishes a heal with a WAL: the log kept the whole batches its
// file held up to r.synced (storage.Log.RecoverUpTo), but acknowledged
// appends past them are durable in the WAL only, so they are refilled
// from it (up to r.synced); then the log is
// fsynced and a truncate entry tells a later replay that entries of this
// partition before it are stale past the log's end. It is synced before
// the partition takes appends again.
func (r *runState) healWAL() error {
	l := r.a.log
	if l.NextOffset() < r.synced {
		if err := r.cfg.WAL.Refill(l, r.synced); err != nil {
			return fmt.Errorf("refill acknowledged appends from the WAL: %w", err)
		}
	}
	if err := l.Sync(); err != nil {
		return fmt.Errorf("sync the healed log: %w", err)
	}
	end := l.NextOffset()
	pos, err := r.cfg.WAL.Truncate(end)
	if err == nil {
		err = r.cfg.WAL.Sync(pos)
	}
	if err != nil {
		return fmt.Errorf("write the WAL's truncate entry: %w", err)
	}
	r.cfg.WAL.Checkpoint(end)
	return nil
}

// shutdown runs when Close is called and no more appends can be queued:
// it handles what is left in the queue, writes and fsyncs it, and wakes
// HWChanged waiters for good.
func (r *runState) shutdown() {
	for {
		select {
		case w, ok := <-*r.a.queue.Load():
			if !ok {
				continue // grown before Close: the appends moved to the new queue
			}
			r.a.queued.Add(-1)
			r.handle(w)
			continue
		default:
		}
		break
	}
	healthy := r.failed == nil
	r.write(r.buf, r.bufHdrs, nil)
	if r.a.leaveSync.Load() {
		// CloseLeavingSync: the caller syncs the log, unless an append
		// waits for it.
		if r.syncing {
			r.finishSync(<-r.syncDone)
		}
		if len(r.unsynced) > 0 {
			r.syncNow()
		}
	} else {
		r.syncNow()
	}
	close(r.syncReq)
	<-r.syncExited
	if healthy && r.failed != nil {
		r.a.closeErr = r.failed
	}
	r.a.markStopped()
	if r.healTimer != nil {
		r.healTimer.Stop()
	}
}

// freed notes that the acceptor no longer needs w's bytes (they were
// copied or written). A caller that gave up while they were in use is
// told now.
func (r *runState) freed(w *waiter) {
	w.req = nil
	for {
		switch s := w.state.Load(); s {
		case wTaken:
			if w.state.CompareAndSwap(wTaken, wWritten) {
				return
			}
		case wAbandonTaken:
			w.state.Store(wAbandoned) // only the acceptor moves it out of abandonTaken
			w.done <- sigFreed
			return
		default: // already freed (wWritten, wAbandoned)
			return
		}
	}
}

// release finishes w with err (nil: success, w.res holds the result).
func (r *runState) release(w *waiter, err error) {
	if err != nil {
		w.res = Result{}
		if f, ok := err.(*failure); ok {
			err = f
		}
	}
	w.err = err
	w.req = nil
	for {
		switch s := w.state.Load(); s {
		case wAbandoned:
			r.a.recycle(w) // its caller is gone
			return
		case wTaken, wAbandonTaken, wWritten:
			if w.state.CompareAndSwap(s, wDone) {
				w.done <- sigFinal
				return
			}
		default:
			panic("acceptor: releasing a waiter twice")
		}
	}
}
