package acceptor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicedb/sluice/internal/batch"
)

// fixture is an acceptor on a fake log with hand-driven tickers.
type fixture struct {
	t  *testing.T
	f  *fakeLog
	mt *manualTicker
	a  *Acceptor
}

func newFixture(t *testing.T, tweak func(*Config)) *fixture {
	t.Helper()
	fx := &fixture{t: t, f: newFake(t), mt: newManualTicker()}
	cfg := testConfig(fx.mt)
	if tweak != nil {
		tweak(&cfg)
	}
	fx.a = start(fx.f, cfg)
	t.Cleanup(func() {
		fx.f.set(func(f *fakeLog) { f.appendGate, f.syncGate, f.entered = nil, nil, nil })
		if err := fx.a.Close(); err != nil && fx.a.Err() == nil {
			t.Errorf("Close: %v", err)
		}
	})
	return fx
}

// gateAppends makes the log's Appends block until release runs (also
// run at cleanup, so that a failing test does not hang in Close); every
// log call reports itself on entered as it starts.
func (fx *fixture) gateAppends() (entered chan string, release func()) {
	gate := make(chan struct{})
	entered = make(chan string, 1000)
	fx.f.set(func(f *fakeLog) { f.appendGate, f.entered = gate, entered })
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	fx.t.Cleanup(release)
	return entered, release
}

// gateSyncs makes the log's Syncs block; each send on the returned
// channel lets one through. Cleanup (before the fixture's Close) closes
// it, letting every later one through.
func (fx *fixture) gateSyncs() (entered chan string, gate chan struct{}) {
	gate = make(chan struct{})
	entered = make(chan string, 1000)
	fx.f.set(func(f *fakeLog) { f.syncGate, f.entered = gate, entered })
	fx.t.Cleanup(func() { close(gate) })
	return entered, gate
}

func expect(t *testing.T, entered chan string, want string) {
	t.Helper()
	select {
	case got := <-entered:
		if got != want {
			t.Fatalf("log call %q entered, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("log call %q never entered", want)
	}
}

func TestCoalescing(t *testing.T) {
	req, _ := mkReq(1, 1000, 0, true)
	size := len(req.Batches)
	big := 3*size + size/2 // three appends fit, four do not

	tests := []struct {
		name       string
		bufSize    int
		noCoalesce bool
		sizes      []int // value sizes of the queued appends, after the first
		wantBatch  []int // batches per write, after the first
		asIs       []int // indexes (in sizes) of appends that must be written without copying
	}{
		{"fills the buffer and starts the emptied one", big, false, []int{1000, 1000, 1000, 1000, 1000, 1000, 1000}, []int{3, 3, 1}, nil},
		{"oversized append written as-is between buffers", 4096, false, []int{1000, 20000, 1000, 1000}, []int{1, 1, 2}, []int{1}},
		{"oversized append first", 4096, false, []int{20000, 1000, 1000}, []int{1, 2}, []int{0}},
		{"no coalescing: one write per append", big, true, []int{1000, 1000, 1000, 20000}, []int{1, 1, 1, 1}, []int{0, 1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, func(c *Config) { c.BufferSize, c.NoCoalesce = tt.bufSize, tt.noCoalesce })
			entered, release := fx.gateAppends()
			ctx := context.Background()
			r0, o0 := mkReq(1, 1000, 0, true)
			calls := []*call{goAppend(ctx, fx.a, r0, o0)}
			expect(t, entered, "append") // the first append (queue empty) is being written as-is
			for i, vs := range tt.sizes {
				r, o := mkReq(2, vs/2, int64(i+1), i%2 == 0)
				calls = append(calls, queueAppend(t, ctx, fx.a, r, o))
			}
			release()
			for _, c := range calls {
				c.wait(t)
			}
			ops, data, _ := fx.f.snapshot()
			checkData(t, data, calls...)
			_, batches := appendOps(ops)
			want := append([]int{1}, tt.wantBatch...)
			if fmt.Sprint(batches) != fmt.Sprint(want) {
				t.Fatalf("batches per write = %v, want %v", batches, want)
			}
			// Which appends reached the log as the caller's own slice.
			var writes []op
			for _, o := range ops {
				if o.kind == "append" {
					writes = append(writes, o)
				}
			}
			isAsIs := map[int]bool{}
			for _, i := range tt.asIs {
				isAsIs[i+1] = true
			}
			isAsIs[0] = true
			for i, c := range calls {
				found := false
				for _, w := range writes {
					found = found || w.first == &c.req.Batches[0]
				}
				if found != isAsIs[i] {
					t.Errorf("append %d written without copying = %v, want %v", i, found, isAsIs[i])
				}
			}
			// Group commit: no fsync until the queue drained, then one
			// (after the one Start does).
			if n := countOps(ops, "sync"); n != 2 {
				t.Errorf("%d syncs, want 2 (start, then one for the whole group)", n)
			}
			if got, want := fx.a.HighWatermark(), fx.f.NextOffset(); got != want {
				t.Errorf("high watermark %d, want %d", got, want)
			}
		})
	}
}

func countOps(ops []op, kind string) int {
	n := 0
	for _, o := range ops {
		if o.kind == kind {
			n++
		}
	}
	return n
}

func TestFsyncPolicy(t *testing.T) {
	tests := []struct {
		policy        FsyncPolicy
		durable       bool
		releaseOnSync bool // the append returns only after the fsync
		syncOnDrain   bool // an fsync follows when the queue drains
		syncOnTick    bool // the flush ticker fsyncs dirty data
		hwOnWrite     bool // the high watermark follows writes
	}{
		{FsyncAlways, true, true, true, true, false},
		{FsyncAlways, false, false, true, true, false},
		{FsyncInterval, true, false, false, true, true},
		{FsyncInterval, false, false, false, true, true},
		{FsyncNever, true, false, false, false, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/durable=%v", tt.policy, tt.durable), func(t *testing.T) {
			fx := newFixture(t, func(c *Config) { c.Fsync = tt.policy })
			entered, syncGate := fx.gateSyncs()
			r, o := mkReq(5, 10, 1, tt.durable)
			c := goAppend(context.Background(), fx.a, r, o)
			expect(t, entered, "append")
			if tt.syncOnDrain {
				expect(t, entered, "sync") // blocked in the gate
				if tt.releaseOnSync {
					if c.returned() {
						t.Fatal("durable append returned before its fsync finished")
					}
				} else {
					c.wait(t)
				}
				if hw := fx.a.HighWatermark(); hw != 0 {
					t.Fatalf("high watermark %d before fsync, want 0", hw)
				}
				syncGate <- struct{}{}
				c.wait(t)
				waitFor(t, func() bool { return fx.a.HighWatermark() == 5 }, "high watermark 5 after fsync")
				checkData(t, fx.f.data, c)
				return
			}
			c.wait(t)
			checkData(t, fx.f.data, c)
			if got, want := fx.a.HighWatermark(), int64(0); tt.hwOnWrite {
				if got != 5 {
					t.Fatalf("high watermark %d after write, want 5", got)
				}
			} else if got != want {
				t.Fatalf("high watermark %d, want %d", got, want)
			}
			fx.mt.tick(t, time.Second)
			if tt.syncOnTick {
				expect(t, entered, "sync")
				syncGate <- struct{}{}
			}
			fx.f.set(func(f *fakeLog) { f.syncGate = nil })
			if err := fx.a.Close(); err != nil {
				t.Fatal(err)
			}
			ops, _, synced := fx.f.snapshot()
			// Start's sync, then either the tick's (Close finds nothing
			// left) or, with no tick sync, Close's.
			want := 2
			if n := countOps(ops, "sync"); n != want {
				t.Fatalf("%d syncs, want %d", n, want)
			}
			if synced != len(fx.f.data) {
				t.Fatalf("Close left %d of %d bytes unsynced", len(fx.f.data)-synced, len(fx.f.data))
			}
		})
	}
}

