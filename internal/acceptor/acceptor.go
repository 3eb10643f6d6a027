package acceptor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
)

// partitionLog is what the acceptor needs of a partition log; *storage.Log
// implements it, and unit tests substitute fakes.
type partitionLog interface {
	Append(buf []byte, hs []batch.Header) error
	Sync() error
	NextOffset() int64
	StartOffset() int64
	ApplyRetention() (removed int, err error)
	Preallocate() error
	Recover(keepUnsynced bool) error
	RecoverUpTo(limit int64) error
	Abandon(cause error)
}

// sharedLog is a partitionLog that may keep appended bytes by reference
// (storage.Log.AppendShared).
type sharedLog interface {
	AppendShared(buf []byte, hs []batch.Header, sh *storage.Shared) error
}

// Acceptor owns one partition's writes: one goroutine drains its queue.
//
// Goroutine ownership: the run goroutine starts with the first append
// (or with Start, for a log that holds records or failed); it is owned by
// the Acceptor and stops when Close is called, after writing and fsyncing
// every append already queued. Close waits for it. The run goroutine
// starts the sync goroutine (syncLoop), which runs its fsyncs, and stops
// it and waits for it before it returns.
//
// With a WAL, a small append to a partition whose run goroutine is
// waiting (its queue empty) is handled in its stead by the Enqueue
// caller, and the WAL's flusher ends the partition's WAL syncs: see
// runMu. A produce request spread over many partitions then wakes no
// partition goroutine at all.
//
// Lock order: docs/lockorder.md ("acceptor"). Only runMu is held across
// I/O (a write, or a WAL append), and only while the run state is being
// worked on; none is held while blocking on a waiter.
type Acceptor struct {
	// The fields every Enqueue touches come first, beside the run state
	// it works on inline: with thousands of partitions each append then
	// touches few distinct cache lines of its acceptor.

	// runMu guards run, the run state. The run goroutine holds it at all
	// times except while it waits in its select; others take it only
	// with TryLock, never blocking: an Enqueue caller to handle and write
	// its append inline (tryInline), the WAL's flusher to end a WAL sync
	// (walSynced). Whoever holds it may change what the run goroutine's
	// select waits for (a heal timer): it then sends on kick.
	runMu sync.Mutex
	// sendMu guards sendClosed. Append holds it shared while it sends on
	// queue; Close takes it exclusively once, so that after it no append
	// can enter the queue and the run goroutine can drain it for good.
	sendMu     sync.RWMutex
	sendClosed bool
	// queued counts the appends sent to queue and not yet taken from it
	// by the run goroutine under runMu: an inline append waits behind
	// them (it is queued too), so that one caller's appends keep their
	// order.
	queued  atomic.Int64
	failure atomic.Pointer[failure] // why the partition stopped; nil while healthy
	// queue is the channel of queued appends, made when the run
	// goroutine starts (ensureRun). It starts small (initialQueue) and
	// grows up to Config.QueueSize when full (grow), so that thousands of
	// partitions written now and then hold a few slots each. A grown
	// queue's old channel is closed once emptied into the new one: the
	// run goroutine, seeing it closed, loads queue again.
	queue atomic.Pointer[chan *waiter]

	run runState // owned by the run goroutine (see runMu)

	cfg Config
	log partitionLog
	// ch holds the run goroutine's channels, made when it starts
	// (ensureRun): a partition never written makes none.
	ch atomic.Pointer[runChans]
	// behind is set by the WAL (its OnBehind, see runState.tickOnDemand)
	// when it may want this partition's checkpoint, and cleared by the
	// flush tick that looks.
	behind atomic.Bool

	hw atomic.Int64 // high watermark: readers never read at or past it

	mu       sync.Mutex    // guards hwCh, healthCh and stopped
	hwCh     chan struct{} // closed at the next HW advance; nil until HWChanged asks
	healthCh chan struct{} // closed when the partition next fails or heals; nil until HealthChanged asks
	stopped  bool          // the run goroutine has ended; HWChanged and HealthChanged return closed channels

	// running says the run goroutine has started (ensureRun). startMu
	// guards starting it and unstarted, which Close sets when it found
	// the goroutine never started: then nothing starts it.
	running   atomic.Bool
	startMu   sync.Mutex
	unstarted bool

	closeOnce sync.Once
	// leaveSync is set by CloseLeavingSync before stop is closed: the run
	// goroutine's shutdown skips the final log fsync no append waits on.
	leaveSync atomic.Bool
	closeErr  error // set by the run goroutine before done is closed
}

