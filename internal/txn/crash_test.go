package txn

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/kvlog"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sink stands in for the partitions and the group coordinator: it keeps
// every marker and offset commit that was reported durable, across the
// coordinator's crashes (they live in other logs).
type sink struct {
	mu      sync.Mutex // guards the fields below
	markers []markerCall
	ends    map[TopicPartition]int64 // each partition's end offset: one per marker written
	offsets map[string]map[TopicPartition]int64
	nextPID int64
	// open: transactions open on partitions (records written, no marker
	// yet), producer id → the epoch of their batches; only tests of the
	// implicit add fill it. A marker whose batch epoch is below an open
	// transaction's is not written there (a newer transaction's records).
	open map[TopicPartition]map[int64]int16
}

type markerCall struct {
	pid    int64
	epoch  int16
	commit bool
	parts  []TopicPartition
	at     []int64 // offset of the marker on each of parts
}

func newSink() *sink {
	return &sink{offsets: map[string]map[TopicPartition]int64{}, ends: map[TopicPartition]int64{}, nextPID: 1000,
		open: map[TopicPartition]map[int64]int16{}}
}

func (s *sink) config(fs vfs.FS, now func() time.Time) Config {
	return Config{
		FS: fs, Dir: "data/transactions", Now: now, SweepInterval: -1,
		AllocPID: func() (int64, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.nextPID++
			return s.nextPID, nil
		},
		WriteMarkers: func(pid int64, epoch int16, commit bool, parts []TopicPartition, batchEpoch int16) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			m := markerCall{pid: pid, epoch: epoch, commit: commit}
			for _, tp := range parts {
				if be, ok := s.open[tp][pid]; ok && be > batchEpoch {
					continue // a newer transaction's records
				}
				delete(s.open[tp], pid)
				m.parts = append(m.parts, tp)
				m.at = append(m.at, s.ends[tp])
				s.ends[tp]++
			}
			s.markers = append(s.markers, m)
			return nil
		},
		OpenTransactions: func() []OpenTxn {
			s.mu.Lock()
			defer s.mu.Unlock()
			var out []OpenTxn
			for tp, m := range s.open {
				for pid, ep := range m {
					out = append(out, OpenTxn{PID: pid, Epoch: ep, TP: tp, First: s.ends[tp] - 1})
				}
			}
			return out
		},
		EndOffset: func(topic string, partition int32) int64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.ends[TopicPartition{topic, partition}]
		},
		CommittedSince: func(pid int64, tp TopicPartition, from int64) (int16, bool, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, m := range s.markers {
				for i, p := range m.parts {
					if m.pid == pid && m.commit && p == tp && m.at[i] >= from {
						return m.epoch, true, nil
					}
				}
			}
			return 0, false, nil
		},
		CommitOffsets: func(group string, offs []Offset, _ int64) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.offsets[group] == nil {
				s.offsets[group] = map[TopicPartition]int64{}
			}
			for _, o := range offs {
				s.offsets[group][TopicPartition{o.Topic, o.Partition}] = o.Offset
			}
			return nil
		},
	}
}

// decisions returns the markers' decisions per producer id and epoch.
func (s *sink) decisions(pid int64) map[bool]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[bool]int{}
	for _, c := range s.markers {
		if c.pid == pid {
			m[c.commit]++
		}
	}
	return m
}

// acks is what the workload saw acknowledged.
type acks struct {
	pid              int64
	epoch            int16 // the last epoch InitProducerID returned
	committed        bool  // EndTxn(commit) of the first transaction answered 0
	aborted          bool  // EndTxn(abort) of the second transaction answered 0
	reinit           bool  // the final InitProducerID answered 0
	bPID             int64
	bAdded           bool
	offsetsCommitted bool
}

var tpA0, tpA1, tpB = TopicPartition{"t", 0}, TopicPartition{"t", 1}, TopicPartition{"u", 0}