func TestFlushTickUnderLoad(t *testing.T) {
	fx := newFixture(t, nil)
	entered, release := fx.gateAppends()
	ctx := context.Background()
	r0, o0 := mkReq(1, 100, 0, true)
	calls := []*call{goAppend(ctx, fx.a, r0, o0)}
	expect(t, entered, "append")
	for i := 1; i <= 3; i++ {
		r, o := mkReq(1, 100, int64(i), true)
		calls = append(calls, queueAppend(t, ctx, fx.a, r, o))
	}
	fx.mt.tick(t, time.Second) // pending: seen while the queue is still full
	release()
	for _, c := range calls {
		c.wait(t)
	}
	ops, data, _ := fx.f.snapshot()
	checkData(t, data, calls...)
	var kinds []string
	for _, o := range ops {
		kinds = append(kinds, fmt.Sprintf("%s%d", o.kind, o.batches))
	}
	// Start's sync; the first append; the tick starts a sync of it while
	// appends are still queued; the rest coalesce into one write and one
	// final sync. The tick's fsync runs on the sync goroutine alongside
	// the coalesced write, so the two may be recorded in either order;
	// without the tick there would be only two syncs.
	var appends []string
	syncs := 0
	for _, k := range kinds {
		if k == "sync0" {
			syncs++
		} else {
			appends = append(appends, k)
		}
	}
	if kinds[0] != "sync0" || fmt.Sprint(appends) != "[append1 append3]" || syncs != 3 {
		t.Fatalf("log calls %v, want Start's sync, then append1 and append3 in order with two more syncs", kinds)
	}
}

func TestBackPressure(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.QueueSize = 2 })
	entered, release := fx.gateAppends()
	bg := context.Background()
	r0, o0 := mkReq(1, 10, 0, true)
	c0 := goAppend(bg, fx.a, r0, o0)
	expect(t, entered, "append")
	r1, o1 := mkReq(1, 10, 1, true)
	c1 := queueAppend(t, bg, fx.a, r1, o1)
	r2, o2 := mkReq(1, 10, 2, true)
	c2 := queueAppend(t, bg, fx.a, r2, o2)

	// The queue is full: this append blocks until its ctx ends.
	ctx, cancel := context.WithCancel(bg)
	r3, o3 := mkReq(1, 10, 3, true)
	c3 := goAppend(ctx, fx.a, r3, o3)
	time.Sleep(5 * time.Millisecond)
	if c3.returned() {
		t.Fatalf("Append returned (%v) although the queue is full", c3.err)
	}
	cancel()
	if c3.wait(t).err != context.Canceled {
		t.Fatalf("Append on a full queue after cancel: %v, want context.Canceled", c3.err)
	}
	release()
	c0.wait(t)
	c1.wait(t)
	c2.wait(t)
	checkData(t, fx.f.data, c0, c1, c2)
}