// runChans are the channels of an acceptor whose run goroutine started:
// only an Enqueue starts it, so only then can an append block on a full
// queue (closing), the run goroutine wait (kick, stop) or Close wait for
// it (done).
type runChans struct {
	kick    chan struct{} // (buffered 1) makes the run goroutine look at its state again
	closing chan struct{} // closed first by Close: wakes Appends blocked on a full queue
	stop    chan struct{} // closed by Close after sendMu is closed: the run goroutine drains and exits
	done    chan struct{} // closed by the run goroutine when it returns
}

// waiters holds recycled waiters, shared by every acceptor: with
// thousands of partitions a pool per acceptor would hand each append a
// waiter last touched many appends ago (cold in the cache), while the
// shared pool's per-processor cache hands back one just released.
var waiters = sync.Pool{New: func() any { return &waiter{done: make(chan uint8, 1)} }}

// Start starts the acceptor goroutine for log. The acceptor does not own
// the log: after Close the caller closes the log. Start first syncs the
// log so that everything it already holds is durable and below the high
// watermark; if that fails, the acceptor starts failed (see Err).
func Start(log *storage.Log, cfg Config) *Acceptor { return start(log, cfg) }

func start(log partitionLog, cfg Config) *Acceptor {
	cfg = cfg.withDefaults()
	a := &Acceptor{cfg: cfg, log: log}
	hw := log.NextOffset()
	if err := log.Sync(); err != nil {
		a.failure.Store(&failure{cause: fmt.Errorf("sync at start: %w", err)})
		a.cfg.Metrics.failed()
		// What the log holds may not be durable (a crashed process can
		// leave unsynced bytes in the page cache), so readers see none
		// of it; the partition refuses appends until it heals.
		hw = log.StartOffset()
	}
	a.hw.Store(hw)
	a.run.init(a)
	if f := a.failure.Load(); f != nil {
		a.run.failed = f
		a.run.armHeal()
	}
	if a.failure.Load() != nil || hw != 0 {
		// A log that holds records (retention applies to it) or failed
		// (it heals on a timer) has its run goroutine from the start.
		a.ensureRun()
	}
	return a
}

// ensureRun starts the run goroutine if it has not started. A created
// partition's starts at its first append (Enqueue), so that creating
// thousands of partitions starts no goroutine and no timer and makes no
// channel, and one never written holds none. After Close it starts
// nothing.
func (a *Acceptor) ensureRun() {
	if a.running.Load() {
		return
	}
	a.startMu.Lock()
	defer a.startMu.Unlock()
	if a.running.Load() || a.unstarted {
		return
	}
	q := make(chan *waiter, min(initialQueue, a.cfg.QueueSize))
	a.queue.Store(&q)
	a.ch.Store(&runChans{
		kick:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	})
	a.run.startRun()
	a.running.Store(true)
	go a.loop()
}

// Append queues req and waits until it is written or durable as
// req.Durable asks. A full queue blocks until ctx is done. If ctx ends
// after the append was queued, Append returns ctx.Err() and the append
// may still be written; it returns only once the acceptor no longer uses
// req.Batches.
func (a *Acceptor) Append(ctx context.Context, req *Request) (Result, error) {
	p, err := a.Enqueue(ctx, req)
	if err != nil {
		return Result{}, err
	}
	return p.Wait(ctx)
}

// Pending is an append in the queue. Exactly one Wait must follow every
// successful Enqueue.
type Pending struct {
	a *Acceptor
	w *waiter
}

