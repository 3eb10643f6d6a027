package producer

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const forever = time.Hour // a linger no test waits out

func TestOptionsValidate(t *testing.T) {
	sink := newFakeSink(false)
	cases := []struct {
		name string
		opts []Opt
		want string
	}{
		{"no sink", nil, "no sink"},
		{"negative linger", []Opt{WithSink(sink), Linger(-1)}, "negative linger"},
		{"tiny batches", []Opt{WithSink(sink), MaxBatchBytes(10)}, "MaxBatchBytes"},
		{"negative in-flight", []Opt{WithSink(sink), MaxInFlight(-2)}, "MaxInFlight"},
		{"ok", []Opt{WithSink(sink), Linger(0), MaxInFlight(3)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewRecordProducer(c.opts...)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an error about %q", err, c.want)
			}
		})
	}
}

// A lingering batch is flushed by its linger timer alone.
func TestLingerFlushes(t *testing.T) {
	sink := newFakeSink(false)
	p := mustNew(t, NewRecordAggregator(DefaultMaxBatchBytes), WithSink(sink), Linger(2*time.Millisecond), AdaptiveLinger(false))
	for i, v := range vals("a", 3) {
		r := get(t, produceAsync(context.Background(), p, v))
		checkOffset(t, sink, r)
		if r.off != int64(i) {
			t.Fatalf("offset %d, want %d", r.off, i)
		}
	}
}

// With AdaptiveLinger, a lone caller is not held by the linger, and callers
// that arrive together all get through without waiting it out.
func TestAdaptiveLinger(t *testing.T) {
	sink := newFakeSink(false)
	p := mustNew(t, NewRecordAggregator(DefaultMaxBatchBytes), WithSink(sink), Linger(forever))
	for _, v := range vals("lone", 5) {
		checkOffset(t, sink, get(t, produceAsync(context.Background(), p, v)))
	}
	_, batches := sink.snapshot()
	for _, n := range batches {
		if n != 1 {
			t.Fatalf("a lone caller's batches hold %v records, want 1 each", batches)
		}
	}
	// Callers arriving and leaving at random: every batch's lingerer is
	// woken once everyone inside has joined, so none waits the hour.
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, v := range vals(fmt.Sprintf("g%d", g), 20) {
				off, err := p.Produce(context.Background(), Record{Value: []byte(v)})
				checkOffset(t, sink, result{v, off, err})
			}
		}()
	}
	wg.Wait()
}

// With MaxInFlight(2) and AdaptiveLinger, once both in-flight slots are taken and every caller not waiting on them has joined the
// current batch, that batch stops lingering: it is written as soon as a slot
// is free, while the other write is still in flight.
func TestLingerEndsWhenSlotsAreBusy(t *testing.T) {
	sink := newFakeSink(true)
	agg := newHookAggregator(DefaultMaxBatchBytes)
	p := mustNew(t, agg, WithSink(sink), Linger(forever), MaxInFlight(2))

	a := produceAsync(context.Background(), p, "a")
	callA := sink.next(t) // a lone caller is written at once
	b := produceAsync(context.Background(), p, "b")
	waitFor(t, "b pushed", func() bool { return agg.accepted.Load() == 2 })
	// b lingers: a's caller may still join its batch. Flush sends it into
	// the second slot.
	flushed := make(chan error, 1)
	go func() { flushed <- p.Flush(context.Background()) }()
	callB := sink.next(t)
	if n := len(callB.batch.Records); n != 1 {
		t.Fatalf("b's batch has %d records, want 1", n)
	}

	c := produceAsync(context.Background(), p, "c")
	d := produceAsync(context.Background(), p, "d")
	waitFor(t, "c and d pushed", func() bool { return agg.accepted.Load() == 4 })
	sink.noCall(t) // both slots are taken

	callA.reply <- nil
	checkOffset(t, sink, get(t, a))
	callCD := sink.next(t) // not after the hour's linger, nor after b's write
	var got []string
	for _, r := range callCD.batch.Records {
		got = append(got, string(r.Value))
	}
	slices.Sort(got) // c and d push in either order
	if fmt.Sprint(got) != "[c d]" {
		t.Fatalf("third batch %v, want [c d]", got)
	}
	callB.reply <- nil
	callCD.reply <- nil
	for _, ch := range []<-chan result{b, c, d} {
		checkOffset(t, sink, get(t, ch))
	}
	if err := <-flushed; err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if m := sink.maxInside.Load(); m != 2 {
		t.Fatalf("%d writes ran at once, want the limit 2", m)
	}
}