func TestCancel(t *testing.T) {
	t.Run("while queued: never written", func(t *testing.T) {
		fx := newFixture(t, nil)
		entered, release := fx.gateAppends()
		bg := context.Background()
		r0, o0 := mkReq(1, 10, 0, true)
		c0 := goAppend(bg, fx.a, r0, o0)
		expect(t, entered, "append")
		r1, o1 := mkReq(2, 10, 1, true)
		c1 := queueAppend(t, bg, fx.a, r1, o1)
		ctx, cancel := context.WithCancel(bg)
		r2, o2 := mkReq(3, 10, 2, true)
		c2 := queueAppend(t, ctx, fx.a, r2, o2)
		r3, o3 := mkReq(4, 10, 3, true)
		c3 := queueAppend(t, bg, fx.a, r3, o3)
		cancel()
		if c2.wait(t).err != context.Canceled {
			t.Fatalf("cancelled queued append: %v", c2.err)
		}
		release()
		c0.wait(t)
		c1.wait(t)
		c3.wait(t)
		checkData(t, fx.f.data, c0, c1, c3)
	})
	t.Run("while being written: returns once its bytes are written", func(t *testing.T) {
		fx := newFixture(t, nil)
		entered, release := fx.gateAppends()
		ctx, cancel := context.WithCancel(context.Background())
		r0, o0 := mkReq(1, 10, 0, true)
		c0 := goAppend(ctx, fx.a, r0, o0)
		expect(t, entered, "append")
		cancel()
		time.Sleep(5 * time.Millisecond)
		if c0.returned() {
			t.Fatal("Append returned while the acceptor still used its bytes")
		}
		release()
		if c0.wait(t).err != context.Canceled {
			t.Fatalf("err %v, want context.Canceled", c0.err)
		}
		c0.err = nil
		checkData(t, fx.f.data, c0)
		// The abandoned append still becomes durable; the HW covers it.
		waitFor(t, func() bool { return fx.a.HighWatermark() == 1 }, "high watermark 1")
	})
	t.Run("while waiting for fsync: returns at once", func(t *testing.T) {
		fx := newFixture(t, nil)
		entered, syncGate := fx.gateSyncs()
		ctx, cancel := context.WithCancel(context.Background())
		r0, o0 := mkReq(1, 10, 0, true)
		c0 := goAppend(ctx, fx.a, r0, o0)
		expect(t, entered, "append")
		expect(t, entered, "sync")
		cancel()
		if c0.wait(t).err != context.Canceled {
			t.Fatalf("err %v, want context.Canceled", c0.err)
		}
		fx.f.set(func(f *fakeLog) { f.syncGate = nil })
		syncGate <- struct{}{}
		waitFor(t, func() bool { return fx.a.HighWatermark() == 1 }, "high watermark 1")
		// The waiter went back to the pool; later appends still work.
		r1, o1 := mkReq(1, 10, 1, true)
		c1 := goAppend(context.Background(), fx.a, r1, o1).wait(t)
		c0.err = nil
		checkData(t, fx.f.data, c0, c1)
	})
	t.Run("ctx already done", func(t *testing.T) {
		fx := newFixture(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r, _ := mkReq(1, 10, 0, true)
		if _, err := fx.a.Append(ctx, r); err != context.Canceled {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		if len(fx.f.data) != 0 {
			t.Fatal("a cancelled append was written")
		}
	})
}

func TestCheck(t *testing.T) {
	errReject := errors.New("out of order sequence")
	t.Run("serialized, sees each base offset in order", func(t *testing.T) {
		fx := newFixture(t, nil)
		entered, release := fx.gateAppends()
		var seen []int64 // only the acceptor goroutine appends to it
		check := func(base int64) (int64, bool, error) { seen = append(seen, base); return 0, false, nil }
		bg := context.Background()
		var calls []*call
		for i := 0; i < 4; i++ {
			r, o := mkReq(i+1, 10, int64(i), true)
			r.Check = check
			if i == 0 {
				calls = append(calls, goAppend(bg, fx.a, r, o))
				expect(t, entered, "append")
				continue
			}
			calls = append(calls, queueAppend(t, bg, fx.a, r, o))
		}
		release()
		for _, c := range calls {
			c.wait(t)
		}
		checkData(t, fx.f.data, calls...)
		if fmt.Sprint(seen) != "[0 1 3 6]" {
			t.Fatalf("Check saw bases %v, want [0 1 3 6]", seen)
		}
	})
	t.Run("rejects: nothing written, offset not used", func(t *testing.T) {
		fx := newFixture(t, nil)
		bg := context.Background()
		r, _ := mkReq(3, 10, 0, true)
		r.Check = func(int64) (int64, bool, error) { return 0, false, errReject }
		if _, err := fx.a.Append(bg, r); !errors.Is(err, errReject) {
			t.Fatalf("err %v, want the Check error", err)
		}
		r1, o1 := mkReq(2, 10, 1, true)
		c1 := goAppend(bg, fx.a, r1, o1).wait(t)
		checkData(t, fx.f.data, c1)
		if fx.a.Err() != nil {
			t.Fatalf("a rejected append stopped the partition: %v", fx.a.Err())
		}
	})
	t.Run("duplicate: nothing written, released only when durable", func(t *testing.T) {
		fx := newFixture(t, nil)
		entered, release := fx.gateAppends()
		_, syncGate := fx.gateSyncs()
		fx.f.set(func(f *fakeLog) { f.entered = entered })
		bg := context.Background()
		r0, o0 := mkReq(5, 10, 0, true)
		c0 := goAppend(bg, fx.a, r0, o0)
		expect(t, entered, "append")
		rd, _ := mkReq(5, 10, 0, true)
		rd.Check = func(base int64) (int64, bool, error) {
			if base != 5 {
				return 0, false, fmt.Errorf("Check got base %d, want 5", base)
			}
			return 0, true, nil
		}
		cd := queueAppend(t, bg, fx.a, rd, nil)
		release()
		expect(t, entered, "sync")
		if cd.returned() || c0.returned() {
			t.Fatal("an acks=all append or its duplicate returned before the fsync")
		}
		syncGate <- struct{}{}
		c0.wait(t)
		if cd.wait(t).err != nil || cd.res != (Result{BaseOffset: 0, Duplicate: true}) {
			t.Fatalf("duplicate: %+v, %v; want base 0, Duplicate", cd.res, cd.err)
		}
		checkData(t, fx.f.data, c0)
	})
}

func TestBadRequest(t *testing.T) {
	good, _ := mkReq(3, 10, 0, true)
	corrupt := append([]byte(nil), good.Batches...)
	corrupt[len(corrupt)-1] ^= 1
	tests := []struct {
		name string
		req  *Request
	}{
		{"nil", nil},
		{"empty", &Request{}},
		{"garbage", &Request{Batches: []byte("not a record batch at all, not even close....................")}},
		{"truncated", &Request{Batches: good.Batches[:len(good.Batches)-1]}},
		{"bad crc", &Request{Batches: corrupt}},
		{"records disagree", &Request{Batches: good.Batches, Records: 4}},
	}
	fx := newFixture(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := fx.a.Append(context.Background(), tt.req); !errors.Is(err, ErrBadRequest) {
				t.Fatalf("err %v, want ErrBadRequest", err)
			}
		})
	}
	r, o := mkReq(3, 10, 0, true)
	r.Records = 3
	c := goAppend(context.Background(), fx.a, r, o).wait(t)
	checkData(t, fx.f.data, c)

	// Headers from the caller are trusted but must add up to the bytes.
	hs, _ := parse(t, good.Batches)
	two := append(append([]byte(nil), good.Batches...), good.Batches...)
	for _, tt := range []struct {
		name string
		req  *Request
	}{
		{"headers/too few", &Request{Batches: two, Headers: hs}},
		{"headers/too many", &Request{Batches: good.Batches, Headers: append(append([]batch.Header(nil), hs...), hs...)}},
		{"headers/records disagree", &Request{Batches: good.Batches, Headers: hs, Records: 5}},
		{"headers/negative lastOffsetDelta", &Request{Batches: good.Batches, Headers: []batch.Header{func() batch.Header { h := hs[0]; h.LastOffsetDelta = -2; return h }()}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := fx.a.Append(context.Background(), tt.req); !errors.Is(err, ErrBadRequest) {
				t.Fatalf("err %v, want ErrBadRequest", err)
			}
		})
	}
	ops, _, _ := fx.f.snapshot()
	if sizes, _ := appendOps(ops); len(sizes) != 1 {
		t.Fatalf("writes %v after rejected appends, want only the good one", sizes)
	}
}