// workload runs transactions on ids "a" and "b", stopping at the first
// failure, and records what was acknowledged.
func workload(c *Coordinator) acks {
	var a acks
	pid, epoch, code := c.InitProducerID("a", 60000, -1, -1)
	if code != 0 {
		return a
	}
	a.pid, a.epoch = pid, epoch
	if codes := c.AddPartitions("a", pid, epoch, []TopicPartition{tpA0, tpA1}); codes[0] != 0 {
		return a
	}
	if c.AddOffsets("a", pid, epoch, "g") != 0 {
		return a
	}
	if codes := c.CommitOffsets("a", "g", pid, epoch, -1, "", nil, []Offset{{Topic: "t", Partition: 0, Offset: 5}}); codes[0] != 0 {
		return a
	}
	if c.EndTxn("a", pid, epoch, true) != 0 {
		return a
	}
	a.committed = true
	if codes := c.AddPartitions("a", pid, epoch, []TopicPartition{tpA1}); codes[0] != 0 {
		return a
	}
	if c.EndTxn("a", pid, epoch, false) != 0 {
		return a
	}
	a.aborted = true
	bpid, bepoch, code := c.InitProducerID("b", 60000, -1, -1)
	if code != 0 {
		return a
	}
	a.bPID = bpid
	if codes := c.AddPartitions("b", bpid, bepoch, []TopicPartition{tpB}); codes[0] != 0 {
		return a
	}
	a.bAdded = true
	if _, ep, code := c.InitProducerID("a", 60000, pid, epoch); code == 0 {
		a.reinit, a.epoch = true, ep
	}
	return a
}

// TestCrashAtEveryBoundary runs the workload once to count the
// filesystem's mutating operations, then again failing every operation
// from the n-th on (the machine stops there) for every n, crashes
// (dropping or tearing unsynced bytes), reopens the coordinator on what
// survives and checks: every acknowledged state change is there, no
// transaction is left in a Prepare state, a decided commit has its
// markers and offsets, and no transaction got both decisions.
func TestCrashAtEveryBoundary(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return clock }
	fs := vfs.NewMem()
	s := newSink()
	c, err := Open(s.config(fs, now))
	if err != nil {
		t.Fatal(err)
	}
	full := workload(c)
	if !full.reinit || !full.bAdded {
		t.Fatalf("clean run did not finish: %+v", full)
	}
	c.Close()
	total := fs.Seq()
	rng := rand.New(rand.NewPCG(7, 9))
	for n := int64(1); n <= total+1; n++ {
		for _, tear := range []bool{false, true} {
			t.Run(fmt.Sprintf("op%d-tear%v", n, tear), func(t *testing.T) {
				fs := vfs.NewMem()
				fs.Inject(vfs.FailFromSeq(n, syscall.EIO))
				s := newSink()
				var got acks
				if c, err := Open(s.config(fs, now)); err == nil {
					got = workload(c)
					c.Close()
				}
				crashed := fs.CrashClone(vfs.CrashOptions{Tear: tear, Rand: rng})
				r, err := Open(s.config(crashed, now))
				if err != nil {
					t.Fatalf("reopen after crash: %v", err)
				}
				defer r.Close()
				checkRecovered(t, r, s, got)
			})
		}
	}
}

// openWithWAL opens the shared write-ahead log in data/wal, replays into
// the coordinator's log what it holds for it (as the broker does at
// start) and opens the coordinator over it.
func openWithWAL(fs vfs.FS, cfg Config) (*Coordinator, *wal.WAL, error) {
	// Tiny segments, checkpoints at two sealed ones (MaxBytes), so that
	// segments fill and retire within the test.
	w, rp, err := wal.Open(wal.Options{FS: fs, Dir: "data/wal", SegmentBytes: 4096, MaxBytes: 2 * 4096})
	if err != nil {
		return nil, nil, err
	}
	if _, err := kvlog.ReplayWAL(fs, cfg.Dir, WALName, rp, nil); err != nil {
		w.Close()
		return nil, nil, err
	}
	if err := rp.Done(); err != nil {
		w.Close()
		return nil, nil, err
	}
	cfg.WAL, cfg.Fsync = w, acceptor.FsyncAlways
	c, err := Open(cfg)
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	return c, w, nil
}

// TestCrashAtEveryBoundaryWAL is TestCrashAtEveryBoundary with the
// coordinator's records made durable through the shared write-ahead log,
// and the crash taken before the coordinator closes (its own log is not
// fsynced then: acknowledged records live in the WAL only).
func TestCrashAtEveryBoundaryWAL(t *testing.T) { crashAtEveryBoundaryWAL(t, 0) }