// A full batch is flushed without waiting for its linger, and a batch never
// exceeds MaxBatchBytes.
func TestSizeTriggeredFlush(t *testing.T) {
	const perBatch = 4
	one := encodedRecordSize(&Record{Value: []byte("v-00")}, 0, 0)
	max := recordBatchHeaderSize + perBatch*one
	agg := newHookAggregator(max)
	agg.now = func() time.Time { return time.UnixMilli(1000) }
	sink := newFakeSink(false)
	p := mustNew(t, agg, WithSink(sink), Linger(forever), AdaptiveLinger(false))

	var chans []<-chan result
	for i := 0; i < 3*perBatch; i++ {
		chans = append(chans, produceAsync(context.Background(), p, fmt.Sprintf("v-%02d", i)))
	}
	// Two batches overflow and are flushed by size; the third is full but
	// nothing overflows it, so it lingers until Flush.
	waitFor(t, "two size-triggered batches", func() bool { _, b := sink.snapshot(); return len(b) == 2 })
	// Several callers may find a batch full before one of them flushes
	// it, so count the records accepted, not the pushes tried.
	waitFor(t, "all records pushed", func() bool { return agg.accepted.Load() == 3*perBatch })
	if _, b := sink.snapshot(); len(b) != 2 {
		t.Fatalf("batches before Flush: %v", b)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, ch := range chans {
		checkOffset(t, sink, get(t, ch))
	}
	_, batches := sink.snapshot()
	if fmt.Sprint(batches) != "[4 4 4]" {
		t.Fatalf("batches %v, want [4 4 4]", batches)
	}
	// Each batch, encoded, fits the limit exactly.
	log, _ := sink.snapshot()
	var enc encoder
	for i := 0; i < 3; i++ {
		raw, err := enc.encode(nil, log[i*perBatch:(i+1)*perBatch], kgo.NoCompression(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) != max {
			t.Fatalf("batch %d encodes to %d bytes, limit %d", i, len(raw), max)
		}
	}
}

// Flush during a linger sends the lingering batch at once; a Flush during
// an in-flight write waits for that write and every other in flight.
func TestManualFlush(t *testing.T) {
	sink := newFakeSink(true)
	agg := newHookAggregator(DefaultMaxBatchBytes)
	p := mustNew(t, agg, WithSink(sink), Linger(forever), AdaptiveLinger(false))

	a := produceAsync(context.Background(), p, "a")
	b := produceAsync(context.Background(), p, "b")
	waitFor(t, "two pushes", func() bool { return agg.pushes.Load() == 2 })
	sink.noCall(t)

	flushed1 := make(chan error, 1)
	go func() { flushed1 <- p.Flush(context.Background()) }()
	call1 := sink.next(t) // the lingering batch, sent by Flush
	if len(call1.batch.Records) != 2 {
		t.Fatalf("first batch has %d records, want 2", len(call1.batch.Records))
	}

	c := produceAsync(context.Background(), p, "c") // fills the next batch meanwhile
	waitFor(t, "third push", func() bool { return agg.pushes.Load() == 3 })
	flushed2 := make(chan error, 1)
	go func() { flushed2 <- p.Flush(context.Background()) }()
	call2 := sink.next(t)
	if len(call2.batch.Records) != 1 {
		t.Fatalf("second batch has %d records, want 1", len(call2.batch.Records))
	}

	// Finish the second write first: its caller returns, but no Flush can,
	// since both wait for the first batch too.
	call2.reply <- nil
	checkOffset(t, sink, get(t, c))
	select {
	case err := <-flushed1:
		t.Fatalf("Flush returned (%v) with a batch still in flight", err)
	case err := <-flushed2:
		t.Fatalf("Flush returned (%v) with a batch still in flight", err)
	default:
	}
	call1.reply <- nil
	for _, ch := range []<-chan error{flushed1, flushed2} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	ra, rb := get(t, a), get(t, b)
	checkOffset(t, sink, ra)
	checkOffset(t, sink, rb)
	if ra.off == rb.off {
		t.Fatalf("a and b share offset %d", ra.off)
	}
}

// Many goroutines produce at once: each gets its own record's offset.
func TestManyConcurrentCallers(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Opt
	}{
		{"default", nil},
		{"no linger", []Opt{Linger(0)}},
		{"fixed linger", []Opt{Linger(200 * time.Microsecond), AdaptiveLinger(false)}},
		{"one in flight", []Opt{MaxInFlight(1)}},
		{"small batches", []Opt{MaxBatchBytes(300), MaxInFlight(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink := newFakeSink(false)
			p := mustNew(t, NewRecordAggregator(300), append([]Opt{WithSink(sink)}, c.opts...)...)
			const goroutines, each = 32, 40
			seen := make(chan result, goroutines*each)
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, v := range vals(fmt.Sprintf("g%d", g), each) {
						off, err := p.Produce(context.Background(), Record{Value: []byte(v)})
						seen <- result{v, off, err}
					}
				}()
			}
			wg.Wait()
			close(seen)
			log, _ := sink.snapshot()
			offs := make(map[int64]string)
			for r := range seen {
				if r.err != nil {
					t.Fatalf("Produce(%q): %v", r.val, r.err)
				}
				if r.off < 0 || r.off >= int64(len(log)) || string(log[r.off].Value) != r.val {
					t.Fatalf("Produce(%q) returned offset %d, which does not hold it", r.val, r.off)
				}
				if prev, dup := offs[r.off]; dup {
					t.Fatalf("%q and %q both got offset %d", prev, r.val, r.off)
				}
				offs[r.off] = r.val
			}
			if len(log) != goroutines*each || len(offs) != len(log) {
				t.Fatalf("log has %d records, %d distinct offsets, want %d", len(log), len(offs), goroutines*each)
			}
			if max := sink.maxInside.Load(); c.name == "one in flight" && max != 1 {
				t.Fatalf("%d sink calls ran at once with MaxInFlight(1)", max)
			}
		})
	}
}

