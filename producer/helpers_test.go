package producer

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(BenchBrokerEnv); dir != "" {
		os.Exit(runBenchBroker(dir)) // this process is a benchmark's broker
	}
	goleak.VerifyTestMain(m)
}

// sinkCall is one held Produce call of a fakeSink in held mode.
type sinkCall struct {
	batch Batch
	reply chan error // the test sends nil to let the write succeed, or an error
}

// fakeSink is a controllable in-memory partition. Each batch's records get
// consecutive offsets, in the order the calls complete. With held set, every
// Produce call is sent to calls and waits for the test's reply (or ctx).
type fakeSink struct {
	calls chan *sinkCall // used when held
	held  bool
	hook  func(Batch) error // called first, may panic or fail the batch

	inside    atomic.Int64 // Produce calls running now
	maxInside atomic.Int64 // the most ever running at once

	mu      sync.Mutex // guards the fields below
	log     []Record   // the partition: log[offset]
	batches []int      // records per written batch, in write order
}

// recordsNotKept: the fake copies each Record into its log, so the
// producer may reuse batches' slices (as with KafkaSink).
func (s *fakeSink) recordsNotKept() {}

func newFakeSink(held bool) *fakeSink {
	return &fakeSink{held: held, calls: make(chan *sinkCall, 64)}
}

func (s *fakeSink) Produce(ctx context.Context, b Batch) ([]int64, error) {
	n := s.inside.Add(1)
	defer s.inside.Add(-1)
	for {
		m := s.maxInside.Load()
		if n <= m || s.maxInside.CompareAndSwap(m, n) {
			break
		}
	}
	if s.hook != nil {
		if err := s.hook(b); err != nil {
			return nil, err
		}
	}
	if s.held {
		c := &sinkCall{batch: b, reply: make(chan error, 1)}
		s.calls <- c
		select {
		case err := <-c.reply:
			if err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	offs := make([]int64, len(b.Records))
	for i, r := range b.Records {
		offs[i] = int64(len(s.log))
		s.log = append(s.log, r)
	}
	s.batches = append(s.batches, len(b.Records))
	return offs, nil
}

func (s *fakeSink) snapshot() (log []Record, batches []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.log...), append([]int(nil), s.batches...)
}

// next returns the next held call, failing the test if none comes.
func (s *fakeSink) next(t *testing.T) *sinkCall {
	t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no sink call")
		return nil
	}
}

// noCall checks that no Produce call is waiting.
func (s *fakeSink) noCall(t *testing.T) {
	t.Helper()
	select {
	case c := <-s.calls:
		t.Fatalf("unexpected sink call with %d records", len(c.batch.Records))
	default:
	}
}

// hookAggregator is a RecordAggregator with hooks that fail or panic on
// chosen values, and a count of pushes tried. It honours the Aggregator
// contract: a failing push leaves the batch as it was and a failing flush
// leaves the aggregator empty.
type hookAggregator struct {
	*RecordAggregator
	pushes   atomic.Int64        // TryPush calls, failed ones included
	accepted atomic.Int64        // TryPush calls that added their record
	onPush   func(r Record)      // may panic
	onFlush  func(recs []Record) // may panic
	onDeagg  func(r Record)      // may panic
	flushErr func([]Record) error
}

func newHookAggregator(max int) *hookAggregator {
	return &hookAggregator{RecordAggregator: NewRecordAggregator(max)}
}

func (a *hookAggregator) TryPush(r Record) (int, error) {
	a.pushes.Add(1)
	if a.onPush != nil {
		a.onPush(r)
	}
	tag, err := a.RecordAggregator.TryPush(r)
	if err == nil {
		a.accepted.Add(1)
	}
	return tag, err
}

func (a *hookAggregator) Flush() ([]Record, StatusDeaggregator[int, int64], error) {
	recs, d, err := a.RecordAggregator.Flush() // empties the aggregator first
	if a.onFlush != nil {
		a.onFlush(recs)
	}
	if a.flushErr != nil {
		if err := a.flushErr(recs); err != nil {
			return nil, nil, err
		}
	}
	return recs, hookDeagg{d, recs, a.onDeagg}, err
}

type hookDeagg struct {
	StatusDeaggregator[int, int64]
	recs []Record
	on   func(Record)
}

func (d hookDeagg) Deaggregate(offsets []int64, tag int) (int64, error) {
	if d.on != nil {
		d.on(d.recs[tag])
	}
	return d.StatusDeaggregator.Deaggregate(offsets, tag)
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline. It orders events in tests; it never measures time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// result is one Produce call's outcome.
type result struct {
	val string
	off int64
	err error
}

// produceAsync runs Produce for value v in a goroutine and delivers the
// outcome on the returned channel.
func produceAsync(ctx context.Context, p *BatchProducer[Record, int64], v string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		off, err := p.Produce(ctx, Record{Value: []byte(v)})
		ch <- result{v, off, err}
	}()
	return ch
}

func get(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Produce did not return")
		return result{}
	}
}

// checkOffset checks that r succeeded and that the sink holds r's value at
// r's offset.
func checkOffset(t *testing.T, s *fakeSink, r result) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("Produce(%q): %v", r.val, r.err)
	}
	log, _ := s.snapshot()
	if r.off < 0 || r.off >= int64(len(log)) || string(log[r.off].Value) != r.val {
		t.Fatalf("Produce(%q) returned offset %d, which does not hold it (log has %d records)", r.val, r.off, len(log))
	}
}

func mustNew(t *testing.T, agg Aggregator[Record, int, int64], opts ...Opt) *BatchProducer[Record, int64] {
	t.Helper()
	p, err := New(agg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func vals(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