// TestCrashAtEveryBoundaryWALCompacting is TestCrashAtEveryBoundaryWAL
// with the coordinator's log compacted every few records, so that
// crashes land before, inside and after compactions (a new log
// generation, CURRENT switched, the old generation's WAL entries left
// behind).
func TestCrashAtEveryBoundaryWALCompacting(t *testing.T) { crashAtEveryBoundaryWAL(t, 2) }

// crashAtEveryBoundaryWAL runs the WAL crash test with the log's
// CompactMinRecords (0: the default).
func crashAtEveryBoundaryWAL(t *testing.T, compactMin int) {
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return clock }
	config := func(s *sink, fs vfs.FS) Config {
		cfg := s.config(fs, now)
		cfg.CompactMinRecords = compactMin
		return cfg
	}
	fs := vfs.NewMem()
	s := newSink()
	c, w, err := openWithWAL(fs, config(s, fs))
	if err != nil {
		t.Fatal(err)
	}
	full := workload(c)
	if !full.reinit || !full.bAdded {
		t.Fatalf("clean run did not finish: %+v", full)
	}
	if compactMin > 0 && c.log.Generation() < 3 {
		t.Fatalf("the clean run compacted the log %d times, want at least 2", c.log.Generation()-1)
	}
	total := fs.Seq()
	c.Close()
	w.Close()
	rng := rand.New(rand.NewPCG(7, 10))
	for n := int64(1); n <= total+1; n++ {
		for _, tear := range []bool{false, true} {
			t.Run(fmt.Sprintf("op%d-tear%v", n, tear), func(t *testing.T) {
				fs := vfs.NewMem()
				fs.Inject(vfs.FailFromSeq(n, syscall.EIO))
				s := newSink()
				var got acks
				var crashed *vfs.MemFS
				if c, w, err := openWithWAL(fs, config(s, fs)); err == nil {
					got = workload(c)
					crashed = fs.CrashClone(vfs.CrashOptions{Tear: tear, Rand: rng})
					c.Close()
					w.Close()
				} else {
					crashed = fs.CrashClone(vfs.CrashOptions{Tear: tear, Rand: rng})
				}
				r, rw, err := openWithWAL(crashed, config(s, crashed))
				if err != nil {
					t.Fatalf("reopen after crash: %v", err)
				}
				defer rw.Close()
				defer r.Close()
				checkRecovered(t, r, s, got)
			})
		}
	}
}

func checkRecovered(t *testing.T, r *Coordinator, s *sink, got acks) {
	t.Helper()
	for _, tx := range r.List(nil, nil) {
		if tx.State == PrepareCommit || tx.State == PrepareAbort {
			t.Fatalf("%s left in %s after recovery", tx.ID, tx.State)
		}
	}
	st := r.Describe([]string{"a", "b"})
	a, b := st[0], st[1]
	if got.pid != 0 {
		if a == nil || a.PID != got.pid || a.Epoch < got.epoch {
			t.Fatalf("acknowledged producer a=%d epoch %d, recovered %+v", got.pid, got.epoch, a)
		}
	}
	if got.reinit && a.Epoch != got.epoch {
		t.Fatalf("acknowledged re-init at epoch %d, recovered epoch %d", got.epoch, a.Epoch)
	}
	d := s.decisions(got.pid)
	if got.committed {
		if d[true] == 0 {
			t.Fatalf("acknowledged commit has no COMMIT markers: %+v", s.markers)
		}
		if s.offsets["g"][tpA0] != 5 {
			t.Fatalf("acknowledged commit's offsets missing: %v", s.offsets)
		}
	}
	if !got.committed && d[true] > 0 && s.offsets["g"][tpA0] != 5 {
		t.Fatalf("COMMIT markers written but the offsets were not: %v", s.offsets)
	}
	if !got.committed && d[true] == 0 && len(s.offsets["g"]) > 0 {
		t.Fatalf("offsets applied without a commit: %v", s.offsets)
	}
	// Each transaction gets one decision: the first commits (if decided),
	// the second aborts; a commit marker set never includes the second
	// transaction's partitions only.
	for _, m := range s.markers {
		if m.pid == got.pid && m.commit && len(m.parts) != 2 {
			t.Fatalf("commit markers of the wrong partitions: %+v", m)
		}
	}
	if d[true] > 0 && a.State == Ongoing && a.has(tpA0) {
		t.Fatalf("COMMIT markers written but the transaction is still open: %+v", a)
	}
	if got.aborted && a.State == Ongoing {
		t.Fatalf("acknowledged abort, recovered %s", a.State)
	}
	if got.bAdded {
		if b == nil || b.PID != got.bPID || b.State != Ongoing || !b.has(tpB) {
			t.Fatalf("acknowledged AddPartitions of b, recovered %+v", b)
		}
	}
}