// A panic or error in the aggregator or the sink fails only the inputs it
// touches; inputs after it succeed.
func TestFailuresAreContained(t *testing.T) {
	boom := errors.New("boom")
	hasBad := func(recs []Record) bool {
		for _, r := range recs {
			if string(r.Value) == "bad" {
				return true
			}
		}
		return false
	}
	cases := []struct {
		name      string
		setup     func(a *hookAggregator, s *fakeSink)
		allFail   bool   // the good inputs of the bad input's batch fail too
		op        string // AggregatorError.Op, or "" for a SinkError
		wantPanic bool
	}{
		{"panic in push", func(a *hookAggregator, s *fakeSink) {
			a.onPush = func(r Record) {
				if string(r.Value) == "bad" {
					panic("push")
				}
			}
		}, false, "push", true},
		{"panic in flush", func(a *hookAggregator, s *fakeSink) {
			a.onFlush = func(recs []Record) {
				if hasBad(recs) {
					panic(boom)
				}
			}
		}, true, "flush", true},
		{"error from flush", func(a *hookAggregator, s *fakeSink) {
			a.flushErr = func(recs []Record) error {
				if hasBad(recs) {
					return boom
				}
				return nil
			}
		}, true, "flush", false},
		{"panic in deaggregate", func(a *hookAggregator, s *fakeSink) {
			a.onDeagg = func(r Record) {
				if string(r.Value) == "bad" {
					panic("deaggregate")
				}
			}
		}, false, "deaggregate", true},
		{"panic in sink", func(a *hookAggregator, s *fakeSink) {
			s.hook = func(b Batch) error {
				if hasBad(b.Records) {
					panic(boom)
				}
				return nil
			}
		}, true, "", true},
		{"error from sink", func(a *hookAggregator, s *fakeSink) {
			s.hook = func(b Batch) error {
				if hasBad(b.Records) {
					return boom
				}
				return nil
			}
		}, true, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			agg := newHookAggregator(DefaultMaxBatchBytes)
			sink := newFakeSink(false)
			c.setup(agg, sink)
			p := mustNew(t, agg, WithSink(sink), Linger(forever), AdaptiveLinger(false))

			// good1, bad and good2 share one batch.
			chans := []<-chan result{
				produceAsync(context.Background(), p, "good1"),
				produceAsync(context.Background(), p, "bad"),
				produceAsync(context.Background(), p, "good2"),
			}
			waitFor(t, "three pushes", func() bool { return agg.pushes.Load() == 3 })
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, ch := range chans {
				r := get(t, ch)
				fails := r.val == "bad" || c.allFail
				if !fails {
					checkOffset(t, sink, r)
					continue
				}
				if r.err == nil {
					t.Fatalf("%s succeeded at offset %d, want a failure", r.val, r.off)
				}
				if c.op != "" {
					var ae *AggregatorError
					if !errors.As(r.err, &ae) || ae.Op != c.op {
						t.Fatalf("%s: error %v, want an AggregatorError from %s", r.val, r.err, c.op)
					}
				} else {
					var se *SinkError
					if !errors.As(r.err, &se) || se.Records != 3 {
						t.Fatalf("%s: error %v, want a SinkError for 3 records", r.val, r.err)
					}
				}
				var pe *PanicError
				if got := errors.As(r.err, &pe); got != c.wantPanic {
					t.Fatalf("%s: PanicError found = %v, want %v (%v)", r.val, got, c.wantPanic, r.err)
				}
				if !c.wantPanic && !errors.Is(r.err, boom) {
					t.Fatalf("%s: error %v does not wrap the cause", r.val, r.err)
				}
			}
			// Later inputs go through, at their true offsets.
			later := produceAsync(context.Background(), p, "later")
			waitFor(t, "fourth push", func() bool { return agg.pushes.Load() == 4 })
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkOffset(t, sink, get(t, later))
			log, _ := sink.snapshot()
			for _, r := range log {
				if string(r.Value) == "bad" && c.op != "deaggregate" {
					t.Fatalf("the failed input was written")
				}
			}
		})
	}
}

