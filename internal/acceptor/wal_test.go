package acceptor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// walRoot holds the WAL and the partition logs in the crash tests.
const walRoot = "/data"

// walPartDir is partition p's log directory under root.
func walPartDir(root string, p int) string { return fmt.Sprintf("%s/p%d", root, p) }

// walKey is partition p's WAL key.
func walKey(p int) wal.Key { return wal.Key{Topic: [16]byte{1, 2, 3}, Partition: int32(p)} }

// walWorkload is a multi-partition run: its acknowledged appends and the
// high watermark each partition published, per partition.
type walWorkload struct {
	acks     [][]acked
	hw       []int64
	firstErr error
}

// multiSpec is append i of the multi-partition workload: to partition
// i%parts, small (so that cycles go to the WAL) and now and then larger
// than the WAL threshold (a direct fsync of the segment).
func multiSpec(i int) spec {
	s := spec{records: 1 + i%3, valueSize: 50 + (i*131)%700, durable: i%5 != 0, seed: byte(i)}
	if i%23 == 0 {
		s.valueSize = 3000 // with the tests' 4 KiB threshold: a direct fsync
	}
	return s
}

// walWriteBehind is the partition logs' storage.Config.WriteBehind in
// the WAL tests; eachWriteBehind sets it.
var walWriteBehind int

// walScfg lays partition logs out in small segments, so that the
// workload rolls them, with no zeros ahead (the WAL makes them useless),
// and a write-behind tail of walWriteBehind bytes.
func walScfg() storage.Config {
	c := crashStorage
	c.Preallocate = -1
	c.WriteBehind = walWriteBehind
	return c
}

// eachWriteBehind runs f twice: with partition logs that write every
// append to their files, and with logs that keep their newest bytes in a
// write-behind tail, as the broker's do when the WAL is on (2 KiB here,
// so that the workloads flush tails as well as sync them).
func eachWriteBehind(t *testing.T, f func(t *testing.T)) {
	for _, wb := range []int{0, 2 << 10} {
		t.Run(fmt.Sprintf("write-behind=%d", wb), func(t *testing.T) {
			walWriteBehind = wb
			defer func() { walWriteBehind = 0 }()
			f(t)
		})
	}
}

// openWALParts opens the WAL and the logs of parts partitions in fs,
// replays the WAL into them (as the broker does at start) and starts
// their acceptors; cfg gets each partition's WAL handle.
func openWALParts(fs vfs.FS, root string, parts int, cfg Config) (*wal.WAL, []*storage.Log, []*Acceptor, []wal.Applied, error) {
	w, rp, err := wal.Open(wal.Options{FS: fs, Dir: root + "/wal", SegmentBytes: 64 << 10, MaxBytes: 128 << 10})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var logs []*storage.Log
	var applied []wal.Applied
	fail := func(err error) (*wal.WAL, []*storage.Log, []*Acceptor, []wal.Applied, error) {
		for _, l := range logs {
			l.Close()
		}
		w.Close()
		return nil, nil, nil, nil, err
	}
	for p := range parts {
		scfg := walScfg()
		if parts == 1 {
			// A lone partition fsyncs its own segment (wal.Handle.Alone)
			// and writes zeros ahead of it.
			scfg = crashStorage
			scfg.WriteBehind = walWriteBehind
		}
		l, err := storage.Open(fs, walPartDir(root, p), scfg)
		if err != nil {
			return fail(err)
		}
		logs = append(logs, l)
		ap, err := rp.Apply(walKey(p), l)
		if err != nil {
			return fail(fmt.Errorf("replay partition %d: %w", p, err))
		}
		if err := l.Sync(); err != nil {
			return fail(err)
		}
		applied = append(applied, ap)
	}
	if err := rp.Done(); err != nil {
		return fail(err)
	}
	var accs []*Acceptor
	for p, l := range logs {
		c := cfg
		c.WAL = w.For(walKey(p))
		accs = append(accs, Start(l, c))
	}
	return w, logs, accs, applied, nil
}