// Enqueue puts req in the queue and returns without waiting for it to be
// written. Appends enqueued one after another by one goroutine are
// assigned offsets (and run their Checks) in that order, so a caller can
// queue several appends, to one partition or many, and then wait for
// them all: they share group commits. A full queue blocks until ctx is
// done.
func (a *Acceptor) Enqueue(ctx context.Context, req *Request) (Pending, error) {
	if req == nil {
		return Pending{}, fmt.Errorf("%w: nil request", ErrBadRequest)
	}
	if f := a.failure.Load(); f != nil {
		return Pending{}, f
	}
	if err := ctx.Err(); err != nil {
		return Pending{}, err
	}
	a.ensureRun()
	w := waiters.Get().(*waiter)
	w.req, w.durable = req, req.Durable
	w.state.Store(wQueued)

	a.sendMu.RLock()
	if a.sendClosed {
		a.sendMu.RUnlock()
		a.recycle(w)
		return Pending{}, ErrClosed
	}
	if a.tryInline(w) {
		a.sendMu.RUnlock()
		return Pending{a, w}, nil
	}
	a.queued.Add(1)
	for {
		q := a.queue.Load()
		select {
		case *q <- w: // fast path: room in the queue
			a.sendMu.RUnlock()
			return Pending{a, w}, nil
		default:
		}
		if cap(*q) >= a.cfg.QueueSize {
			break // full at its largest: wait for room
		}
		a.sendMu.RUnlock()
		a.grow(q)
		a.sendMu.RLock()
		if a.sendClosed {
			a.queued.Add(-1)
			a.sendMu.RUnlock()
			a.recycle(w)
			return Pending{}, ErrClosed
		}
	}
	select {
	case *a.queue.Load() <- w: // not replaced while full at its largest
		a.sendMu.RUnlock()
	case <-ctx.Done():
		a.queued.Add(-1)
		a.sendMu.RUnlock()
		a.recycle(w)
		return Pending{}, ctx.Err()
	case <-a.ch.Load().closing: // started by Enqueue's ensureRun
		a.queued.Add(-1)
		a.sendMu.RUnlock()
		a.recycle(w)
		return Pending{}, ErrClosed
	}
	return Pending{a, w}, nil
}

// initialQueue is the capacity an acceptor's queue starts with; it
// grows fourfold each time it is found full, up to Config.QueueSize.
const initialQueue = 16

// grow replaces the queue q, found full, with one four times larger
// (at most Config.QueueSize), moving its appends over in their order,
// unless another sender grew it first or the acceptor is closed. The run
// goroutine may take appends from q meanwhile: it takes the moved ones
// from the new queue once it finds q closed, so the order holds.
func (a *Acceptor) grow(q *chan *waiter) {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	if a.sendClosed || a.queue.Load() != q {
		return
	}
	old := *q
	nq := make(chan *waiter, min(4*cap(old), a.cfg.QueueSize))
	for moved := true; moved; {
		select {
		case w := <-old:
			nq <- w
		default:
			moved = false
		}
	}
	a.queue.Store(&nq)
	close(old)
}

// tryInline handles and writes a queued-to-be append on the caller's
// goroutine instead of the run goroutine's, when that costs the run
// goroutine nothing: it is waiting (runMu is free), nothing is queued
// before the append, and the append is small enough to go to the WAL.
// The append's WAL sync then runs asynchronously (startAsync): the WAL's
// flusher releases it. A durable append with Request.SyncInline to a
// partition that fsyncs its own segment is fsynced and released there
// too (appendSyncInline), with or without a WAL. It reports whether it
// took w. The caller holds sendMu shared (the acceptor is not closed).
func (a *Acceptor) tryInline(w *waiter) bool {
	if w.req.NoInline || (a.cfg.WAL == nil && !w.req.SyncInline) || !a.runMu.TryLock() {
		return false
	}
	r := &a.run
	if a.queued.Load() != 0 {
		a.runMu.Unlock()
		return false
	}
	if w.req.SyncInline && r.inlineSyncOK(w) {
		return a.appendSyncInline(w)
	}
	if a.cfg.WAL == nil || !r.inlineOK(len(w.req.Batches)) {
		a.runMu.Unlock()
		return false
	}
	r.cfg.Metrics.inline()
	r.handle(w)
	if r.failed == nil && !r.syncing && r.written > r.synced {
		r.startAsync()
	}
	kick := r.failed != nil // the heal timer was armed: the select must see it
	a.runMu.Unlock()
	if kick {
		a.kickRun()
	}
	return true
}