// A sink that returns too few offsets fails its batch.
func TestSinkShortResult(t *testing.T) {
	p, err := NewRecordProducer(WithSink(shortSink{}), Linger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	_, err = p.Produce(context.Background(), Record{Value: []byte("x")})
	var se *SinkError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "0 offsets for 1 records") {
		t.Fatalf("Produce = %v, want a SinkError about the short result", err)
	}
}

type shortSink struct{}

func (shortSink) Produce(context.Context, Batch) ([]int64, error) { return nil, nil }

func TestContextCancel(t *testing.T) {
	t.Run("before entry", func(t *testing.T) {
		sink := newFakeSink(false)
		p := mustNew(t, NewRecordAggregator(DefaultMaxBatchBytes), WithSink(sink))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := p.Produce(ctx, Record{Value: []byte("x")}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Produce = %v, want context.Canceled", err)
		}
		p.Flush(context.Background())
		if log, _ := sink.snapshot(); len(log) != 0 {
			t.Fatalf("a canceled input was written")
		}
	})

	// One caller leaves while both inputs are in a batch that lingers
	// (the lingerer, or the caller that joined its batch); the batch is
	// not dropped: a flush writes both inputs. (The linger is long so that
	// it cannot end before the cancel, however slow the machine.)
	for _, leaver := range []string{"lingerer", "joined"} {
		t.Run(leaver, func(t *testing.T) {
			sink := newFakeSink(false)
			agg := newHookAggregator(DefaultMaxBatchBytes)
			p := mustNew(t, agg, WithSink(sink), Linger(time.Hour), AdaptiveLinger(false))
			ctx, cancel := context.WithCancel(context.Background())
			ctxA, ctxB := ctx, context.Background()
			if leaver == "joined" {
				ctxA, ctxB = ctxB, ctxA
			}
			a := produceAsync(ctxA, p, "a")
			waitFor(t, "first push", func() bool { return agg.pushes.Load() == 1 })
			b := produceAsync(ctxB, p, "b")
			waitFor(t, "second push", func() bool { return agg.pushes.Load() == 2 })
			cancel()
			left, stayed := a, b
			if leaver == "joined" {
				left, stayed = b, a
			}
			if r := get(t, left); !errors.Is(r.err, context.Canceled) || !strings.Contains(r.err.Error(), "may still be produced") {
				t.Fatalf("canceled Produce = %v", r.err)
			}
			if err := p.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkOffset(t, sink, get(t, stayed))
			if log, _ := sink.snapshot(); len(log) != 2 {
				t.Fatalf("log has %d records, want both inputs", len(log))
			}
		})
	}

	t.Run("waiting on a write", func(t *testing.T) {
		sink := newFakeSink(true)
		p := mustNew(t, NewRecordAggregator(DefaultMaxBatchBytes), WithSink(sink), Linger(0))
		ctx, cancel := context.WithCancel(context.Background())
		a := produceAsync(ctx, p, "a")
		call := sink.next(t)
		cancel()
		if r := get(t, a); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Produce = %v, want context.Canceled", r.err)
		}
		call.reply <- nil
		if err := p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The producer is intact: the next input gets the next offset.
		b := produceAsync(context.Background(), p, "b")
		sink.next(t).reply <- nil
		rb := get(t, b)
		checkOffset(t, sink, rb)
		if rb.off != 1 {
			t.Fatalf("offset %d after the abandoned write, want 1", rb.off)
		}
	})
}