// runWALWorkload appends n appends over parts partitions sharing a WAL in
// fs, from workers goroutines, then closes everything.
func runWALWorkload(t *testing.T, fs vfs.FS, parts, n, workers int, cfg Config) walWorkload {
	t.Helper()
	res := walWorkload{acks: make([][]acked, parts), hw: make([]int64, parts)}
	w, logs, accs, _, err := openWALParts(fs, walRoot, parts, cfg)
	if err != nil {
		res.firstErr = err
		return res
	}
	// Each run goroutine waits in its select before the first append,
	// so that the first append to each partition is handled inline:
	// the workload takes that path however loaded the machine is.
	for _, a := range accs {
		waitRunIdle(a)
	}
	var mu sync.Mutex // guards res
	idx := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				p := i % parts
				orig := multiSpec(i).bytes(i)
				r, err := accs[p].Append(context.Background(), &Request{Batches: append([]byte(nil), orig...), Durable: multiSpec(i).durable})
				mu.Lock()
				if err != nil {
					if res.firstErr == nil {
						res.firstErr = err
					}
				} else {
					res.acks[p] = append(res.acks[p], acked{i: i, base: r.BaseOffset, orig: orig, durable: multiSpec(i).durable})
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		idx <- i
	}
	close(idx)
	wg.Wait()
	for p, a := range accs {
		res.hw[p] = a.HighWatermark()
		if err := a.Close(); err != nil && res.firstErr == nil {
			res.firstErr = err
		}
		if err := a.Err(); err != nil && res.firstErr == nil {
			res.firstErr = err
		}
		if err := logs[p].Close(); err != nil && res.firstErr == nil {
			res.firstErr = err
		}
	}
	w.Close()
	return res
}

// recoverWAL replays the WAL in fs into every partition log (as a broker
// start does) and then checks each partition as verifyRecovered does. It
// returns the batches the replay appended.
func recoverWAL(t *testing.T, fs vfs.FS, root string, parts int, res walWorkload) int {
	t.Helper()
	w, logs, accs, applied, err := openWALParts(fs, root, parts, Config{RetentionCheck: -1})
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	for p := range accs {
		accs[p].Close()
		logs[p].Close()
	}
	w.Close()
	n := 0
	for p := range parts {
		n += applied[p].Batches
		checkAckOrder(t, res.acks[p])
		verifyRecovered(t, fs, walPartDir(root, p), res.acks[p], res.hw[p])
	}
	return n
}

// walCfg is the acceptor configuration of the WAL crash tests: a small
// WAL threshold, so that some cycles fsync their segment directly.
var walCfg = Config{BufferSize: 8 << 10, QueueSize: 64, RetentionCheck: -1, WALMaxCycle: 4 << 10}

// TestWALCrashAtEveryBoundary runs a multi-partition workload over a
// shared WAL once to count its filesystem operations, then again with the
// machine stopping at each mutating operation in turn (every later
// operation fails with EIO), crashes (dropping or tearing unsynced bytes)
// and recovers as a broker start does: every append acknowledged as
// durable is in its partition byte for byte, offsets are contiguous, and
// nothing below a published high watermark is missing.
func TestWALCrashAtEveryBoundary(t *testing.T) {
	eachWriteBehind(t, func(t *testing.T) { walCrashAtEveryBoundary(t, 4, 120) })
}

// TestWALAloneCrashAtEveryBoundary is TestWALCrashAtEveryBoundary with
// one partition: after its first WAL round it writes alone
// (wal.Handle.Alone), fsyncs its own segment and writes zeros ahead of
// it, so the crash points cut those fsyncs and preallocations too.
func TestWALAloneCrashAtEveryBoundary(t *testing.T) {
	eachWriteBehind(t, func(t *testing.T) { walCrashAtEveryBoundary(t, 1, 120) })
}

