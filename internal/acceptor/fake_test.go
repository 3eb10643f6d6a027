package acceptor

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// op is one call the acceptor made on a fakeLog.
type op struct {
	kind    string // "append" or "sync"
	bytes   int
	batches int
	first   *byte  // address of the first byte passed to Append (to tell copies from originals)
	g       uint64 // the calling goroutine's id
}

// goid returns the calling goroutine's id, parsed from its stack header
// ("goroutine 42 [running]:"), so tests can tell which goroutine called.
func goid() uint64 {
	buf := goidBuf.Get().(*[64]byte)
	defer goidBuf.Put(buf)
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

var goidBuf = sync.Pool{New: func() any { return new([64]byte) }}

// fakeLog is an in-memory partitionLog that records the calls it gets,
// checks that appended offsets are contiguous, and can block or fail them.
type fakeLog struct {
	t *testing.T

	mu        sync.Mutex // guards every field below
	ops       []op
	data      []byte // everything appended
	next      int64
	synced    int   // len(data) at the last successful sync
	retention int   // ApplyRetention calls
	prealloc  int   // Preallocate calls
	appendErr error // returned by every Append while set
	syncErr   error // returned by every Sync while set

	appendGate chan struct{} // when set, Append waits for a receive from it before writing
	syncGate   chan struct{} // when set, Sync waits for a receive from it
	entered    chan string   // when set, gets "append"/"sync" as a call enters (before a gate)
}

func newFake(t *testing.T) *fakeLog { return &fakeLog{t: t} }

func (f *fakeLog) Append(b []byte, hs []batch.Header) error {
	f.mu.Lock()
	gate, entered := f.appendGate, f.entered
	f.mu.Unlock()
	if entered != nil {
		entered <- "append"
	}
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.appendErr != nil {
		return f.appendErr
	}
	// The acceptor must hand over the headers of exactly these bytes,
	// base offsets assigned. Only framing is read here (not the CRC):
	// checking the CRC is the broker's job, once.
	n, pos := 0, 0
	for pos < len(b) {
		h, err := batch.ParseHeader(b[pos:])
		switch {
		case err != nil:
		case n >= len(hs):
			err = fmt.Errorf("%d headers for more batches", len(hs))
		case hs[n] != h:
			err = fmt.Errorf("header %d is %+v, the bytes say %+v", n, hs[n], h)
		case h.BaseOffset != f.next:
			err = fmt.Errorf("base offset %d, want %d", h.BaseOffset, f.next)
		case pos+h.Size() > len(b):
			err = batch.ErrShort
		}
		if err != nil {
			f.t.Errorf("fakeLog.Append: batch at byte %d: %v", pos, err)
			return err
		}
		f.next = h.LastOffset() + 1
		pos += h.Size()
		n++
	}
	if n != len(hs) {
		err := fmt.Errorf("%d headers for %d batches", len(hs), n)
		f.t.Errorf("fakeLog.Append: %v", err)
		return err
	}
	f.ops = append(f.ops, op{kind: "append", bytes: len(b), batches: n, first: &b[0], g: goid()})
	f.data = append(f.data, b...)
	return nil
}

func (f *fakeLog) Sync() error {
	f.mu.Lock()
	gate, entered := f.syncGate, f.entered
	f.mu.Unlock()
	if entered != nil {
		entered <- "sync"
	}
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.syncErr != nil {
		return f.syncErr
	}
	f.synced = len(f.data)
	f.ops = append(f.ops, op{kind: "sync", g: goid()})
	return nil
}

// Preallocate counts the call: the fake has no files.
func (f *fakeLog) Preallocate() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prealloc++
	return nil
}

// StartOffset is 0: the fake never removes anything.
func (f *fakeLog) StartOffset() int64 { return 0 }

func (f *fakeLog) NextOffset() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next
}

func (f *fakeLog) ApplyRetention() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retention++
	return 0, nil
}

// set runs fn with f.mu held, to change the fake's behaviour.
func (f *fakeLog) set(fn func(f *fakeLog)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeLog) snapshot() (ops []op, data []byte, synced int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]op(nil), f.ops...), append([]byte(nil), f.data...), f.synced
}

// appendOps returns the byte sizes and batch counts of the appends, in order.
func appendOps(ops []op) (sizes, batches []int) {
	for _, o := range ops {
		if o.kind == "append" {
			sizes = append(sizes, o.bytes)
			batches = append(batches, o.batches)
		}
	}
	return sizes, batches
}