func TestClose(t *testing.T) {
	t.Run("flushes, refuses, idempotent", func(t *testing.T) {
		sink := newFakeSink(false)
		agg := newHookAggregator(DefaultMaxBatchBytes)
		p, err := New(agg, WithSink(sink), Linger(forever), AdaptiveLinger(false))
		if err != nil {
			t.Fatal(err)
		}
		a := produceAsync(context.Background(), p, "a")
		waitFor(t, "push", func() bool { return agg.pushes.Load() == 1 })
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkOffset(t, sink, get(t, a)) // Close flushed the lingering batch
		if _, err := p.Produce(context.Background(), Record{Value: []byte("late")}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Produce after Close = %v, want ErrClosed", err)
		}
		for i := 0; i < 2; i++ {
			if err := p.Close(context.Background()); err != nil {
				t.Fatalf("Close again: %v", err)
			}
		}
		if err := p.Flush(context.Background()); err != nil {
			t.Fatalf("Flush after Close: %v", err)
		}
	})

	t.Run("gives up", func(t *testing.T) {
		sink := newFakeSink(true)
		p, err := NewRecordProducer(WithSink(sink), Linger(0))
		if err != nil {
			t.Fatal(err)
		}
		a := produceAsync(context.Background(), p, "a")
		sink.next(t) // never answered: only the canceled context ends it
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := p.Close(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Close = %v, want context.Canceled", err)
		}
		var se *SinkError
		if r := get(t, a); !errors.As(r.err, &se) || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Produce = %v, want a SinkError wrapping the canceled write", r.err)
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func TestTooLarge(t *testing.T) {
	sink := newFakeSink(false)
	p := mustNew(t, NewRecordAggregator(200), WithSink(sink), Linger(0))
	_, err := p.Produce(context.Background(), Record{Value: make([]byte, 500)})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Produce = %v, want ErrTooLarge", err)
	}
	checkOffset(t, sink, get(t, produceAsync(context.Background(), p, "fits")))

	// An aggregator that is never able to take the input.
	q := mustNew(t, fullAggregator{}, WithSink(sink))
	if _, err := q.Produce(context.Background(), Record{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Produce = %v, want ErrTooLarge", err)
	}
}

type fullAggregator struct{}

func (fullAggregator) TryPush(Record) (int, error) { return 0, ErrNoCapacity }
func (fullAggregator) Flush() ([]Record, StatusDeaggregator[int, int64], error) {
	return nil, offsetStatus{}, nil
}

// With MaxInFlight, a caller that must flush blocks while the limit is
// reached, and gives up with its context without producing its input.
func TestBoundedInFlight(t *testing.T) {
	sink := newFakeSink(true)
	one := encodedRecordSize(&Record{Value: []byte("x")}, 0, 0)
	agg := newHookAggregator(recordBatchHeaderSize + one) // one record per batch
	agg.now = func() time.Time { return time.UnixMilli(1) }
	p := mustNew(t, agg, WithSink(sink), Linger(0), MaxInFlight(1))

	a := produceAsync(context.Background(), p, "a")
	callA := sink.next(t) // holds the only slot

	b := produceAsync(context.Background(), p, "b") // its flush waits for the slot
	waitFor(t, "b pushed", func() bool { return agg.pushes.Load() == 2 })

	ctx, cancel := context.WithCancel(context.Background())
	c := produceAsync(ctx, p, "c") // b's batch is full: c must flush it first
	waitFor(t, "c tried", func() bool { return agg.pushes.Load() == 3 })
	flushCtx, cancelFlush := context.WithCancel(context.Background())
	flushed := make(chan error, 1)
	go func() { flushed <- p.Flush(flushCtx) }()
	sink.noCall(t)

	cancel()
	rc := get(t, c)
	if !errors.Is(rc.err, context.Canceled) || !strings.Contains(rc.err.Error(), "not produced") {
		t.Fatalf("blocked Produce = %v, want context.Canceled, not produced", rc.err)
	}
	cancelFlush()
	if err := <-flushed; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked Flush = %v, want context.Canceled", err)
	}

	callA.reply <- nil
	checkOffset(t, sink, get(t, a))
	sink.next(t).reply <- nil // b's batch gets the slot
	checkOffset(t, sink, get(t, b))
	log, _ := sink.snapshot()
	for _, r := range log {
		if string(r.Value) == "c" {
			t.Fatal("the abandoned input was written")
		}
	}
	if m := sink.maxInside.Load(); m != 1 {
		t.Fatalf("%d writes ran at once, limit 1", m)
	}
}

// A lingering caller whose context is never done writes its batch in its
// own goroutine (no send goroutine to hand it to and be woken by); one
// whose context can be canceled hands the write to a goroutine, so that
// it can still return at once when the context ends.
func TestLingererWritesItsOwnBatch(t *testing.T) {
	sink := newFakeSink(false)
	inProduce := make(chan bool, 2)
	sink.hook = func(Batch) error {
		buf := make([]byte, 64<<10)
		inProduce <- strings.Contains(string(buf[:runtime.Stack(buf, false)]), "producer.(*BatchProducer[...]).Produce")
		return nil
	}
	p := mustNew(t, NewRecordAggregator(DefaultMaxBatchBytes), WithSink(sink), Linger(forever))
	if _, err := p.Produce(context.Background(), Record{Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if !<-inProduce {
		t.Fatal("a lone caller with context.Background: the sink was not called from its Produce")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := p.Produce(ctx, Record{Value: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if <-inProduce {
		t.Fatal("a caller with a cancelable context: the sink was called from its Produce")
	}
}

// lingeringPastLinger reports whether a batch's lingerer has seen its
// Linger pass and waits for the callers of batches in flight (lingerMore).
func lingeringPastLinger() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), ").lingerMore(")
}

// With AdaptiveLinger, a batch whose Linger passes while an earlier batch
// is being written keeps filling until every caller inside Produce has
// joined it: the callers of the batch in flight come back to it, instead
// of the batch leaving with the callers it has and the others starting a
// batch of their own. A caller whose context ends meanwhile hands the
// batch to a goroutine that writes it at once.
func TestLingerWaitsForCallersInFlight(t *testing.T) {
	t.Run("joins", func(t *testing.T) {
		sink := newFakeSink(true)
		agg := newHookAggregator(DefaultMaxBatchBytes)
		p := mustNew(t, agg, WithSink(sink), Linger(time.Millisecond))

		a := produceAsync(context.Background(), p, "a")
		callA := sink.next(t) // a lone caller is written at once; held
		b := produceAsync(context.Background(), p, "b")
		waitFor(t, "b's Linger to pass with a in flight", lingeringPastLinger)
		c := produceAsync(context.Background(), p, "c")
		waitFor(t, "c pushed", func() bool { return agg.accepted.Load() == 3 })
		sink.noCall(t) // b's batch waits for a's caller, who is still inside Produce

		callA.reply <- nil // a's caller leaves: everyone inside has joined b's batch
		checkOffset(t, sink, get(t, a))
		callBC := sink.next(t)
		var got []string
		for _, r := range callBC.batch.Records {
			got = append(got, string(r.Value))
		}
		if fmt.Sprint(got) != "[b c]" {
			t.Fatalf("second batch %v, want [b c]", got)
		}
		callBC.reply <- nil
		checkOffset(t, sink, get(t, b))
		checkOffset(t, sink, get(t, c))
	})

	t.Run("canceled", func(t *testing.T) {
		sink := newFakeSink(true)
		p := mustNew(t, NewRecordAggregator(DefaultMaxBatchBytes), WithSink(sink), Linger(time.Millisecond))

		a := produceAsync(context.Background(), p, "a")
		callA := sink.next(t)
		ctx, cancel := context.WithCancel(context.Background())
		b := produceAsync(ctx, p, "b")
		waitFor(t, "b's Linger to pass with a in flight", lingeringPastLinger)
		cancel()
		if r := get(t, b); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("canceled lingerer: Produce = %d, %v; want context.Canceled", r.off, r.err)
		}
		callB := sink.next(t) // written while a is still in flight
		if n := len(callB.batch.Records); n != 1 || string(callB.batch.Records[0].Value) != "b" {
			t.Fatalf("handed-off batch has %d records, want [b]", n)
		}
		callB.reply <- nil
		callA.reply <- nil
		checkOffset(t, sink, get(t, a))
	})
}

// The default aggregator's record slices are reused once their batch is
// written; every record still reaches the sink as it was produced.
func TestRecordSlicesReused(t *testing.T) {
	sink := newFakeSink(false)
	agg := NewRecordAggregator(DefaultMaxBatchBytes)
	p := mustNew(t, agg, WithSink(sink), Linger(forever))
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := fmt.Sprintf("r%d-g%d", round, g)
				off, err := p.Produce(context.Background(), Record{Value: []byte(v)})
				checkOffset(t, sink, result{v, off, err})
			}()
		}
		wg.Wait()
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.p.(*engine[Record, int, int64]).mu.Lock()
	spare := len(agg.spare)
	p.p.(*engine[Record, int, int64]).mu.Unlock()
	if spare == 0 {
		t.Fatal("no written batch's records came back to the aggregator")
	}
	log, _ := sink.snapshot()
	if len(log) != 40 {
		t.Fatalf("the sink holds %d records, want 40", len(log))
	}
}

// keepingSink is a user's Sink that keeps each batch's b.Records slice
// itself, without copying, as the Sink contract allows.
type keepingSink struct {
	mu   sync.Mutex
	kept [][]Record
	n    int64
}

func (s *keepingSink) Produce(_ context.Context, b Batch) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept = append(s.kept, b.Records)
	offs := make([]int64, len(b.Records))
	for i := range offs {
		offs[i] = s.n
		s.n++
	}
	return offs, nil
}