func walCrashAtEveryBoundary(t *testing.T, parts, n int) {
	fs := vfs.NewMem()
	clean := walCfg
	clean.Metrics = NewMetrics(nil)
	res := runWALWorkload(t, fs, parts, n, 6, clean)
	if res.firstErr != nil {
		t.Fatalf("clean run: %v", res.firstErr)
	}
	// The workload takes both paths the crash points then cut: appends
	// handled inline (their WAL syncs ended by the WAL's flusher) and
	// appends queued to the partitions' goroutines.
	var d dto.Metric
	if err := clean.Metrics.Inline.Write(&d); err != nil {
		t.Fatal(err)
	}
	if inl := int(d.GetCounter().GetValue()); inl == 0 || inl == n {
		t.Fatalf("%d of %d appends inline in the clean run; the crash points would miss a path", inl, n)
	}
	got := 0
	for _, a := range res.acks {
		got += len(a)
	}
	if got != n {
		t.Fatalf("clean run acknowledged %d of %d", got, n)
	}
	total := fs.Seq()
	recoverWAL(t, fs, walRoot, parts, res)
	step := int64(1)
	if testing.Short() {
		step = 7
	}
	replayed := 0
	defer func() { t.Logf("replays appended %d batches", replayed) }()
	for k := int64(1); k <= total+total/8+1; k += step {
		fs := vfs.NewMem()
		fs.Inject(vfs.FailFromSeq(k, syscall.EIO))
		res := runWALWorkload(t, fs, parts, n, 6, walCfg)
		if res.firstErr != nil && !errors.Is(res.firstErr, syscall.EIO) {
			t.Fatalf("stop at op %d: error %v does not say EIO", k, res.firstErr)
		}
		tear := k%2 == 0
		crashed := fs.CrashClone(vfs.CrashOptions{Tear: tear, Rand: rand.New(rand.NewPCG(uint64(k), 3))})
		t.Run(fmt.Sprintf("stop=%d/tear=%v", k, tear), func(t *testing.T) {
			replayed += recoverWAL(t, crashed, walRoot, parts, res)
		})
	}
	t.Logf("%d crash points", total+total/8+1)
}

// TestWALCrashMidFlight crashes the machine at random moments while
// appends to many partitions are in flight: every append acknowledged
// before the crash instant survives, and some of them survive only
// because the WAL held them (the replay appended batches).
func TestWALCrashMidFlight(t *testing.T) { eachWriteBehind(t, testWALCrashMidFlight) }

func testWALCrashMidFlight(t *testing.T) {
	const parts, n = 16, 1600
	fs := vfs.NewMem()
	w, logs, accs, _, err := openWALParts(fs, walRoot, parts, walCfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards acks
	acks := make([][]acked, parts)
	idx := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				p := i % parts
				orig := multiSpec(i).bytes(i)
				r, err := accs[p].Append(context.Background(), &Request{Batches: append([]byte(nil), orig...), Durable: multiSpec(i).durable})
				if err != nil {
					t.Errorf("append %d: %v", i, err)
					continue
				}
				mu.Lock()
				acks[p] = append(acks[p], acked{i: i, base: r.BaseOffset, orig: orig, durable: multiSpec(i).durable})
				mu.Unlock()
			}
		}()
	}
	type crash struct {
		fs  *vfs.MemFS
		res walWorkload
	}
	var crashes []crash
	for i := range n {
		idx <- i
		if i%200 == 199 {
			c := crash{res: walWorkload{acks: make([][]acked, parts), hw: make([]int64, parts)}}
			mu.Lock()
			for p := range parts {
				c.res.acks[p] = append([]acked(nil), acks[p]...)
			}
			mu.Unlock()
			for p := range parts {
				c.res.hw[p] = accs[p].HighWatermark()
			}
			c.fs = fs.CrashClone(vfs.CrashOptions{Tear: i%400 == 199, Rand: rand.New(rand.NewPCG(9, uint64(i)))})
			crashes = append(crashes, c)
		}
	}
	close(idx)
	wg.Wait()
	for p := range parts {
		if err := accs[p].Close(); err != nil {
			t.Fatal(err)
		}
		if err := logs[p].Close(); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	replayed := 0
	for i, c := range crashes {
		t.Run(fmt.Sprintf("crash=%d", i), func(t *testing.T) {
			replayed += recoverWAL(t, c.fs, walRoot, parts, c.res)
		})
	}
	if replayed == 0 {
		t.Error("no crash needed the WAL: the test does not exercise it")
	}
}