// parse validates b with batch.Split, as the broker does, and returns the
// headers.
func parse(t *testing.T, b []byte) ([]batch.Header, int64) {
	t.Helper()
	var hs []batch.Header
	var n int64
	if _, err := batch.Split(b, func(h batch.Header, _ []byte) error {
		hs = append(hs, h)
		n += int64(h.LastOffsetDelta) + 1
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return hs, n
}

// TestHeadersSkipParse: with the caller's headers, the acceptor neither
// re-parses nor re-checksums the bytes (the broker did both once). A
// batch whose value bytes change after parsing is written as it is, and
// the headers handed to the log carry the assigned base offsets.
func TestHeadersSkipParse(t *testing.T) {
	good, _ := mkReq(2, 10, 0, true)
	corrupt := append([]byte(nil), good.Batches...)
	corrupt[len(corrupt)-1] ^= 1
	if _, _, err := headers(&Request{Batches: corrupt}, nil); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("bad CRC without headers: err %v, want ErrBadRequest", err)
	}

	fx := newFixture(t, nil)
	r0, o0 := mkReq(3, 10, 1, true)
	r0.Headers, _ = parse(t, r0.Batches)
	c0 := goAppend(context.Background(), fx.a, r0, o0).wait(t)
	if c0.err != nil {
		t.Fatal(c0.err)
	}
	hs, n := parse(t, good.Batches)
	req := &Request{Batches: corrupt, Headers: hs, Records: n, Durable: true}
	c := goAppend(context.Background(), fx.a, req, append([]byte(nil), corrupt...)).wait(t)
	if c.err != nil {
		t.Fatalf("append with headers of a batch changed after parsing: %v", c.err)
	}
	if c.res.BaseOffset != 3 || hs[0].BaseOffset != 3 {
		t.Fatalf("base offset %d, header says %d; want 3", c.res.BaseOffset, hs[0].BaseOffset)
	}
	checkData(t, fx.f.data, c0, c)
}

func TestFailure(t *testing.T) {
	cause := fmt.Errorf("write: %w", syscall.EIO)
	t.Run("write fails: covered and later appends fail", func(t *testing.T) {
		fx := newFixture(t, nil)
		entered, release := fx.gateAppends()
		bg := context.Background()
		r0, o0 := mkReq(1, 10, 0, true)
		c0 := goAppend(bg, fx.a, r0, o0)
		expect(t, entered, "append")
		var calls []*call
		for i := 1; i <= 3; i++ {
			r, o := mkReq(1, 10, int64(i), i != 2)
			calls = append(calls, queueAppend(t, bg, fx.a, r, o))
		}
		fx.f.set(func(f *fakeLog) { f.appendErr = cause })
		release()
		for _, c := range append(calls, c0) {
			if err := c.wait(t).err; !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("append err %v, want ErrFailed wrapping EIO", err)
			}
		}
		if err := fx.a.Err(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Err() = %v, want EIO", err)
		}
		r, _ := mkReq(1, 10, 9, false)
		if _, err := fx.a.Append(bg, r); !errors.Is(err, ErrFailed) {
			t.Fatalf("append after failure: %v, want ErrFailed", err)
		}
		if hw := fx.a.HighWatermark(); hw != 0 {
			t.Fatalf("high watermark %d after failed writes, want 0", hw)
		}
		if err := fx.a.Close(); err != nil {
			t.Fatalf("Close after a reported failure: %v", err)
		}
	})
	t.Run("fsync fails: unsynced acks=all appends fail, acks=1 were released", func(t *testing.T) {
		fx := newFixture(t, nil)
		entered, release := fx.gateAppends()
		bg := context.Background()
		r0, o0 := mkReq(1, 10, 0, false)
		c0 := goAppend(bg, fx.a, r0, o0)
		expect(t, entered, "append")
		r1, o1 := mkReq(1, 10, 1, true)
		c1 := queueAppend(t, bg, fx.a, r1, o1)
		fx.f.set(func(f *fakeLog) { f.syncErr = fmt.Errorf("fsync: %w", syscall.EIO) })
		release()
		if err := c0.wait(t).err; err != nil {
			t.Fatalf("acks=1 append: %v (it was written before the fsync failed)", err)
		}
		if err := c1.wait(t).err; !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("acks=all append: %v, want ErrFailed wrapping EIO", err)
		}
		if hw := fx.a.HighWatermark(); hw != 0 {
			t.Fatalf("high watermark %d after failed fsync, want 0", hw)
		}
		fx.f.set(func(f *fakeLog) { f.syncErr = nil })
		r, _ := mkReq(1, 10, 9, true)
		if _, err := fx.a.Append(bg, r); !errors.Is(err, ErrFailed) {
			t.Fatalf("append after failed fsync: %v, want ErrFailed (never retry an fsync)", err)
		}
	})
	t.Run("failing Close reports the error", func(t *testing.T) {
		fx := newFixture(t, func(c *Config) { c.Fsync = FsyncNever })
		r, o := mkReq(1, 10, 0, true)
		goAppend(context.Background(), fx.a, r, o).wait(t)
		fx.f.set(func(f *fakeLog) { f.syncErr = cause })
		if err := fx.a.Close(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Close: %v, want EIO", err)
		}
		if err := fx.a.Close(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("second Close: %v, want the same error", err)
		}
	})
	t.Run("fsync at start fails", func(t *testing.T) {
		f := newFake(t)
		f.syncErr = cause
		f.next = 7 // the log holds offsets 0..6, which may not be durable
		a := start(f, testConfig(newManualTicker()))
		defer a.Close()
		r, _ := mkReq(1, 10, 0, true)
		if _, err := a.Append(context.Background(), r); !errors.Is(err, syscall.EIO) {
			t.Fatalf("append: %v, want EIO", err)
		}
		if hw := a.HighWatermark(); hw != 0 {
			t.Fatalf("high watermark %d after a failed start-up fsync, want 0: readers must not see bytes that may not be durable", hw)
		}
	})
}