// TestRecoveryAbortsExpired: an ongoing transaction past its timeout is
// aborted at open with a bumped epoch, so its producer is fenced.
func TestRecoveryAbortsExpired(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	fs := vfs.NewMem()
	s := newSink()
	c, err := Open(s.config(fs, now))
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, _ := c.InitProducerID("x", 1000, -1, -1)
	if codes := c.AddPartitions("x", pid, epoch, []TopicPartition{tpA0}); codes[0] != 0 {
		t.Fatal(codes)
	}
	c.Close()
	mu.Lock()
	clock = clock.Add(2 * time.Second)
	mu.Unlock()
	r, err := Open(s.config(fs, now))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	x := r.Describe([]string{"x"})[0]
	if x.State != CompleteAbort || x.Epoch != epoch+1 {
		t.Fatalf("expired transaction recovered as %s epoch %d, want CompleteAbort epoch %d", x.State, x.Epoch, epoch+1)
	}
	if d := s.decisions(pid); d[false] != 1 || d[true] != 0 {
		t.Fatalf("markers %+v, want one ABORT", s.markers)
	}
	if code := r.EndTxn("x", pid, epoch, true); code != codeFenced {
		t.Fatalf("EndTxn of the fenced producer: code %d, want PRODUCER_FENCED", code)
	}
	if code := r.CheckProduce(pid, epoch, "t", 0); code != codeBadEpoch {
		t.Fatalf("produce of the fenced producer: code %d, want INVALID_PRODUCER_EPOCH", code)
	}
}

// TestRollForwardCommit: EndTxn(commit) writes the decision and the
// markers at the same time. When only the markers reach the disk (the
// decision's write fails, then the machine stops), recovery finds them
// and finishes the commit, staged offsets included; a later transaction
// of the same producer on the same partition is not taken for committed
// because of the earlier one's marker.
func TestRollForwardCommit(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return clock }
	fs := vfs.NewMem()
	s := newSink()
	c, err := Open(s.config(fs, now))
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, _ := c.InitProducerID("a", 60000, -1, -1)
	if codes := c.AddPartitions("a", pid, epoch, []TopicPartition{tpA0, tpA1}); codes[0] != 0 {
		t.Fatal(codes)
	}
	if code := c.AddOffsets("a", pid, epoch, "g"); code != 0 {
		t.Fatal(code)
	}
	if codes := c.CommitOffsets("a", "g", pid, epoch, -1, "", nil, []Offset{{Topic: "t", Partition: 0, Offset: 5}}); codes[0] != 0 {
		t.Fatal(codes)
	}
	fs.Inject(vfs.FailFromSeq(fs.Seq()+1, syscall.EIO))
	if code := c.EndTxn("a", pid, epoch, true); code != codeConcurrent {
		t.Fatalf("EndTxn with a failing log: code %d, want CONCURRENT_TRANSACTIONS", code)
	}
	if d := s.decisions(pid); d[true] != 1 {
		t.Fatalf("markers %+v, want the COMMIT written beside the failed decision", s.markers)
	}
	if code := c.EndTxn("a", pid, epoch, false); code != codeBadState {
		t.Fatalf("abort after the commit's markers: code %d, want INVALID_TXN_STATE", code)
	}
	if code := c.CheckProduce(pid, epoch, "t", 0); code != codeBadState {
		t.Fatalf("produce after the commit's markers: code %d, want INVALID_TXN_STATE", code)
	}
	c.Close()
	crashed := fs.CrashClone(vfs.CrashOptions{})
	r, err := Open(s.config(crashed, now))
	if err != nil {
		t.Fatal(err)
	}
	a := r.Describe([]string{"a"})[0]
	if a.State != CompleteCommit || a.Epoch != epoch {
		t.Fatalf("recovered %s epoch %d, want CompleteCommit epoch %d", a.State, a.Epoch, epoch)
	}
	if s.offsets["g"][tpA0] != 5 {
		t.Fatalf("the rolled-forward commit's offsets: %v", s.offsets)
	}
	// A second transaction on tpA0, open at the crash: tpA0 holds the
	// first one's COMMIT marker, which must not count for it.
	if codes := r.AddPartitions("a", pid, epoch, []TopicPartition{tpA0}); codes[0] != 0 {
		t.Fatal(codes)
	}
	r.Close()
	s.mu.Lock()
	before := len(s.markers)
	s.mu.Unlock()
	r2, err := Open(s.config(crashed.CrashClone(vfs.CrashOptions{}), now))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if a := r2.Describe([]string{"a"})[0]; a.State != Ongoing || !a.has(tpA0) {
		t.Fatalf("open second transaction recovered as %s %v", a.State, a.Partitions)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.markers) != before {
		t.Fatalf("markers %+v: recovery wrote markers for the open second transaction", s.markers[before:])
	}
}