// appendSyncInline handles a durable append (Request.SyncInline) of a
// partition that fsyncs its own segment (runState.inlineSyncOK) on the
// caller's goroutine, the run goroutine being idle: it writes it and
// fsyncs the segment there, as the run goroutine would inline
// (syncInline), and releases it, so that a lone producer's
// acknowledgement wakes no other goroutine on its way. The run goroutine
// is kicked afterwards only for work it does while idle (zeros ahead, a
// checkpoint, a heal). The caller holds runMu; it is released.
func (a *Acceptor) appendSyncInline(w *waiter) bool {
	r := &a.run
	r.cfg.Metrics.inlineSync()
	r.handle(w)
	if len(r.pending) > 0 && r.failed == nil {
		r.write(r.buf, r.bufHdrs, nil)
	}
	if r.failed == nil && !r.syncing && r.written > r.synced {
		r.syncInline()
	}
	r.skipPrepare()
	kick := r.failed != nil || len(r.pending) > 0 || r.ckptWanted || !r.prepared || r.written > r.synced
	a.runMu.Unlock()
	if kick {
		a.kickRun()
	}
	return true
}

// kickRun makes the run goroutine look at its state again. Before it
// started there is nothing to kick: it looks at its state when it
// starts.
func (a *Acceptor) kickRun() {
	c := a.ch.Load()
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default: // already kicked
	}
}

// Wait waits until the append is written or durable as its request asks,
// or until ctx ends. If ctx ends first, Wait returns ctx.Err() and the
// append may still be written; Wait returns only once the acceptor no
// longer uses the request's Batches.
func (p Pending) Wait(ctx context.Context) (Result, error) {
	if p.w == nil {
		return Result{}, fmt.Errorf("%w: Wait on a Pending that was never enqueued", ErrBadRequest)
	}
	return p.a.await(ctx, p.w)
}

// await waits for a queued append to be released, or for ctx to end.
func (a *Acceptor) await(ctx context.Context, w *waiter) (Result, error) {
	done := ctx.Done()
	if done == nil { // a context that never ends: skip the select
		<-w.done
		return a.finish(w)
	}
	select {
	case <-w.done: // always sigFinal: only an abandoning caller gets sigFreed
		return a.finish(w)
	case <-done:
		return a.abandon(ctx, w)
	}
}

// finish returns a released waiter's outcome and recycles it.
func (a *Acceptor) finish(w *waiter) (Result, error) {
	res, err := w.res, w.err
	a.recycle(w)
	return res, err
}

// abandon gives up on a queued append whose caller's ctx ended. It returns
// without waiting for durability, but not before the acceptor is done with
// req.Batches.
func (a *Acceptor) abandon(ctx context.Context, w *waiter) (Result, error) {
	for {
		switch s := w.state.Load(); s {
		case wQueued:
			if w.state.CompareAndSwap(wQueued, wCancelled) {
				return Result{}, ctx.Err() // the acceptor skips and recycles it
			}
		case wTaken:
			if w.state.CompareAndSwap(wTaken, wAbandonTaken) {
				if <-w.done == sigFinal {
					return a.finish(w)
				}
				return Result{}, ctx.Err() // sigFreed: the acceptor recycles it
			}
		case wWritten:
			if w.state.CompareAndSwap(wWritten, wAbandoned) {
				return Result{}, ctx.Err() // the acceptor recycles it on release
			}
		case wDone:
			<-w.done
			return a.finish(w)
		default:
			panic(fmt.Sprintf("acceptor: waiter in state %d seen by its caller", s))
		}
	}
}

func (a *Acceptor) recycle(w *waiter) {
	w.req, w.res, w.err = nil, Result{}, nil
	waiters.Put(w)
}

// HighWatermark is the durable offset: readers never read at or past it.
// Under FsyncInterval and FsyncNever it follows writes instead.
func (a *Acceptor) HighWatermark() int64 { return a.hw.Load() }