func TestClose(t *testing.T) {
	fx := newFixture(t, nil)
	entered, release := fx.gateAppends()
	bg := context.Background()
	r0, o0 := mkReq(1, 10, 0, true)
	calls := []*call{goAppend(bg, fx.a, r0, o0)}
	expect(t, entered, "append")
	for i := 1; i <= 3; i++ {
		r, o := mkReq(1, 10, int64(i), true)
		calls = append(calls, queueAppend(t, bg, fx.a, r, o))
	}
	hwc := fx.a.HWChanged()
	closed := make(chan error, 1)
	go func() { closed <- fx.a.Close() }()
	waitFor(t, func() bool {
		fx.a.sendMu.RLock()
		defer fx.a.sendMu.RUnlock()
		return fx.a.sendClosed
	}, "Close to shut the queue")
	rl, _ := mkReq(1, 10, 9, true)
	if _, err := fx.a.Append(bg, rl); err != ErrClosed {
		t.Fatalf("Append during Close: %v, want ErrClosed", err)
	}
	release()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range calls {
		c.wait(t)
	}
	checkData(t, fx.f.data, calls...)
	if fx.f.synced != len(fx.f.data) {
		t.Fatal("Close did not fsync what was queued")
	}
	<-hwc
	<-fx.a.HWChanged() // closed for good once stopped
	if err := fx.a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestHWChanged(t *testing.T) {
	fx := newFixture(t, nil)
	ch := fx.a.HWChanged()
	if hw := fx.a.HighWatermark(); hw != 0 {
		t.Fatalf("initial high watermark %d", hw)
	}
	select {
	case <-ch:
		t.Fatal("HWChanged closed before any append")
	default:
	}
	r, _ := mkReq(4, 10, 0, true)
	if _, err := fx.a.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	<-ch
	if hw := fx.a.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d, want 4", hw)
	}
}