// TestUndecidedAfterRecovery: when recovery cannot read a partition to
// tell whether an open transaction's commit had written markers, the
// transaction is neither aborted (by its timeout, a new InitProducerId or
// an EndTxn abort) nor given new partitions until a later sweep can
// tell; then the commit is finished.
func TestUndecidedAfterRecovery(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return clock }
	fs := vfs.NewMem()
	s := newSink()
	c, err := Open(s.config(fs, now))
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, _ := c.InitProducerID("a", 60000, -1, -1)
	if codes := c.AddPartitions("a", pid, epoch, []TopicPartition{tpA0, tpA1}); codes[0] != 0 || codes[1] != 0 {
		t.Fatal(codes)
	}
	fs.Inject(vfs.FailFromSeq(fs.Seq()+1, syscall.EIO))
	if code := c.EndTxn("a", pid, epoch, true); code != codeConcurrent {
		t.Fatalf("EndTxn with a failing log: code %d, want CONCURRENT_TRANSACTIONS", code)
	}
	c.Close()
	crashed := fs.CrashClone(vfs.CrashOptions{})

	clock = clock.Add(time.Hour) // long past the transaction's timeout
	cfg := s.config(crashed, now)
	var unreadable atomic.Bool
	unreadable.Store(true)
	committedSince := cfg.CommittedSince
	cfg.CommittedSince = func(pid int64, tp TopicPartition, from int64) (int16, bool, error) {
		if unreadable.Load() {
			return 0, false, syscall.EIO
		}
		return committedSince(pid, tp, from)
	}
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if a := r.Describe([]string{"a"})[0]; a.State != Ongoing {
		t.Fatalf("an undecided transaction recovered as %s; it must stay open", a.State)
	}
	if d := s.decisions(pid); d[false] != 0 {
		t.Fatalf("ABORT markers written for a transaction whose COMMIT markers may exist: %+v", s.markers)
	}
	if _, _, code := r.InitProducerID("a", 60000, -1, -1); code != codeConcurrent {
		t.Fatalf("InitProducerId on an undecided transaction: code %d, want CONCURRENT_TRANSACTIONS", code)
	}
	if code := r.EndTxn("a", pid, epoch, false); code != codeConcurrent {
		t.Fatalf("abort of an undecided transaction: code %d, want CONCURRENT_TRANSACTIONS", code)
	}
	if codes := r.AddPartitions("a", pid, epoch, []TopicPartition{tpA0}); codes[0] != codeConcurrent {
		t.Fatalf("AddPartitions to an undecided transaction: codes %v, want CONCURRENT_TRANSACTIONS", codes)
	}
	r.Sweep() // still unreadable: nothing changes
	if a := r.Describe([]string{"a"})[0]; a.State != Ongoing || s.decisions(pid)[false] != 0 {
		t.Fatalf("a sweep decided an unreadable transaction: %s, markers %+v", a.State, s.markers)
	}
	unreadable.Store(false)
	r.Sweep()
	if a := r.Describe([]string{"a"})[0]; a.State != CompleteCommit {
		t.Fatalf("after the partitions became readable: %s, want CompleteCommit", a.State)
	}
	if d := s.decisions(pid); d[false] != 0 {
		t.Fatalf("ABORT markers written: %+v", s.markers)
	}
}