// manualTicker hands out tick channels the test fires by hand.
type manualTicker struct {
	mu sync.Mutex // guards chans
	// chans maps a ticker's interval to its channel.
	chans map[time.Duration]chan time.Time
}

func newManualTicker() *manualTicker {
	return &manualTicker{chans: map[time.Duration]chan time.Time{}}
}

func (m *manualTicker) newTicker(d time.Duration) (<-chan time.Time, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := make(chan time.Time, 1)
	m.chans[d] = c
	return c, func() {}
}

// tick fires the ticker of interval d (it must exist).
func (m *manualTicker) tick(t *testing.T, d time.Duration) {
	t.Helper()
	m.mu.Lock()
	c := m.chans[d]
	m.mu.Unlock()
	if c == nil {
		t.Fatalf("no ticker with interval %v", d)
	}
	c <- time.Time{}
}

// testConfig is a Config whose tickers only fire by hand and whose failed
// partitions do not heal within a test (heal tests shorten HealBackoff).
func testConfig(mt *manualTicker) Config {
	return Config{FlushInterval: time.Second, RetentionCheck: time.Minute, NewTicker: mt.newTicker, HealBackoff: time.Hour}
}

// mkReq returns a request of one batch with records records of valueSize
// bytes, and a copy of its bytes (base offset 0).
func mkReq(records, valueSize int, seed int64, durable bool) (*Request, []byte) {
	b := storagetest.MakeBatch(records, valueSize, seed)
	return &Request{Batches: b, Durable: durable}, append([]byte(nil), b...)
}

// call is an Append running in its own goroutine.
type call struct {
	req  *Request
	orig []byte
	res  Result
	err  error
	done chan struct{}
}

// goAppend starts an Append in a goroutine.
func goAppend(ctx context.Context, a *Acceptor, req *Request, orig []byte) *call {
	c := &call{req: req, orig: orig, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.res, c.err = a.Append(ctx, req)
	}()
	return c
}

// queueAppend starts an Append and waits until it sits in the queue, so
// that a test controls the queue's order.
func queueAppend(t *testing.T, ctx context.Context, a *Acceptor, req *Request, orig []byte) *call {
	t.Helper()
	before := queueLen(a)
	c := goAppend(ctx, a, req, orig)
	waitFor(t, func() bool { return queueLen(a) > before }, "append to enter the queue")
	return c
}

// queueLen is the number of appends in a's queue (none before its run
// goroutine made the queue).
func queueLen(a *Acceptor) int {
	if q := a.queue.Load(); q != nil {
		return len(*q)
	}
	return 0
}

// waitFor polls cond until it holds; it fails the test after a generous
// deadline (a hang, not a timing assertion).
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// wait waits for c to return.
func (c *call) wait(t *testing.T) *call {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Append did not return")
	}
	return c
}

// returned reports whether c has returned.
func (c *call) returned() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// checkData checks that data holds exactly the given calls' batches, in
// offset order, each at the base offset it was told, from offset 0.
func checkData(t *testing.T, data []byte, calls ...*call) {
	t.Helper()
	var want []byte
	var next int64
	for _, c := range calls {
		if c.err != nil {
			t.Fatalf("append failed: %v", c.err)
		}
		if c.res.BaseOffset != next {
			t.Fatalf("append got base offset %d, want %d", c.res.BaseOffset, next)
		}
		b, n := storagetest.WithBaseOffset(c.orig, next)
		want = append(want, b...)
		next = n
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("log holds %d bytes that differ from the %d bytes appended", len(data), len(want))
	}
}

// Abandon does nothing: Recover always cuts back to what was synced.
func (f *fakeLog) Abandon(error) {}

// RecoverUpTo keeps what was synced, as Recover(false): keeping less
// than storage.Log does is allowed (the WAL refills the rest).
func (f *fakeLog) RecoverUpTo(int64) error { return f.Recover(false) }

// Recover fails while an error is injected; otherwise it cuts the data
// back to what was synced (unless keepUnsynced), as storage.Log does.
func (f *fakeLog) Recover(keepUnsynced bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.appendErr != nil {
		return f.appendErr
	}
	if f.syncErr != nil {
		return f.syncErr
	}
	if !keepUnsynced {
		f.data = f.data[:f.synced]
	}
	f.next = 0
	if _, err := batch.Split(f.data, func(h batch.Header, _ []byte) error {
		f.next = h.LastOffset() + 1
		return nil
	}); err != nil {
		return err
	}
	f.ops = append(f.ops, op{kind: "recover"})
	return nil
}