func TestRetentionTicker(t *testing.T) {
	fx := newFixture(t, nil)
	r, _ := mkReq(1, 10, 0, true)
	if _, err := fx.a.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		fx.mt.tick(t, time.Minute)
		waitFor(t, func() bool {
			fx.f.mu.Lock()
			defer fx.f.mu.Unlock()
			return fx.f.retention == i
		}, "retention to run")
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	fx := newFixture(t, func(c *Config) { c.Metrics = m })
	entered, release := fx.gateAppends()
	bg := context.Background()
	r0, o0 := mkReq(1, 10, 0, true)
	calls := []*call{goAppend(bg, fx.a, r0, o0)}
	expect(t, entered, "append")
	for i := 1; i <= 5; i++ {
		r, o := mkReq(1, 10, int64(i), true)
		calls = append(calls, queueAppend(t, bg, fx.a, r, o))
	}
	release()
	for _, c := range calls {
		c.wait(t)
	}
	hist := func(h prometheus.Histogram) (uint64, float64) {
		var d dto.Metric
		if err := h.Write(&d); err != nil {
			t.Fatal(err)
		}
		return d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum()
	}
	if n, sum := hist(m.WriteAppends); n != 2 || sum != 6 {
		t.Errorf("appends per write: %d writes, %v appends; want 2 writes of 6", n, sum)
	}
	if n, sum := hist(m.FsyncAppends); n != 1 || sum != 6 {
		t.Errorf("appends per fsync: %d fsyncs, %v appends; want 1 of 6", n, sum)
	}
	if n, sum := hist(m.QueueDepth); n != 6 || sum != 4+3+2+1+0 {
		t.Errorf("queue depth: %d samples summing %v; want 6 summing 10", n, sum)
	}
	if n, sum := hist(m.WriteBytes); n != 2 || int(sum) != len(fx.f.data) {
		t.Errorf("write bytes: %d writes of %v bytes; want 2 of %d", n, sum, len(fx.f.data))
	}
	if n, _ := hist(m.FsyncSeconds); n != 1 {
		t.Errorf("fsync latency: %d samples, want 1", n)
	}
}

func TestAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count is noisy under -short runs")
	}
	fx := newFixture(t, func(c *Config) { c.Fsync = FsyncNever })
	req, _ := mkReq(1, 100, 0, false)
	bg := context.Background()
	allocs := testing.AllocsPerRun(2000, func() {
		if _, err := fx.a.Append(bg, req); err != nil {
			t.Fatal(err)
		}
	})
	// The fake log's own slices grow by doubling (amortized to ~0); the
	// acceptor must add nothing per append (pooled waiters and channels).
	if allocs >= 1 {
		t.Fatalf("%.2f allocations per append, want none", allocs)
	}
	t.Logf("%.2f allocations per append (fake log included)", allocs)
}

func TestEnqueueThenWait(t *testing.T) {
	fx := newFixture(t, nil)
	entered, release := fx.gateAppends()
	bg := context.Background()
	var pend []Pending
	var calls []*call
	for i := 0; i < 4; i++ {
		r, o := mkReq(i+1, 10, int64(i), i%2 == 0)
		p, err := fx.a.Enqueue(bg, r)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			expect(t, entered, "append") // held: the rest queue behind it
		}
		pend = append(pend, p)
		calls = append(calls, &call{req: r, orig: o})
	}
	release()
	for i, p := range pend {
		calls[i].res, calls[i].err = p.Wait(bg)
	}
	checkData(t, fx.f.data, calls...) // offsets in Enqueue order
	_, batches := appendOps(fx.f.ops)
	if fmt.Sprint(batches) != "[1 3]" {
		t.Fatalf("batches per write %v, want [1 3] (the queued three coalesced)", batches)
	}
	if _, err := (Pending{}).Wait(bg); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("Wait on a zero Pending: %v, want ErrBadRequest", err)
	}
}

// TestWriteDuringFsyncWaitsForTheNextOne checks the overlap of writes and
// fsyncs under load: once appends arrive during an fsync, the next fsync
// runs on the sync goroutine and the acceptor keeps writing new appends,
// but an acks=all append written after the fsync started is released
// (and the high watermark moved past it) only by a later fsync.
func TestWriteDuringFsyncWaitsForTheNextOne(t *testing.T) {
	fx := newFixture(t, nil)
	entered, gate := fx.gateSyncs()
	ctx := context.Background()

	// Load: an append queued while the (inline) fsync of the first one
	// is held switches the acceptor to overlapping fsyncs.
	rw, ow := mkReq(1, 100, 9, true)
	cw := goAppend(ctx, fx.a, rw, ow)
	expect(t, entered, "append")
	expect(t, entered, "sync")
	r0, o0 := mkReq(2, 100, 0, true)
	c0 := goAppend(ctx, fx.a, r0, o0)
	waitFor(t, func() bool { return queueLen(fx.a) == 1 }, "the second append to be queued")
	gate <- struct{}{}
	cw.wait(t)
	expect(t, entered, "append")
	expect(t, entered, "sync") // the fsync covering c0 has started on the sync goroutine and is held

	r1, o1 := mkReq(3, 100, 1, true)
	c1 := goAppend(ctx, fx.a, r1, o1)
	expect(t, entered, "append") // written while the first fsync is held
	waitFor(t, func() bool {
		ops, _, _ := fx.f.snapshot()
		return countOps(ops, "append") == 3
	}, "the next append to be written while the fsync runs")
	if c0.returned() || c1.returned() {
		t.Fatal("an acks=all append was released before any fsync finished")
	}

	gate <- struct{}{} // the first fsync completes
	c0.wait(t)
	if c0.err != nil || c0.res.BaseOffset != 1 {
		t.Fatalf("first append: %+v, %v", c0.res, c0.err)
	}
	if hw := fx.a.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d after the first fsync, want 3 (the second append is not yet durable)", hw)
	}
	if c1.returned() {
		t.Fatal("an append written during the first fsync was released by it")
	}
	expect(t, entered, "sync") // the next fsync covers it
	gate <- struct{}{}
	c1.wait(t)
	if c1.err != nil || c1.res.BaseOffset != 3 {
		t.Fatalf("second append: %+v, %v", c1.res, c1.err)
	}
	if hw := fx.a.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d, want 6", hw)
	}
	_, data, _ := fx.f.snapshot()
	checkData(t, data, cw, c0, c1)
}