// TestRecordSlicesNotReusedForUserSinks checks that the producer reuses
// batches' record slices only with a sink that keeps none (KafkaSink):
// a user's sink that keeps b.Records finds them as written.
func TestRecordSlicesNotReusedForUserSinks(t *testing.T) {
	sink := &keepingSink{}
	p := mustNew(t, NewRecordAggregator(DefaultMaxBatchBytes), WithSink(sink), Linger(forever))
	want := map[int64]string{}
	var mu sync.Mutex
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := fmt.Sprintf("r%d-g%d", round, g)
				off, err := p.Produce(context.Background(), Record{Value: []byte(v)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[off] = v
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var off int64
	for _, recs := range sink.kept {
		for _, r := range recs {
			if string(r.Value) != want[off] {
				t.Fatalf("record %d kept by the sink reads %q, want %q: its slice was reused", off, r.Value, want[off])
			}
			off++
		}
	}
	if off != 40 {
		t.Fatalf("the sink kept %d records, want 40", off)
	}
}

// With AdaptiveLinger and at least splitCallers callers inside Produce, a
// batch holding at least half of them is written while another batch is in
// flight, once every caller not waiting on that write has joined it; below
// splitCallers it waits for the callers in flight as before.
func TestLingerSplitsACrowd(t *testing.T) {
	for _, c := range []struct {
		name    string
		callers int // inside Produce, the lone first one included
		split   bool
	}{
		{"below splitCallers", splitCallers - 1, false},
		{"at splitCallers", splitCallers, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink := newFakeSink(true)
			agg := newHookAggregator(DefaultMaxBatchBytes)
			p := mustNew(t, agg, WithSink(sink), Linger(forever))

			first := produceAsync(context.Background(), p, "first")
			callFirst := sink.next(t) // a lone caller is written at once; held
			rest := make([]<-chan result, c.callers-1)
			for i := range rest {
				rest[i] = produceAsync(context.Background(), p, fmt.Sprintf("v%d", i))
			}
			waitFor(t, "every caller pushed", func() bool { return agg.accepted.Load() == int64(c.callers) })
			var callRest *sinkCall
			if c.split {
				callRest = sink.next(t) // written while the first write is in flight
				callFirst.reply <- nil
			} else {
				sink.noCall(t) // waits for the first caller, still inside Produce
				callFirst.reply <- nil
				callRest = sink.next(t)
			}
			if n := len(callRest.batch.Records); n != c.callers-1 {
				t.Fatalf("second batch has %d records, want %d", n, c.callers-1)
			}
			callRest.reply <- nil
			checkOffset(t, sink, get(t, first))
			for _, ch := range rest {
				checkOffset(t, sink, get(t, ch))
			}
		})
	}
}