// TestWALHeal fails one filesystem operation (a WAL or segment write or
// fsync) in the middle of a multi-partition load: the partitions it hit
// heal (refilling from the WAL what their log lost, writing a truncate
// entry), appends go on, and after a crash every acknowledged append is
// there with contiguous offsets.
func TestWALHeal(t *testing.T) { eachWriteBehind(t, testWALHeal) }

func testWALHeal(t *testing.T) {
	healed := 0 // appends that failed and were retried after a heal
	defer func() {
		if healed == 0 && !t.Failed() {
			t.Error("no injected failure failed an append: the heal path was not exercised")
		}
	}()
	for _, tt := range []struct {
		kind vfs.OpKind
		n    int64
	}{
		{vfs.OpWrite, 40}, {vfs.OpWrite, 200}, {vfs.OpSync, 20}, {vfs.OpSync, 60}, {vfs.OpSync, 150},
	} {
		t.Run(fmt.Sprintf("%v#%d", tt.kind, tt.n), func(t *testing.T) {
			const parts, n = 4, 600
			fs := vfs.NewMem()
			fs.Inject(vfs.FailNth(tt.kind, tt.n, syscall.EIO, false))
			cfg := walCfg
			cfg.HealBackoff, cfg.HealBackoffMax = time.Millisecond, time.Millisecond
			w, logs, accs, _, err := openWALParts(fs, walRoot, parts, cfg)
			if err != nil {
				t.Fatal(err)
			}
			res := walWorkload{acks: make([][]acked, parts), hw: make([]int64, parts)}
			failures := 0
			for i := range n {
				p := i % parts
				orig := multiSpec(i).bytes(i)
				for {
					r, err := accs[p].Append(context.Background(), &Request{Batches: append([]byte(nil), orig...), Durable: true})
					if err == nil {
						res.acks[p] = append(res.acks[p], acked{i: i, base: r.BaseOffset, orig: orig, durable: true})
						break
					}
					if !errors.Is(err, syscall.EIO) {
						t.Fatalf("append %d: %v", i, err)
					}
					failures++
					// Wait for the partition to heal, then retry.
					for {
						ch := accs[p].HealthChanged()
						if accs[p].Err() == nil {
							break
						}
						select {
						case <-ch:
						case <-time.After(time.Minute):
							t.Fatalf("partition %d did not heal: %v", p, accs[p].Err())
						}
					}
				}
			}
			healed += failures
			t.Logf("%d appends failed and were retried after a heal", failures)
			for p := range parts {
				res.hw[p] = accs[p].HighWatermark()
			}
			crashed := fs.CrashClone(vfs.CrashOptions{})
			for p := range parts {
				accs[p].Close()
				logs[p].Close()
			}
			w.Close()
			recoverWAL(t, crashed, walRoot, parts, res)
		})
	}
}

// TestWALInline: appends spread over partitions sharing a WAL, enqueued
// by one goroutine request after request (as a produce request's are),
// are handled on the caller's goroutine while the partitions' run
// goroutines wait, keep their order per partition, and are durable when
// released: a machine crash right after loses none of them.
func TestWALInline(t *testing.T) { eachWriteBehind(t, testWALInline) }