// HWChanged returns a channel closed at the next high-watermark advance,
// or when the acceptor stops. Take the channel before reading
// HighWatermark, so that an advance in between is not missed.
func (a *Acceptor) HWChanged() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hwCh == nil {
		a.hwCh = make(chan struct{})
		if a.stopped {
			close(a.hwCh)
		}
	}
	return a.hwCh
}

// setHW publishes a new high watermark and wakes HWChanged waiters.
func (a *Acceptor) setHW(off int64) {
	if off <= a.hw.Load() {
		return
	}
	a.hw.Store(off)
	a.mu.Lock()
	if a.hwCh != nil {
		close(a.hwCh)
		a.hwCh = nil
	}
	a.mu.Unlock()
	if a.cfg.HWAdvanced != nil {
		a.cfg.HWAdvanced()
	}
}

// HealthChanged returns a channel closed when the partition next fails
// or heals (Err changes), or when the acceptor stops. Take the channel
// before reading Err, so that a change in between is not missed.
func (a *Acceptor) HealthChanged() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.healthCh == nil {
		a.healthCh = make(chan struct{})
		if a.stopped {
			close(a.healthCh)
		}
	}
	return a.healthCh
}

// healthChanged wakes HealthChanged waiters.
func (a *Acceptor) healthChanged() {
	a.mu.Lock()
	if a.healthCh != nil {
		close(a.healthCh)
		a.healthCh = nil
	}
	a.mu.Unlock()
}

// Err is the error that stopped the partition, if any. It matches
// ErrFailed and the cause (errors.Is(err, syscall.ENOSPC)). A failed
// partition tries to heal (see Config.HealBackoff); Err is nil again
// once it has.
func (a *Acceptor) Err() error {
	if f := a.failure.Load(); f != nil {
		return f
	}
	return nil
}

// Close stops the goroutine after writing and fsyncing everything queued
// (under every policy). Appends that have not entered the queue get
// ErrClosed. It returns an error if that last write or fsync failed; a
// failure reported earlier through Err is not returned again. Idempotent.
func (a *Acceptor) Close() error { return a.close(false) }

// CloseLeavingSync is Close, except that the last fsync of the log is
// left to the caller when no append waits on it (everything acknowledged
// is durable already, in the log or the WAL): the caller then makes the
// log durable itself (storage.CloseAll, one filesystem sync for many
// partitions), and before that must not rely on it, in particular not
// retire the WAL that holds its acknowledged appends. Appends waiting
// for an fsync still get it.
func (a *Acceptor) CloseLeavingSync() error { return a.close(true) }

func (a *Acceptor) close(leaveSync bool) error {
	a.closeOnce.Do(func() {
		a.leaveSync.Store(leaveSync)
		// startMu first: with it held no run goroutine starts, so c says
		// for good whether one did.
		a.startMu.Lock()
		c := a.ch.Load()
		if c != nil {
			close(c.closing)
		}
		a.sendMu.Lock()
		a.sendClosed = true
		a.sendMu.Unlock()
		if c == nil {
			// Never appended to: nothing is queued, written or owed an
			// fsync, so there is no goroutine to stop.
			a.unstarted = true
			a.startMu.Unlock()
			a.markStopped() // as the run goroutine's shutdown would
			return
		}
		a.startMu.Unlock()
		close(c.stop)
	})
	if c := a.ch.Load(); c != nil {
		<-c.done
	}
	return a.closeErr
}

// markStopped records that the acceptor takes no more appends and wakes
// HWChanged and HealthChanged waiters for good.
func (a *Acceptor) markStopped() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	if a.hwCh != nil {
		close(a.hwCh)
		a.hwCh = nil
	}
	if a.healthCh != nil {
		close(a.healthCh)
		a.healthCh = nil
	}
}

// ForgetWAL tells the WAL, after Close, that the partition's log is
// gone (its topic was deleted): none of its entries are needed any more,
// so they hold back no WAL segment.
func (a *Acceptor) ForgetWAL() {
	if f, ok := a.cfg.WAL.(interface{ Forget() }); ok {
		f.Forget()
	}
}