// TestLoneAppendsSyncInline checks that appends arriving one at a time
// (a lone synchronous producer) are fsynced on the run goroutine itself,
// with no hand-off to the sync goroutine, and that the acceptor switches
// to overlapped fsyncs once appends arrive during one and back once the
// load is gone.
func TestLoneAppendsSyncInline(t *testing.T) {
	fx := newFixture(t, nil)
	ctx := context.Background()
	var calls []*call
	for i := range 5 {
		r, o := mkReq(1, 50, int64(i), true)
		c := goAppend(ctx, fx.a, r, o).wait(t)
		if c.err != nil || c.res.BaseOffset != int64(i) {
			t.Fatalf("append %d: %+v, %v", i, c.res, c.err)
		}
		calls = append(calls, c)
	}
	ops, data, _ := fx.f.snapshot()
	checkData(t, data, calls...)
	var writer uint64
	syncs := 0
	for _, o := range ops {
		switch {
		case o.kind == "append" && writer == 0:
			writer = o.g
		case o.kind == "append" && o.g != writer:
			t.Fatalf("appends written by goroutines %d and %d", writer, o.g)
		case o.kind == "sync" && writer != 0:
			syncs++
			if o.g != writer {
				t.Fatalf("a lone append was fsynced on goroutine %d, not on the run goroutine %d", o.g, writer)
			}
		}
	}
	if syncs != 5 {
		t.Fatalf("%d fsyncs after 5 lone acks=all appends, want 5", syncs)
	}

	// Load: an append queued during an inline fsync makes the next
	// fsync run on the sync goroutine.
	entered, gate := fx.gateSyncs()
	r5, o5 := mkReq(1, 50, 5, true)
	c5 := goAppend(ctx, fx.a, r5, o5)
	expect(t, entered, "append")
	expect(t, entered, "sync")
	r6, o6 := mkReq(1, 50, 6, true)
	c6 := goAppend(ctx, fx.a, r6, o6)
	waitFor(t, func() bool { return queueLen(fx.a) == 1 }, "an append to be queued during the fsync")
	gate <- struct{}{}
	c5.wait(t)
	expect(t, entered, "append")
	expect(t, entered, "sync")
	gate <- struct{}{}
	c6.wait(t)
	ops, _, _ = fx.f.snapshot()
	if last := ops[len(ops)-1]; last.kind != "sync" || last.g == writer {
		t.Fatalf("the fsync after an append queued during the previous one ran on goroutine %d (run goroutine %d), want the sync goroutine", last.g, writer)
	}
	// Nothing arrived during that fsync: the next lone append syncs inline again.
	fx.f.set(func(f *fakeLog) { f.syncGate, f.entered = nil, nil })
	r7, o7 := mkReq(1, 50, 7, true)
	if c := goAppend(ctx, fx.a, r7, o7).wait(t); c.err != nil || c.res.BaseOffset != 7 {
		t.Fatalf("append after the load: %+v, %v", c.res, c.err)
	}
	ops, _, _ = fx.f.snapshot()
	if last := ops[len(ops)-1]; last.kind != "sync" || last.g != writer {
		t.Fatalf("a lone append after the load was fsynced on goroutine %d, want the run goroutine %d", last.g, writer)
	}
}

// TestSharedSyncSlots: acceptors sharing Config.Syncs run at most
// cap(Syncs) fsyncs at once; one waiting for a slot syncs once a slot
// frees.
func TestSharedSyncSlots(t *testing.T) {
	slots := make(chan struct{}, 1)
	withSlots := func(c *Config) { c.Syncs = slots }
	fx1, fx2 := newFixture(t, withSlots), newFixture(t, withSlots)
	entered1, gate1 := fx1.gateSyncs()
	entered2, gate2 := fx2.gateSyncs()
	ctx := context.Background()

	r1, o1 := mkReq(1, 50, 1, true)
	c1 := goAppend(ctx, fx1.a, r1, o1)
	expect(t, entered1, "append")
	expect(t, entered1, "sync") // holds the only slot
	r2, o2 := mkReq(1, 50, 2, true)
	c2 := goAppend(ctx, fx2.a, r2, o2)
	expect(t, entered2, "append")
	select {
	case got := <-entered2:
		t.Fatalf("second partition's %q entered while the only sync slot was held", got)
	default:
	}
	gate1 <- struct{}{}
	c1.wait(t)
	expect(t, entered2, "sync") // the slot came free
	gate2 <- struct{}{}
	c2.wait(t)
	if c1.err != nil || c2.err != nil {
		t.Fatalf("appends failed: %v, %v", c1.err, c2.err)
	}
	if len(slots) != 0 {
		t.Fatalf("%d sync slots still held after both fsyncs", len(slots))
	}
}

// TestCoalescingGrowsBuffer: a cycle starts in a small buffer and moves
// its bytes to a full-size one when its appends outgrow it, with no write
// in between: forty ~5 KiB appends (about 200 KiB) coalesce into one
// write, byte for byte.
func TestCoalescingGrowsBuffer(t *testing.T) {
	fx := newFixture(t, func(c *Config) { c.BufferSize = 256 << 10 })
	entered, release := fx.gateAppends()
	ctx := context.Background()
	r0, o0 := mkReq(1, 1000, 0, true)
	calls := []*call{goAppend(ctx, fx.a, r0, o0)}
	expect(t, entered, "append")
	total := 0
	for i := range 40 {
		r, o := mkReq(2, 2500, int64(i+1), true)
		total += len(r.Batches)
		calls = append(calls, queueAppend(t, ctx, fx.a, r, o))
	}
	if total <= smallBufSize {
		t.Fatalf("the appends hold %d bytes: they must outgrow the %d-byte small buffer", total, smallBufSize)
	}
	release()
	for _, c := range calls {
		c.wait(t)
	}
	ops, data, _ := fx.f.snapshot()
	checkData(t, data, calls...)
	if _, batches := appendOps(ops); fmt.Sprint(batches) != "[1 40]" {
		t.Fatalf("batches per write = %v, want [1 40] (the grown buffer written once)", batches)
	}
}