func testWALInline(t *testing.T) {
	const parts, requests, perPart = 8, 40, 3
	fs := vfs.NewMem()
	m := NewMetrics(nil)
	cfg := walCfg
	cfg.Metrics = m
	w, logs, accs, _, err := openWALParts(fs, walRoot, parts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := walWorkload{acks: make([][]acked, parts), hw: make([]int64, parts)}
	next := make([]int64, parts) // the offset each partition's next append must get
	i := 0
	for range requests {
		type queued struct {
			p, i int
			orig []byte
			pend Pending
		}
		var qs []queued
		for p := range parts {
			for range perPart { // several appends to one partition in one request: inline, then queued behind it
				s := spec{records: 1 + i%3, valueSize: 40 + i%90, durable: true, seed: byte(i)}
				orig := s.bytes(i)
				pend, err := accs[p].Enqueue(context.Background(), &Request{Batches: append([]byte(nil), orig...), Durable: true})
				if err != nil {
					t.Fatalf("enqueue %d: %v", i, err)
				}
				qs = append(qs, queued{p, i, orig, pend})
				i++
			}
		}
		for _, q := range qs {
			r, err := q.pend.Wait(context.Background())
			if err != nil {
				t.Fatalf("append %d: %v", q.i, err)
			}
			if r.BaseOffset != next[q.p] {
				t.Fatalf("append %d to partition %d got offset %d, want %d (enqueue order)", q.i, q.p, r.BaseOffset, next[q.p])
			}
			next[q.p] += int64(1 + q.i%3)
			if hw := accs[q.p].HighWatermark(); hw < next[q.p] {
				t.Fatalf("append %d released with the high watermark at %d, below its end %d", q.i, hw, next[q.p])
			}
			res.acks[q.p] = append(res.acks[q.p], acked{i: q.i, base: r.BaseOffset, orig: q.orig, durable: true})
		}
	}
	var d dto.Metric
	if err := m.Inline.Write(&d); err != nil {
		t.Fatal(err)
	}
	if n := d.GetCounter().GetValue(); n == 0 {
		t.Fatal("no append was handled inline")
	} else {
		t.Logf("%v of %d appends handled inline", n, i)
	}
	for p := range parts {
		res.hw[p] = accs[p].HighWatermark()
	}
	crashed := fs.CrashClone(vfs.CrashOptions{Tear: true, Rand: rand.New(rand.NewPCG(7, 7))})
	for p := range parts {
		accs[p].Close()
		logs[p].Close()
	}
	w.Close()
	if n := recoverWAL(t, crashed, walRoot, parts, res); n == 0 {
		t.Fatal("the replay appended nothing: the acknowledged appends were not durable in the WAL alone")
	}
}

// TestWALJoinsBufferedRound: a partition alone in the WAL's last round
// fsyncs its own segment, except while another key's entry waits in the
// WAL's buffer (a transaction's decision queued just before its marker):
// its append then joins the round that entry needs, one fsync for both.
func TestWALJoinsBufferedRound(t *testing.T) {
	fs := vfs.NewMem()
	w, logs, accs, _, err := openWALParts(fs, walRoot, 1, walCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer logs[0].Close()
	defer accs[0].Close()
	appendOne := func(i int) {
		t.Helper()
		s := spec{records: 1, valueSize: 40, durable: true, seed: byte(i)}
		pend, err := accs[0].Enqueue(context.Background(), &Request{Batches: s.bytes(i), Durable: true})
		if err == nil {
			_, err = pend.Wait(context.Background())
		}
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	appendOne(0) // the WAL's first round: this partition's entry alone
	if !w.For(walKey(0)).Alone() {
		t.Fatal("not alone after a round of its own entry only")
	}
	st := w.Stats()
	appendOne(1)
	if got := w.Stats(); got.Entries != st.Entries {
		t.Fatalf("a partition alone in the WAL wrote %d WAL entries; want its segment's fsync", got.Entries-st.Entries)
	}
	other := w.For(walKey(9))
	pos, err := other.Append(0, 1, spec{records: 1, valueSize: 40, seed: 9}.bytes(9))
	if err != nil {
		t.Fatal(err)
	}
	st = w.Stats()
	appendOne(2)
	if got := w.Stats(); got.Rounds != st.Rounds+1 || got.Entries != st.Entries+2 {
		t.Fatalf("append beside a buffered entry: %d rounds with %d entries; want 1 round carrying both", got.Rounds-st.Rounds, got.Entries-st.Entries)
	}
	if err := other.Sync(pos); err != nil {
		t.Fatal(err)
	}
	if got := w.Stats(); got.Rounds != st.Rounds+1 {
		t.Fatal("the buffered entry needed a round of its own")
	}
}

// TestNoZerosAheadUnderWAL: a partition whose appends become durable in
// WAL rounds writes no zeros ahead of its data, even after a checkpoint
// (its own segment's fsync): the zeros would only add a write and an
// fsync per checkpoint. A partition whose last fsync of appends was its
// segment's (alone in the WAL, or a large cycle) still writes them.
func TestNoZerosAheadUnderWAL(t *testing.T) {
	for _, tc := range []struct {
		name   string
		direct bool // the appends' fsync was the segment's
		want   int  // Preallocate calls
	}{
		{"appends-in-wal-rounds", false, 0},
		{"appends-fsynced-in-segment", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLog{t: t}
			a := &Acceptor{log: f, cfg: Config{Fsync: FsyncAlways, WAL: &wal.Handle{}}}
			r := &a.run
			r.a, r.cfg = a, &a.cfg
			r.written = 100 // appends written since the last fsync
			r.direct = tc.direct
			r.beginSync(false) // their fsync
			r.syncing, r.synced = false, r.syncTarget
			r.beginSync(true) // a checkpoint: the segment's fsync
			r.syncing, r.logSynced = false, r.syncTarget
			r.prepared = false // written since the last preparation
			r.idle()
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.prealloc != tc.want {
				t.Fatalf("Preallocate called %d times, want %d", f.prealloc, tc.want)
			}
		})
	}
}

// waitRunIdle returns once a's run goroutine has released runMu to wait
// in its select (start hands runMu to it; nothing else holds it before
// the first append).
func waitRunIdle(a *Acceptor) {
	for !a.runMu.TryLock() {
		runtime.Gosched()
	}
	a.runMu.Unlock()
}

// counterValue reads a Prometheus counter.
func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) int {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return int(d.GetCounter().GetValue())
}

// TestAloneDurableAppendsInline checks the lone producer's path: with
// one partition writing alone over a WAL, durable appends made one at a
// time with Request.SyncInline are written and fsynced on the caller's
// goroutine (appendSyncInline), each acknowledged with the high
// watermark past it, and a power cut after the last keeps every one.
// Appends without SyncInline never are: the caller decides.
func TestAloneDurableAppendsInline(t *testing.T) {
	fs := vfs.NewMem()
	cfg := walCfg
	cfg.Metrics = NewMetrics(nil)
	w, logs, accs, _, err := openWALParts(fs, walRoot, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := accs[0]
	const n = 40
	var res walWorkload
	res.acks = make([][]acked, 1)
	res.hw = make([]int64, 1)
	appendOne := func(i int, syncInline bool) {
		t.Helper()
		waitRunIdle(a)
		orig := spec{records: 1 + i%3, valueSize: 100, durable: true}.bytes(i)
		r, err := a.Append(context.Background(), &Request{Batches: append([]byte(nil), orig...), Durable: true, SyncInline: syncInline})
		if err != nil {
			t.Fatal(err)
		}
		if hw := a.HighWatermark(); hw <= r.BaseOffset {
			t.Fatalf("append %d acknowledged at %d with the high watermark at %d", i, r.BaseOffset, hw)
		}
		res.acks[0] = append(res.acks[0], acked{i: i, base: r.BaseOffset, orig: orig, durable: true})
	}
	for i := range n {
		appendOne(i, true)
	}
	// The first appends go through the WAL (inline too) until the
	// partition is alone; later ones are written and fsynced inline,
	// unless the run goroutine, kicked after one for its idle work (zeros
	// ahead), still holds runMu when the next arrives (then it takes it
	// from the queue): without appendSyncInline none is.
	inl := counterValue(t, cfg.Metrics.InlineSynced)
	if inl < n/2 {
		t.Fatalf("%d of %d lone appends written and fsynced on the caller's goroutine", inl, n)
	}
	for i := n; i < n+10; i++ {
		appendOne(i, false)
	}
	if got := counterValue(t, cfg.Metrics.InlineSynced); got != inl {
		t.Fatalf("%d appends without SyncInline were fsynced on the caller's goroutine", got-inl)
	}
	crashed := fs.CrashClone(vfs.CrashOptions{})
	res.hw[0] = a.HighWatermark()
	a.Close()
	logs[0].Close()
	w.Close()
	recoverWAL(t, crashed, walRoot, 1, res)
}

// TestDurableAppendsInlineWithoutWAL: without a WAL, durable appends
// made one at a time with Request.SyncInline are written and fsynced on
// the caller's goroutine too, and survive a power cut.
func TestDurableAppendsInlineWithoutWAL(t *testing.T) {
	fs := vfs.NewMem()
	l, err := storage.Open(fs, crashDir, crashStorage)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(nil)
	a := Start(l, Config{RetentionCheck: -1, Metrics: m})
	const n = 30
	var acks []acked
	for i := range n {
		waitRunIdle(a)
		orig := spec{records: 1 + i%3, valueSize: 100, durable: true}.bytes(i)
		r, err := a.Append(context.Background(), &Request{Batches: append([]byte(nil), orig...), Durable: true, SyncInline: true})
		if err != nil {
			t.Fatal(err)
		}
		if hw := a.HighWatermark(); hw <= r.BaseOffset {
			t.Fatalf("append %d acknowledged at %d with the high watermark at %d", i, r.BaseOffset, hw)
		}
		acks = append(acks, acked{i: i, base: r.BaseOffset, orig: orig, durable: true})
	}
	if inl := counterValue(t, m.InlineSynced); inl < n/2 {
		t.Fatalf("%d of %d appends written and fsynced on the caller's goroutine", inl, n)
	}
	crashed := fs.CrashClone(vfs.CrashOptions{})
	hw := a.HighWatermark()
	a.Close()
	l.Close()
	verifyRecovered(t, crashed, crashDir, acks, hw)
}

// TestLargeCycleOfNewLogInWAL: a cycle larger than WALMaxCycle is
// fsynced in the partition's segment directly, except while the log is
// a new one whose file is not made yet (storage.Log.Pending): that
// fsync would make the file and sync its directories in the
// acknowledgement's way, so the cycle goes to the WAL and the file
// stays unmade. Once the file is made, large cycles go direct again.
// A power cut keeps every acknowledged append either way.
func TestLargeCycleOfNewLogInWAL(t *testing.T) {
	fs := vfs.NewMem()
	w, _, err := wal.Open(wal.Options{FS: fs, Dir: walRoot + "/wal", SegmentBytes: 64 << 10, MaxBytes: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	scfg := walScfg()
	scfg.WriteBehind = 4 << 10 // as the broker's logs over the WAL; a new one keeps its first bytes in memory
	scfg.Pending = storage.NewPendingBudget(1 << 20)
	l, err := storage.Create(fs, walPartDir(walRoot, 0), scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := walCfg
	cfg.WAL = w.For(walKey(0))
	a := Start(l, cfg)
	defer a.Close()
	var res walWorkload
	res.acks = make([][]acked, 1)
	res.hw = make([]int64, 1)
	appendLarge := func(i int) (walEntries int64) {
		t.Helper()
		st := w.Stats()
		orig := spec{records: 8, valueSize: 1000, durable: true}.bytes(i) // twice WALMaxCycle
		if len(orig) <= cfg.WALMaxCycle {
			t.Fatalf("a %d-byte append is not a large cycle (WALMaxCycle %d)", len(orig), cfg.WALMaxCycle)
		}
		r, err := a.Append(context.Background(), &Request{Batches: append([]byte(nil), orig...), Durable: true})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		res.acks[0] = append(res.acks[0], acked{i: i, base: r.BaseOffset, orig: orig, durable: true})
		return w.Stats().Entries - st.Entries
	}
	for i := range 3 {
		if got := appendLarge(i); got != 1 {
			t.Fatalf("large append %d to a new log wrote %d WAL entries; want 1 (its segment's fsync would make the file)", i, got)
		}
		if !l.Pending() {
			t.Fatalf("large append %d to a new log made its file on the acknowledgement's path", i)
		}
	}
	if err := l.Sync(); err != nil { // makes the file, as a checkpoint does
		t.Fatal(err)
	}
	if l.Pending() {
		t.Fatal("the file is not made after a Sync")
	}
	if got := appendLarge(3); got != 0 {
		t.Fatalf("a large append to a made log wrote %d WAL entries; want its segment's fsync", got)
	}
	crashed := fs.CrashClone(vfs.CrashOptions{})
	res.hw[0] = a.HighWatermark()
	a.Close()
	l.Close()
	w.Close()
	recoverWAL(t, crashed, walRoot, 1, res)
}
