package kvlog

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// walSegBytes is small so that the workloads below fill several WAL
// segments: sealed segments make the log checkpoint (Behind).
const walSegBytes = 2048

// openWithWAL opens the shared WAL in "wal" and the log in "kv" over it,
// replaying first what the WAL holds for the log (as the broker does).
// replay false skips that step (to show what the log alone holds).
func openWithWAL(t *testing.T, fs vfs.FS, replay bool) (*Log, *wal.WAL, *model, error) {
	t.Helper()
	return openWithWALCompact(t, fs, replay, 8)
}

// openWithWALCompact is openWithWAL with the log's CompactMinRecords.
func openWithWALCompact(t *testing.T, fs vfs.FS, replay bool, compactMin int) (*Log, *wal.WAL, *model, error) {
	t.Helper()
	// Tiny segments, checkpoints at two sealed ones (MaxBytes), so that
	// segments fill and retire within the test.
	w, rp, err := wal.Open(wal.Options{FS: fs, Dir: "wal", SegmentBytes: walSegBytes, MaxBytes: 2 * walSegBytes})
	if err != nil {
		return nil, nil, nil, err
	}
	if replay {
		if _, err := ReplayWAL(fs, "kv", "kv", rp, nil); err != nil {
			w.Close()
			return nil, nil, nil, err
		}
	}
	if err := rp.Done(); err != nil {
		w.Close()
		return nil, nil, nil, err
	}
	md := &model{m: map[string]int{}}
	l, err := Open(Config{FS: fs, Dir: "kv", CompactMinRecords: compactMin, Fsync: acceptor.FsyncAlways, WAL: w, WALName: "kv"})
	if err != nil {
		w.Close()
		return nil, nil, nil, err
	}
	err = md.load(l)
	if err != nil {
		l.Close()
		w.Close()
		return nil, nil, nil, err
	}
	return l, w, md, nil
}

// walWorkload is workload going on past failed appends (so that a
// failure not sticky is followed by acknowledged writes), half of them
// through Enqueue.
func walWorkload(l *Log, md *model) (acked, tried map[string]int) {
	acked, tried, _ = walWorkloadN(l, md, 4)
	return acked, tried
}

// walWorkloadN is walWorkload over keys keys (60: one per write, so that
// no later write hides a lost one) that also counts the failed writes.
func walWorkloadN(l *Log, md *model, keys int) (acked, tried map[string]int, failed int) {
	acked, tried = map[string]int{}, map[string]int{}
	for i := 1; i <= 60; i++ {
		k := fmt.Sprintf("k%d", i%keys)
		tried[k] = i
		set := func(int64) {
			md.mu.Lock()
			md.m[k] = i
			md.mu.Unlock()
		}
		var err error
		if i%2 == 0 {
			err = l.Append([]Record{{Key: []byte(k), Value: []byte(strconv.Itoa(i))}}, set)
		} else {
			set(0) // published before it is queued, as Enqueue asks
			var wait func() error
			if wait, err = l.Enqueue([]Record{{Key: []byte(k), Value: []byte(strconv.Itoa(i))}}); err == nil {
				err = wait()
			}
		}
		if err == nil {
			acked[k] = i
		} else {
			failed++
		}
	}
	return acked, tried, failed
}

// checkRecovered asserts that every key holds its last acknowledged value
// or a later attempted one.
func checkRecovered(t *testing.T, what string, got map[string]int, acked, tried map[string]int) {
	t.Helper()
	for k, a := range acked {
		if v := got[k]; v < a || v > tried[k] || (v-a)%4 != 0 {
			t.Fatalf("%s: key %s recovered %d, acknowledged %d, last tried %d", what, k, v, a, tried[k])
		}
	}
}