// TestQueueGrowsInOrder checks the queue's growth on demand: it starts
// with a few slots, grows (up to QueueSize) while the run goroutine is
// held in a write, and the appends queued across the growths are written
// in the order they were queued; a queue at QueueSize blocks the next
// append until there is room.
func TestQueueGrowsInOrder(t *testing.T) {
	const max = 300
	fx := newFixture(t, func(c *Config) { c.QueueSize = max })
	if q := fx.a.queue.Load(); q != nil {
		t.Fatalf("an acceptor never appended to has a queue of %d slots, want none", cap(*q))
	}
	fx.a.ensureRun() // as the first Enqueue does
	if got := cap(*fx.a.queue.Load()); got != initialQueue {
		t.Fatalf("a started acceptor's queue has %d slots, want %d", got, initialQueue)
	}
	entered, release := fx.gateAppends()
	ctx := context.Background()
	r0, _ := mkReq(1, 10, 0, false)
	first, err := fx.a.Enqueue(ctx, r0)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, entered, "append") // the run goroutine holds the first append
	var ps []Pending
	for i := range max {
		r, _ := mkReq(1, 10, int64(i+1), false)
		p, err := fx.a.Enqueue(ctx, r)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		ps = append(ps, p)
	}
	if got := cap(*fx.a.queue.Load()); got != max {
		t.Fatalf("after %d queued appends the queue has %d slots, want %d", max, got, max)
	}
	blocked, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := fx.a.Enqueue(blocked, r0); err != context.DeadlineExceeded {
		t.Fatalf("an append to a full queue at QueueSize: %v, want it to wait until its context ends", err)
	}
	release()
	if _, err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.BaseOffset != int64(i+1) {
			t.Fatalf("append %d written at offset %d, want %d: the queue's growth reordered appends", i, res.BaseOffset, i+1)
		}
	}
}

// TestCloseLeavingSync: CloseLeavingSync writes what is queued but leaves
// the log's last fsync to its caller when no append waits on it, and
// still fsyncs for an append that does.
func TestCloseLeavingSync(t *testing.T) {
	t.Run("nothing waits", func(t *testing.T) {
		fx := newFixture(t, func(c *Config) { c.Fsync = FsyncNever })
		r, o := mkReq(5, 10, 1, true)
		c := goAppend(context.Background(), fx.a, r, o).wait(t)
		if err := fx.a.CloseLeavingSync(); err != nil {
			t.Fatal(err)
		}
		checkData(t, fx.f.data, c)
		ops, _, synced := fx.f.snapshot()
		if n := countOps(ops, "sync"); n != 1 {
			t.Fatalf("%d syncs, want Start's only", n)
		}
		if synced == len(fx.f.data) {
			t.Fatal("the appended bytes were fsynced: nothing was left to the caller")
		}
	})
	t.Run("an append waits", func(t *testing.T) {
		fx := newFixture(t, nil) // FsyncAlways
		entered, gate := fx.gateSyncs()
		r, o := mkReq(5, 10, 1, true)
		c := goAppend(context.Background(), fx.a, r, o)
		expect(t, entered, "append")
		expect(t, entered, "sync")
		closed := make(chan error, 1)
		go func() { closed <- fx.a.CloseLeavingSync() }()
		gate <- struct{}{}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		c.wait(t)
		checkData(t, fx.f.data, c)
		if _, _, synced := fx.f.snapshot(); synced != len(fx.f.data) {
			t.Fatalf("an acknowledged append was left unsynced (%d of %d bytes)", synced, len(fx.f.data))
		}
	})
}

// TestEmptyLogStartsNoGoroutine: an acceptor of a log that holds nothing
// starts no goroutine and no ticker, and makes no channel or queue, until its
// first append, and closes without one, as often as it is closed.
func TestEmptyLogStartsNoGoroutine(t *testing.T) {
	mt := newManualTicker()
	cfg := testConfig(mt)
	idle := start(newFake(t), cfg)
	mt.mu.Lock()
	tickers := len(mt.chans)
	mt.mu.Unlock()
	if tickers != 0 || idle.running.Load() || idle.ch.Load() != nil || idle.queue.Load() != nil {
		t.Fatalf("before any append: %d tickers, running %v, channels %v, queue %v; want none",
			tickers, idle.running.Load(), idle.ch.Load() != nil, idle.queue.Load() != nil)
	}
	idle.kickRun() // nothing to kick
	hw := idle.HWChanged()
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idle.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case <-hw:
	default:
		t.Fatal("HWChanged not closed by Close")
	}
	r, _ := mkReq(1, 10, 0, true)
	if _, err := idle.Append(context.Background(), r); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v, want ErrClosed", err)
	}
	if idle.running.Load() || idle.ch.Load() != nil {
		t.Fatal("an append after Close started the run goroutine")
	}

	used := start(newFake(t), cfg)
	defer used.Close()
	if _, err := used.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mt.mu.Lock()
	tickers = len(mt.chans)
	mt.mu.Unlock()
	if tickers == 0 || !used.running.Load() || used.ch.Load() == nil {
		t.Fatalf("after an append: %d tickers, running %v, channels %v", tickers, used.running.Load(), used.ch.Load() != nil)
	}
}
