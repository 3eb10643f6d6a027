package producer

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// BatchProducer writes inputs of type I to one topic partition in batches
// and returns each input's status of type S. It is safe for use by many
// goroutines at once. Build one with New or NewRecordProducer.
type BatchProducer[I, S any] struct {
	p producerImpl[I, S]
}

// producerImpl hides the aggregator's tag type from BatchProducer's type.
type producerImpl[I, S any] interface {
	produce(ctx context.Context, in I) (S, error)
	flush(ctx context.Context) error
	close(ctx context.Context) error
}

// New returns a producer that aggregates inputs with agg and writes the
// batches to the sink set by WithSink. The producer owns agg from now on:
// nothing else may call it.
func New[I, T, S any](agg Aggregator[I, T, S], opts ...Opt) (*BatchProducer[I, S], error) {
	if agg == nil {
		return nil, errors.New("producer: nil aggregator")
	}
	c := defaultCfg()
	for _, o := range opts {
		o.apply(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &BatchProducer[I, S]{p: newEngine(agg, c)}, nil
}

// NewRecordProducer returns a producer of Records whose status is each
// record's offset, using a RecordAggregator limited to MaxBatchBytes.
func NewRecordProducer(opts ...Opt) (*BatchProducer[Record, int64], error) {
	c := defaultCfg()
	for _, o := range opts {
		o.apply(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return New[Record, int, int64](NewRecordAggregator(c.maxBatchBytes), opts...)
}

// Produce adds input to the current batch and waits until that batch has
// been written, then returns the input's status.
//
// The first caller of a batch lingers (see Linger and AdaptiveLinger) and
// then flushes it; the others only wait for the batch's result. The write
// itself runs in a background goroutine while the next batch fills.
//
// If ctx is done first, Produce returns at once with an error wrapping
// ctx.Err(). If the input had already been added to a batch, that batch is
// still written, so the input may be produced even though Produce returned
// an error; if it had not (ctx was done on entry, or while waiting for an
// in-flight slot to flush a full batch), it is not produced.
//
// Errors: ErrClosed after Close; ErrTooLarge for an input that fits in no
// batch; *AggregatorError when the aggregator failed or panicked for this
// input or its batch; *SinkError when the batch could not be written.
func (p *BatchProducer[I, S]) Produce(ctx context.Context, input I) (S, error) {
	return p.p.produce(ctx, input)
}

// Flush flushes the current batch without waiting for its linger, then
// waits until every batch flushed before it returns has been written. It
// waits for the batches, not for their success: a failed batch is reported
// to its own Produce callers, not by Flush. It returns ctx's error if ctx is
// done first; the batches are still written.
func (p *BatchProducer[I, S]) Flush(ctx context.Context) error { return p.p.flush(ctx) }

// Close stops accepting input (Produce then returns ErrClosed), flushes the
// current batch and waits for every in-flight batch. If ctx is done first,
// Close fails the batch not yet handed to the sink with ErrClosed, cancels
// the context of in-flight sink calls, waits for them to return, and
// returns ctx's error. Close is idempotent; later calls only wait.
func (p *BatchProducer[I, S]) Close(ctx context.Context) error { return p.p.close(ctx) }

// engine is the producer proper. It is generic over the aggregator's tag
// type T, which BatchProducer hides.
//
// Goroutines: engine starts one goroutine per flushed batch (send), which
// writes the batch to the sink and stops when the sink returns, unless the
// batch's lingering caller, whose context is never done, writes it itself
// (see linger); and one per
// abandoned linger (lingerFor), started when the lingering caller's context
// is done before its batch was flushed, which stops once the batch is
// sealed. The engine owns both; wg counts them and Close waits for them.
//
// Locks (docs/lockorder.md, "producer"): engine.mu is the only lock
// held while calling out (to the aggregator). The encoder's mutex is taken only by sinks, without mu.
type engine[I, T, S any] struct {
	cfg   cfg
	slots chan struct{} // in-flight slots (MaxInFlight); nil when unbounded

	// active counts the callers inside produce, and curN mirrors cur.n
	// (written under mu), for AdaptiveLinger: a caller that leaves checks
	// whether everyone left inside has joined the current batch.
	active atomic.Int64
	curN   atomic.Int64
	// flightN mirrors the number of inputs in batches handed to a send
	// goroutine and not yet finished (written under mu): their callers
	// cannot join the current batch until their write is done (with
	// MaxInFlight, see joinedLocked), and a lingerer past its Linger waits
	// for them while there are any (lingerMore).
	flightN atomic.Int64

	// sendCtx is the context of every sink call; cancelSend cancels it when
	// Close gives up waiting, or once Close is done.
	sendCtx    context.Context
	cancelSend context.CancelFunc

	wg sync.WaitGroup // counts send and lingerFor goroutines; Add only under mu with closed unset or the batch current

	mu       sync.Mutex // guards agg and every field below, and batch.n
	agg      Aggregator[I, T, S]
	reuse    *RecordAggregator         // agg, when it is a plain RecordAggregator; else nil
	cur      *batch[T, S]              // the batch being filled; never nil
	inflight map[*batch[T, S]]struct{} // sealed batches handed to a send and not yet finished
	closed   bool                      // set by close; produce then refuses input
}

// batch is one batch's shared state: the callers whose inputs are in it
// wait on done and then read the result fields, which are written once,
// before done is closed, and never again, so readers need no lock.
type batch[T, S any] struct {
	n      int           // inputs pushed; guarded by engine.mu
	sealed chan struct{} // closed, under engine.mu, when the batch stops being engine.cur
	wake   chan struct{} // capacity 1: tells the lingerer every active caller has joined
	done   chan struct{} // closed once the result fields below are set

	offsets []int64                  // each record's offset
	deagg   StatusDeaggregator[T, S] // from the aggregator's Flush
	err     error                    // fails every input of the batch
}

func newBatch[T, S any]() *batch[T, S] {
	return &batch[T, S]{
		sealed: make(chan struct{}),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// wakeLingerer ends the batch's linger early; it never blocks.
func (b *batch[T, S]) wakeLingerer() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// finish publishes the batch's result to every waiter.
func (b *batch[T, S]) finish(offsets []int64, deagg StatusDeaggregator[T, S], err error) {
	b.offsets, b.deagg, b.err = offsets, deagg, err
	close(b.done)
}

func newEngine[I, T, S any](agg Aggregator[I, T, S], c cfg) *engine[I, T, S] {
	e := &engine[I, T, S]{
		cfg:      c,
		agg:      agg,
		cur:      newBatch[T, S](),
		inflight: make(map[*batch[T, S]]struct{}),
	}
	// Only the plain RecordAggregator gets its records back: its
	// deaggregator reads offsets only, while an aggregator that wraps it
	// may keep the records for its own deaggregator. And only when the
	// sink is known to keep none of them once Produce returns (the
	// KafkaSink): a user's Sink may hold on to b.Records.
	if _, ok := c.sink.(recordsNotKept); ok {
		e.reuse, _ = any(agg).(*RecordAggregator)
	}
	if c.maxInFlight > 0 {
		e.slots = make(chan struct{}, c.maxInFlight)
	}
	e.sendCtx, e.cancelSend = context.WithCancel(context.Background())
	return e
}

func (e *engine[I, T, S]) produce(ctx context.Context, in I) (S, error) {
	var zero S
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("producer: input not produced: %w", err)
	}
	e.active.Add(1)
	defer e.leave()
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return zero, ErrClosed
		}
		b := e.cur
		tag, err := e.pushLocked(in)
		if err == nil {
			b.n++
			e.curN.Store(int64(b.n))
			everyone := e.cfg.adaptive && e.joinedLocked(b)
			if b.n == 1 {
				e.mu.Unlock()
				e.linger(ctx, b, everyone)
			} else {
				if everyone {
					b.wakeLingerer()
				}
				e.mu.Unlock()
			}
			return e.wait(ctx, b, tag)
		}
		empty := b.n == 0
		e.mu.Unlock()
		var pe *PanicError
		if !errors.Is(err, ErrNoCapacity) || errors.As(err, &pe) {
			return zero, err
		}
		if empty {
			return zero, fmt.Errorf("producer: the aggregator has no capacity for the input even in an empty batch: %w", ErrTooLarge)
		}
		// The batch is full: flush it, then push again into the next one.
		if err := e.flushBatch(ctx, b, false); err != nil {
			return zero, fmt.Errorf("producer: input not produced, waiting to flush a full batch: %w", err)
		}
	}
}

// leave marks a caller leaving produce. With AdaptiveLinger, if every
// caller still inside has joined the current batch, nobody else can join it,
// so its lingerer is woken. The atomics keep the common case lock-free: the
// pusher stores curN before loading active and the leaver decrements active
// before loading curN, so at least one of them sees the other's update.
func (e *engine[I, T, S]) leave() {
	a := e.active.Add(-1)
	if !e.cfg.adaptive || a <= 0 {
		return
	}
	// A cheap superset of joinedLocked's condition, read without the lock.
	n, f := e.curN.Load(), e.flightN.Load()
	if n == 0 || n < a && (a < splitCallers || 2*n < a) && (e.slots == nil || n < a-f) {
		return
	}
	e.mu.Lock()
	if b := e.cur; b.n > 0 && e.joinedLocked(b) {
		b.wakeLingerer()
	}
	e.mu.Unlock()
}

// splitCallers is how many callers inside Produce make adaptive linger
// split them into two batches in flight at once (see joinedLocked).
// At 4096 callers the split raised throughput and lowered the client's CPU
// per input; at 256 it halved the records per write for more CPU per input,
// so smaller crowds keep one batch per write.
const splitCallers = 1024

// joinedLocked reports whether adaptive linger ends b's linger now: when
// every caller inside Produce has its input in b; when at least splitCallers
// callers are inside, b holds at least half of them, and either no batch is
// in flight or every caller not waiting on one has joined b; or when every
// in-flight slot (MaxInFlight) is taken and every caller not waiting on a
// batch in flight has its input in b.
//
// The second case keeps a crowd of callers in two halves that take turns:
// one half's batch is being written while the other half's fills, instead
// of every caller waiting for one write and then for the whole crowd to
// be woken and to push again before the next write starts. In the third
// case b is flushed as soon as a slot is free: the callers left out are
// waiting for their batches, and waiting out the linger as well would only
// add to their next call's latency.
func (e *engine[I, T, S]) joinedLocked(b *batch[T, S]) bool {
	n, a, f := int64(b.n), e.active.Load(), e.flightN.Load()
	if n >= a {
		return true
	}
	if a >= splitCallers && 2*n >= a && (f == 0 || n >= a-f) {
		return true
	}
	return e.slots != nil && len(e.inflight) >= cap(e.slots) && n >= a-f
}

// pushLocked pushes in into the aggregator, turning a panic into an error.
func (e *engine[I, T, S]) pushLocked(in I) (tag T, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &AggregatorError{Op: "push", Err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	tag, err = e.agg.TryPush(in)
	if err != nil {
		err = &AggregatorError{Op: "push", Err: err}
	}
	return tag, err
}

// flushAggLocked flushes the aggregator, turning a panic into an error.
func (e *engine[I, T, S]) flushAggLocked() (recs []Record, deagg StatusDeaggregator[T, S], err error) {
	defer func() {
		if v := recover(); v != nil {
			recs, deagg = nil, nil
			err = &AggregatorError{Op: "flush", Err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	recs, deagg, err = e.agg.Flush()
	if err == nil && deagg == nil {
		err = errors.New("returned a nil StatusDeaggregator")
	}
	if err != nil {
		return nil, nil, &AggregatorError{Op: "flush", Err: err}
	}
	return recs, deagg, nil
}

// linger is run by the first caller of b: it waits for the linger to pass
// (or for every active caller to join, or for b to be sealed by someone
// else) and then flushes b. If ctx is done first, a goroutine takes over.
func (e *engine[I, T, S]) linger(ctx context.Context, b *batch[T, S], now bool) {
	if !now && e.cfg.linger > 0 {
		deadline := time.Now().Add(e.cfg.linger)
		t := time.NewTimer(e.cfg.linger)
		select {
		case <-t.C:
			if !e.lingerMore(ctx, b) {
				return
			}
		case <-b.wake:
			t.Stop()
		case <-b.sealed:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			e.handOff(b, deadline)
			return
		}
	}
	// A caller whose context is never done writes its own batch: it waits
	// for the result anyway, and saves handing the write to a goroutine
	// and being woken by it (most of what a lone caller pays on top of
	// the round trip). One whose context may end returns at once when it
	// does, so a goroutine writes.
	if err := e.flushBatch(ctx, b, ctx.Done() == nil); err != nil {
		e.handOff(b, time.Time{})
	}
}

// lingerMore is called by b's lingerer once the Linger has passed. With
// AdaptiveLinger and inputs of earlier batches in flight, those batches'
// callers are about to come back: b keeps filling until they have, that
// is until every caller inside Produce has joined b (see leave), instead of
// leaving now and making them start a batch of their own. Under thousands
// of callers whose writes take longer than the Linger, leaving at the
// Linger splits the callers into batches that each wait out the timer in
// turn, with half the records per write. It waits only when the inputs in
// flight are at least half as many as b holds. It reports whether b is still
// the lingerer's to flush: false when b was sealed by someone else or ctx
// was done (a goroutine then flushes b at once).
func (e *engine[I, T, S]) lingerMore(ctx context.Context, b *batch[T, S]) bool {
	// Waiting pays when the callers in flight would add at least half
	// as many inputs again; not for, say, the lone first input of a burst
	// whose write is slowed by the burst itself.
	if !e.cfg.adaptive || 2*e.flightN.Load() < e.curN.Load() {
		return true
	}
	select {
	case <-b.wake: // a wake sent while the timer fired is still buffered
	case <-b.sealed:
		return false
	case <-ctx.Done():
		e.handOff(b, time.Time{})
		return false
	}
	return true
}

// handOff starts a goroutine that lingers until deadline and flushes b in
// place of a caller that gave up, unless b is no longer being filled.
func (e *engine[I, T, S]) handOff(b *batch[T, S], deadline time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur != b {
		return // already sealed: its result comes from its send
	}
	e.wg.Add(1)
	go e.lingerFor(b, deadline)
}

func (e *engine[I, T, S]) lingerFor(b *batch[T, S], deadline time.Time) {
	defer e.wg.Done()
	if d := time.Until(deadline); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-b.wake:
			t.Stop()
		case <-b.sealed:
			t.Stop()
			return
		}
	}
	// sendCtx is canceled only when Close gives up, and Close then fails
	// b itself; nothing is left to do if flushBatch fails.
	_ = e.flushBatch(e.sendCtx, b, true) // this goroutine has nothing else to do
}

// flushBatch waits, with ctx, for an in-flight slot, then seals b and
// writes it if b is still the batch being filled: in this goroutine when
// inline is set (flushBatch then returns once the write is done), else in
// a send goroutine. It returns nil once b is sealed, by this call or
// another, and ctx's error if ctx is done first.
func (e *engine[I, T, S]) flushBatch(ctx context.Context, b *batch[T, S], inline bool) error {
	if e.slots != nil {
		select {
		case e.slots <- struct{}{}:
		case <-b.sealed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.mu.Lock()
	if e.cur != b || b.n == 0 {
		e.mu.Unlock()
		e.release()
		return nil
	}
	recs, deagg, ok := e.sealLocked(b)
	e.mu.Unlock()
	if ok {
		if inline {
			e.send(b, recs, deagg)
		} else {
			go e.send(b, recs, deagg)
		}
	}
	return nil
}

// sealLocked replaces b, the current batch, with a new one and flushes the
// aggregator. When that succeeds it lists b in flight and returns its
// records for the caller to send (e.wg counts that send, which owns the
// in-flight slot the caller took); otherwise it fails b and returns false.
func (e *engine[I, T, S]) sealLocked(b *batch[T, S]) ([]Record, StatusDeaggregator[T, S], bool) {
	e.cur = newBatch[T, S]()
	e.curN.Store(0)
	close(b.sealed)
	recs, deagg, err := e.flushAggLocked()
	if err != nil {
		e.release()
		b.finish(nil, nil, err)
		return nil, nil, false
	}
	e.inflight[b] = struct{}{}
	e.flightN.Add(int64(b.n))
	e.wg.Add(1)
	return recs, deagg, true
}

func (e *engine[I, T, S]) release() {
	if e.slots != nil {
		<-e.slots
	}
}

// send writes one batch to the sink and publishes its result.
func (e *engine[I, T, S]) send(b *batch[T, S], recs []Record, deagg StatusDeaggregator[T, S]) {
	defer e.wg.Done()
	var offsets []int64
	var err error
	if len(recs) > 0 {
		offsets, err = e.callSink(recs)
	}
	// Its callers stop counting as in flight before they are woken, so that
	// one rejoining is never counted twice; the batch stays listed for
	// Flush until its result is published.
	e.mu.Lock()
	e.flightN.Add(-int64(b.n))
	e.mu.Unlock()
	e.release()
	b.finish(offsets, deagg, err)
	e.mu.Lock()
	delete(e.inflight, b)
	if e.reuse != nil {
		e.reuse.recycle(recs) // the sink has returned: it is done with them
	}
	e.mu.Unlock()
}

// callSink writes recs to the sink, turning a panic or a short result into
// a SinkError.
func (e *engine[I, T, S]) callSink(recs []Record) (offsets []int64, err error) {
	defer func() {
		if v := recover(); v != nil {
			offsets, err = nil, &SinkError{Records: len(recs), Err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	offsets, err = e.cfg.sink.Produce(e.sendCtx, Batch{Records: recs, Compression: e.cfg.compression})
	if err == nil && len(offsets) != len(recs) {
		err = fmt.Errorf("sink returned %d offsets for %d records", len(offsets), len(recs))
	}
	if err != nil {
		return nil, &SinkError{Records: len(recs), Err: err}
	}
	return offsets, nil
}

// wait waits for b's result and returns the status of the input tagged tag.
func (e *engine[I, T, S]) wait(ctx context.Context, b *batch[T, S], tag T) (s S, err error) {
	if cancel := ctx.Done(); cancel == nil {
		<-b.done // a context that is never done: a plain receive parks cheaper than a select
	} else {
		select {
		case <-b.done:
		case <-cancel:
			return s, fmt.Errorf("producer: stopped waiting; the input may still be produced: %w", ctx.Err())
		}
	}
	if b.err != nil {
		return s, b.err
	}
	defer func() {
		if v := recover(); v != nil {
			err = &AggregatorError{Op: "deaggregate", Err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
	}()
	s, err = b.deagg.Deaggregate(b.offsets, tag)
	if err != nil {
		return s, &AggregatorError{Op: "deaggregate", Err: err}
	}
	return s, nil
}

func (e *engine[I, T, S]) flush(ctx context.Context) error {
	e.mu.Lock()
	b := e.cur
	pending := b.n > 0
	e.mu.Unlock()
	if pending {
		if err := e.flushBatch(ctx, b, false); err != nil {
			return err
		}
	}
	e.mu.Lock()
	waits := make([]<-chan struct{}, 0, len(e.inflight))
	for x := range e.inflight {
		waits = append(waits, x.done)
	}
	e.mu.Unlock()
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (e *engine[I, T, S]) close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	err := e.flush(ctx)
	if err != nil {
		e.cancelSend()
		e.mu.Lock()
		if b := e.cur; b.n > 0 {
			e.cur = newBatch[T, S]()
			e.curN.Store(0)
			close(b.sealed)
			_, _, _ = e.flushAggLocked() // empty the aggregator; these inputs are failed
			b.finish(nil, nil, fmt.Errorf("producer: batch dropped because Close gave up waiting: %w", ErrClosed))
		}
		e.mu.Unlock()
	}
	e.wg.Wait()
	e.cancelSend()
	return err
}