// TestWALRecordsLiveOnlyInWAL: with the WAL, acknowledged records are
// durable in the WAL before the internal log's own fsync: after a crash
// the log alone has lost them, and the WAL's replay brings every one back.
func TestWALRecordsLiveOnlyInWAL(t *testing.T) {
	fs := vfs.NewMem()
	l, w, md, err := openWithWAL(t, fs, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		k := "k" + strconv.Itoa(i)
		if err := l.Append([]Record{{Key: []byte(k), Value: []byte(strconv.Itoa(i))}}, func(int64) { md.m[k] = i }); err != nil {
			t.Fatal(err)
		}
	}
	crashed := fs.CrashClone(vfs.CrashOptions{})
	l.Close()
	w.Close()

	bare, bw, bmd, err := openWithWAL(t, crashed.CrashClone(vfs.CrashOptions{}), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(bmd.m) != 0 {
		t.Fatalf("the internal log alone holds %v after the crash; want nothing (no fsync of its own yet)", bmd.m)
	}
	bare.Close()
	bw.Close()

	r, rw, rmd, err := openWithWAL(t, crashed, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	defer r.Close()
	if want := map[string]int{"k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5}; fmt.Sprint(rmd.m) != fmt.Sprint(want) {
		t.Fatalf("after replaying the WAL: %v, want %v", rmd.m, want)
	}
}

// TestWALCleanShutdown: a clean shutdown (the log closed, then the WAL
// retired, as the broker does) leaves every record in the internal log
// itself, pending batches included.
func TestWALCleanShutdown(t *testing.T) {
	fs := vfs.NewMem()
	l, w, md, err := openWithWALCompact(t, fs, true, 100000)
	if err != nil {
		t.Fatal(err)
	}
	acked, _, failed := walWorkloadN(l, md, 60)
	if failed > 0 {
		t.Fatalf("%d writes failed", failed)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Retire(); err != nil {
		t.Fatal(err)
	}
	r, rw, rmd, err := openWithWALCompact(t, fs, true, 100000)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	defer r.Close()
	if fmt.Sprint(rmd.m) != fmt.Sprint(acked) {
		t.Fatalf("after a clean shutdown: %v, want %v", rmd.m, acked)
	}
}

// TestWALCrashAtEveryBoundary crashes a log written through the WAL (and
// compacted several times, each compaction a new WAL key) at every
// mutating filesystem operation, before the log is closed: the records
// are in the WAL, in the internal log, or both. The reopened log holds,
// for every key, its last acknowledged value or a later attempted one.
func TestWALCrashAtEveryBoundary(t *testing.T) {
	fs := vfs.NewMem()
	l, w, md, err := openWithWAL(t, fs, true)
	if err != nil {
		t.Fatal(err)
	}
	acked, _ := walWorkload(l, md)
	if len(acked) != 4 || acked["k0"] != 60 {
		t.Fatalf("clean run: %v", acked)
	}
	if l.Generation() < 4 {
		t.Fatalf("the workload compacted only %d times", l.Generation()-1)
	}
	total := fs.Seq()
	l.Close()
	w.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	for n := int64(1); n <= total; n++ {
		for _, tear := range []bool{false, true} {
			fs := vfs.NewMem()
			fs.Inject(vfs.FailFromSeq(n, syscall.EIO))
			var acked, tried map[string]int
			var crashed *vfs.MemFS
			if l, w, md, err := openWithWAL(t, fs, true); err == nil {
				acked, tried = walWorkload(l, md)
				crashed = fs.CrashClone(vfs.CrashOptions{Tear: tear, Rand: rng})
				l.Close()
				w.Close()
			} else {
				crashed = fs.CrashClone(vfs.CrashOptions{Tear: tear, Rand: rng})
			}
			r, rw, rmd, err := openWithWAL(t, crashed, true)
			if err != nil {
				t.Fatalf("op %d tear %v: reopen: %v", n, tear, err)
			}
			checkRecovered(t, fmt.Sprintf("op %d tear %v", n, tear), rmd.m, acked, tried)
			r.Close()
			rw.Close()
		}
	}
}

// failNthIn fails the nth operation of kind k on a file whose name
// starts with prefix, once.
func failNthIn(k vfs.OpKind, prefix string, n int) func(vfs.Op) error {
	seen := 0 // the MemFS calls its injector under its own lock
	return func(op vfs.Op) error {
		if op.Kind == k && strings.HasPrefix(op.Name, prefix) {
			seen++
			if seen == n {
				return vfs.Errno(op, syscall.EIO)
			}
		}
		return nil
	}
}

// TestWALFailureThenCrash fails one write or fsync (not sticky) of the
// WAL's files or of the internal log's, lets the workload go on (a failed
// WAL round followed by good ones, a failed log write or fsync and the
// heal after it), then crashes before the log's own fsync: every
// acknowledged value survives. The log does not compact, so its records
// live in the WAL only.
func TestWALFailureThenCrash(t *testing.T) {
	for _, fb := range []int{flushBytes, 1} {
		t.Run(fmt.Sprintf("flush=%d", fb), func(t *testing.T) {
			defer func(was int) { flushBytes = was }(flushBytes)
			flushBytes = fb
			walFailureThenCrash(t)
		})
	}
}

func walFailureThenCrash(t *testing.T) {
	hit := 0
	for _, c := range []struct {
		kind   vfs.OpKind
		prefix string
	}{{vfs.OpWrite, "wal/"}, {vfs.OpSync, "wal/"}, {vfs.OpWrite, "kv/"}, {vfs.OpSync, "kv/"}} {
		for n := 1; n <= 40; n++ {
			what := fmt.Sprintf("%v %s #%d", c.kind, c.prefix, n)
			fs := vfs.NewMem()
			fs.Inject(failNthIn(c.kind, c.prefix, n))
			l, w, md, err := openWithWALCompact(t, fs, true, 1000)
			if err != nil {
				continue // the failure hit the opening
			}
			acked, tried, failed := walWorkloadN(l, md, 60)
			if failed > 0 {
				hit++
			}
			if failed > 2 {
				t.Errorf("%s: %d writes failed after a single failure; the log did not heal", what, failed)
			}
			crashed := fs.CrashClone(vfs.CrashOptions{})
			l.Close()
			w.Close()
			r, rw, rmd, err := openWithWALCompact(t, crashed, true, 1000)
			if err != nil {
				t.Fatalf("%s: reopen: %v", what, err)
			}
			checkRecovered(t, what, rmd.m, acked, tried)
			r.Close()
			rw.Close()
		}
	}
	if hit < 20 {
		t.Fatalf("only %d runs saw a failed write; the injection misses the workload", hit)
	}
}

// TestWALConcurrentEnqueues: many goroutines enqueue at once (their waits
// overlap, one WAL round serving several), one record per key, while one
// write or fsync of the WAL or of the log fails; after a crash every
// acknowledged record is there.
func TestWALConcurrentEnqueues(t *testing.T) {
	for _, fb := range []int{flushBytes, 1} {
		t.Run(fmt.Sprintf("flush=%d", fb), func(t *testing.T) {
			defer func(was int) { flushBytes = was }(flushBytes)
			flushBytes = fb
			walConcurrentEnqueues(t)
		})
	}
}

func walConcurrentEnqueues(t *testing.T) {
	type fault struct {
		kind   vfs.OpKind
		prefix string
		n      int
	}
	cases := []fault{{vfs.OpWrite, "none", 0}}
	for n := 2; n <= 12; n += 2 {
		cases = append(cases, fault{vfs.OpWrite, "wal/", n}, fault{vfs.OpSync, "wal/", n}, fault{vfs.OpWrite, "kv/", n})
	}
	for _, c := range cases {
		what := fmt.Sprintf("%v %s #%d", c.kind, c.prefix, c.n)
		fs := vfs.NewMem()
		fs.Inject(failNthIn(c.kind, c.prefix, c.n))
		l, w, md, err := openWithWALCompact(t, fs, true, 100000)
		if err != nil {
			continue
		}
		var wg sync.WaitGroup
		var mu sync.Mutex // guards acked and failed
		acked, failed := map[string]int{}, 0
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 1; i <= 20; i++ {
					k := fmt.Sprintf("g%d-%d", g, i)
					md.mu.Lock()
					md.m[k] = i
					md.mu.Unlock()
					wait, err := l.Enqueue([]Record{{Key: []byte(k), Value: []byte(strconv.Itoa(i))}})
					if err == nil {
						err = wait()
					}
					mu.Lock()
					if err == nil {
						acked[k] = i
					} else {
						failed++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if c.n == 0 && failed > 0 {
			t.Fatalf("%s: %d writes failed with no failure injected", what, failed)
		}
		crashed := fs.CrashClone(vfs.CrashOptions{})
		l.Close()
		w.Close()
		r, rw, rmd, err := openWithWALCompact(t, crashed, true, 100000)
		if err != nil {
			t.Fatalf("%s: reopen: %v", what, err)
		}
		for k, v := range acked {
			if rmd.m[k] != v {
				t.Fatalf("%s: key %s recovered %d, acknowledged %d (%d of 160 acknowledged)", what, k, rmd.m[k], v, len(acked))
			}
		}
		r.Close()
		rw.Close()
	}
}

// TestWALPositionsIncrease: with the WAL, the positions Append reports
// increase with the writes and never repeat, across compactions.
func TestWALPositionsIncrease(t *testing.T) {
	fs := vfs.NewMem()
	l, w, md, err := openWithWAL(t, fs, true)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer l.Close()
	last := int64(-1)
	for i := 1; i <= 60; i++ {
		k := fmt.Sprintf("k%d", i%4)
		err := l.Append([]Record{{Key: []byte(k), Value: []byte(strconv.Itoa(i))}}, func(pos int64) {
			if pos <= last {
				t.Errorf("write %d at position %d, after %d", i, pos, last)
			}
			last = pos
			md.mu.Lock()
			md.m[k] = i
			md.mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if l.Generation() < 4 {
		t.Fatalf("compacted only %d times", l.Generation()-1)
	}
}

// TestWALCheckpointFreesSegments: the log's records pin the WAL segments
// that hold them until its checkpoint (its own fsync) runs; then the WAL
// retires them.
func TestWALCheckpointFreesSegments(t *testing.T) {
	fs := vfs.NewMem()
	l, w, md, err := openWithWALCompact(t, fs, true, 100000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer l.Close()
	for i := 0; w.Size() < 5*walSegBytes; i++ {
		k := fmt.Sprintf("k%d", i)
		if err := l.Append([]Record{{Key: []byte(k), Value: []byte(strconv.Itoa(i))}}, func(int64) { md.m[k] = i }); err != nil {
			t.Fatal(err)
		}
		if i > 10000 {
			t.Fatalf("the WAL holds %d bytes after %d records", w.Size(), i)
		}
	}
	l.mu.RLock()
	ww := l.w
	l.mu.RUnlock()
	if !ww.h.Behind() {
		t.Fatal("the WAL holds sealed segments with the log's entries but does not ask for a checkpoint")
	}
	ww.checkpoint()
	if got := w.Size(); got > 2*walSegBytes {
		t.Fatalf("after the checkpoint the WAL holds %d bytes, want at most the active segment's %d", got, walSegBytes)
	}
}

// TestWALWriteMadeDurableByTick: a record written without waiting
// (Write) becomes durable at the checkpoint goroutine's next tick even if
// nothing else is written: a crash after it keeps the record.
func TestWALWriteMadeDurableByTick(t *testing.T) {
	fs := vfs.NewMem()
	l, w, md, err := openWithWALCompact(t, fs, true, 100000)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer l.Close()
	if err := l.Write([]Record{{Key: []byte("idle"), Value: []byte("7")}}, func(int64) { md.m["idle"] = 7 }); err != nil {
		t.Fatal(err)
	}
	{
		r, rw, rmd, err := openWithWALCompact(t, fs.CrashClone(vfs.CrashOptions{}), true, 100000)
		if err != nil {
			t.Fatal(err)
		}
		_, before := rmd.m["idle"]
		r.Close()
		rw.Close()
		if before {
			t.Fatal("the record was durable before any round: the test shows nothing")
		}
	}
	l.mu.RLock()
	ww := l.w
	l.mu.RUnlock()
	ww.checkpoint() // what the tick runs
	r, rw, rmd, err := openWithWALCompact(t, fs.CrashClone(vfs.CrashOptions{}), true, 100000)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	defer r.Close()
	if rmd.m["idle"] != 7 {
		t.Fatalf("after the tick and a crash: %v, want idle=7", rmd.m)
	}
}
