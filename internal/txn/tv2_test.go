package txn

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/vfs"
)

// Tests of transaction version 2 (KIP-890 part 2): implicit partition
// adds, EndTxn v5 epoch bumps, TxnOffsetCommit v5, and recovery when an
// implicit add's record and its partition's records do not both reach
// the disk.

// write records, in the sink, durable records of pid at epoch on tp (an
// open transaction there) and returns the first one's offset.
func (s *sink) write(tp TopicPartition, pid int64, epoch int16) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[tp] == nil {
		s.open[tp] = map[int64]int16{}
	}
	s.open[tp][pid] = epoch
	s.ends[tp]++
	return s.ends[tp] - 1
}

// markersOn returns the markers written to tp.
func (s *sink) markersOn(tp TopicPartition) []markerCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []markerCall
	for _, m := range s.markers {
		for _, p := range m.parts {
			if p == tp {
				out = append(out, m)
			}
		}
	}
	return out
}

func (s *sink) isOpen(tp TopicPartition, pid int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.open[tp][pid]
	return ok
}

func openOn(t *testing.T, s *sink, fs vfs.FS, now func() time.Time) *Coordinator {
	t.Helper()
	c, err := Open(s.config(fs, now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func fixedClock() func() time.Time {
	clock := time.Unix(1_700_000_000, 0)
	return func() time.Time { return clock }
}

// produce is a Produce v12 batch of pid at epoch for tp: the implicit add
// (its record waited for, as the reply does) and the records.
func produce(t *testing.T, c *Coordinator, s *sink, pid int64, epoch int16, tp TopicPartition) {
	t.Helper()
	s.mu.Lock()
	base := s.ends[tp]
	s.mu.Unlock()
	code, pend := c.CheckProduceAt(pid, epoch, tp.Topic, tp.Partition, base, true)
	if code != 0 {
		t.Fatalf("implicit add of %v: code %d", tp, code)
	}
	if pend != nil {
		if err := pend.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	s.write(tp, pid, epoch)
}

func TestCheckProduceAtImplicitAdd(t *testing.T) {
	s := newSink()
	c := openTest(t, s, nil)
	pid, epoch, _ := c.InitProducerID("a", 60000, -1, -1)
	tp := TopicPartition{"t", 0}
	if code, _ := c.CheckProduceAt(pid, epoch, "t", 0, 0, false); code != codeBadState {
		t.Fatalf("a v11 batch for a partition not added: code %d, want INVALID_TXN_STATE", code)
	}
	if code, _ := c.CheckProduceAt(pid, epoch+1, "t", 0, 0, true); code != codeBadEpoch {
		t.Fatalf("another epoch: code %d, want INVALID_PRODUCER_EPOCH", code)
	}
	if code, _ := c.CheckProduceAt(pid+1, epoch, "t", 0, 0, true); code != codeMapping {
		t.Fatalf("an unknown producer: code %d, want INVALID_PRODUCER_ID_MAPPING", code)
	}
	code, p1 := c.CheckProduceAt(pid, epoch, "t", 0, 7, true)
	if code != 0 || p1 == nil {
		t.Fatalf("implicit add: code %d, pending %v", code, p1)
	}
	// A later batch of the same transaction waits for the same record.
	if code, p2 := c.CheckProduceAt(pid, epoch, "t", 0, 8, false); code != 0 || p2 != p1 {
		t.Fatalf("second batch: code %d, pending %p, want %p", code, p2, p1)
	}
	if err := p1.Wait(); err != nil {
		t.Fatal(err)
	}
	a := c.Describe([]string{"a"})[0]
	if a.State != Ongoing || !a.has(tp) || a.Since[0] != 7 {
		t.Fatalf("after the implicit add: %+v", a)
	}
	// While another operation of the id runs, the add is refused with a
	// retriable code rather than waited for on the partition's goroutine.
	e := c.entryFor("a", false)
	e.op.Lock()
	code, _ = c.CheckProduceAt(pid, epoch, "t", 1, 0, true)
	e.op.Unlock()
	if code != codeConcurrent {
		t.Fatalf("add during another operation: code %d, want CONCURRENT_TRANSACTIONS", code)
	}
	// A durable record of the id supersedes the add: no wait any more.
	if code := c.AddOffsets("a", pid, epoch, "g"); code != 0 {
		t.Fatal(code)
	}
	if code, p := c.CheckProduceAt(pid, epoch, "t", 0, 9, true); code != 0 || p != nil {
		t.Fatalf("after a durable record: code %d, pending %v", code, p)
	}
}

func TestEndTxnV2BumpsEpoch(t *testing.T) {
	s := newSink()
	c := openTest(t, s, nil)
	pid, e0, _ := c.InitProducerID("a", 60000, -1, -1)
	tp := TopicPartition{"t", 0}
	produce(t, c, s, pid, e0, tp)
	npid, e1, code := c.EndTxnV2("a", pid, e0, true)
	if code != 0 || npid != pid || e1 != e0+1 {
		t.Fatalf("EndTxn v5: %d %d code %d, want %d %d", npid, e1, code, pid, e0+1)
	}
	if ms := s.markersOn(tp); len(ms) != 1 || !ms[0].commit || ms[0].epoch != e1 {
		t.Fatalf("markers %+v, want one COMMIT at the new epoch %d", ms, e1)
	}
	// A retry whose answer was lost gets the same answer; the other
	// decision is refused.
	if p, e, code := c.EndTxnV2("a", pid, e0, true); code != 0 || p != pid || e != e1 {
		t.Fatalf("retry: %d %d code %d", p, e, code)
	}
	if _, _, code := c.EndTxnV2("a", pid, e0, false); code != codeBadState {
		t.Fatalf("retry with the other decision: code %d, want INVALID_TXN_STATE", code)
	}
	// The old epoch is fenced on the partition and at the coordinator.
	if code, _ := c.CheckProduceAt(pid, e0, "t", 0, 0, true); code != codeBadEpoch {
		t.Fatalf("old epoch produce: code %d", code)
	}
	// An abort with nothing ongoing bumps the epoch too.
	if p, e2, code := c.EndTxnV2("a", pid, e1, false); code != 0 || p != pid || e2 != e1+1 {
		t.Fatalf("empty abort: %d %d code %d", p, e2, code)
	}
	if _, _, code := c.EndTxnV2("a", pid, e1+1, true); code != codeBadState {
		t.Fatalf("commit with nothing ongoing: code %d, want INVALID_TXN_STATE", code)
	}
	// A classic EndTxn keeps the epoch.
	produce(t, c, s, pid, e1+1, tp)
	if code := c.EndTxn("a", pid, e1+1, false); code != 0 || c.Describe([]string{"a"})[0].Epoch != e1+1 {
		t.Fatalf("EndTxn v4: code %d, state %+v", code, c.Describe([]string{"a"})[0])
	}
}

// TestEndTxnV2EpochExhausted: when the bumped epoch reaches the last one
// a producer may use, the producer gets a new id at epoch 0, durably.
func TestEndTxnV2EpochExhausted(t *testing.T) {
	s := newSink()
	fs := vfs.NewMem()
	now := fixedClock()
	c := openOn(t, s, fs, now)
	pid, _, _ := c.InitProducerID("a", 60000, -1, -1)
	e := c.entryFor("a", false)
	high := c.current(e).clone()
	high.Epoch = math.MaxInt16 - 2
	e.op.Lock()
	if err := c.persist(e, high); err != nil {
		t.Fatal(err)
	}
	e.op.Unlock()
	tp := TopicPartition{"t", 0}
	produce(t, c, s, pid, high.Epoch, tp)
	npid, ne, code := c.EndTxnV2("a", pid, high.Epoch, true)
	if code != 0 || npid == pid || ne != 0 {
		t.Fatalf("EndTxn at epoch %d: %d %d code %d, want a new id at epoch 0", high.Epoch, npid, ne, code)
	}
	if ms := s.markersOn(tp); len(ms) != 1 || ms[0].pid != pid || ms[0].epoch != math.MaxInt16-1 {
		t.Fatalf("markers %+v, want the old id's COMMIT at epoch %d", ms, math.MaxInt16-1)
	}
	if p, ep, code := c.EndTxnV2("a", pid, high.Epoch, true); code != 0 || p != npid || ep != 0 {
		t.Fatalf("retry: %d %d code %d", p, ep, code)
	}
	r := openOn(t, s, fs.CrashClone(vfs.CrashOptions{}), now)
	if a := r.Describe([]string{"a"})[0]; a.PID != npid || a.Epoch != 0 {
		t.Fatalf("after a crash: %+v, want the new id %d", a, npid)
	}
}

// TestImplicitAddRecordLost: the crash kept a batch whose implicit add's
// coordinator record it lost (they are fsynced at the same time; neither
// was acknowledged). Recovery adds the partition back to the transaction,
// so the producer's commit, or the timeout's abort, writes its marker.
func TestImplicitAddRecordLost(t *testing.T) {
	for _, end := range []string{"commit", "timeout"} {
		t.Run(end, func(t *testing.T) {
			s := newSink()
			fs := vfs.NewMem()
			clock := time.Unix(1_700_000_000, 0)
			now := func() time.Time { return clock }
			c := openOn(t, s, fs, now)
			pid, epoch, _ := c.InitProducerID("a", 1000, -1, -1)
			tp, other := TopicPartition{"t", 0}, TopicPartition{"t", 1}
			produce(t, c, s, pid, epoch, other) // an earlier add that is durable
			first := s.write(tp, pid, epoch)    // the batch; its add never written
			c.Close()
			r := openOn(t, s, fs.CrashClone(vfs.CrashOptions{}), now)
			a := r.Describe([]string{"a"})[0]
			if a.State != Ongoing || !a.has(tp) || !a.has(other) {
				t.Fatalf("recovered %+v, want Ongoing with %v and %v", a, tp, other)
			}
			if i := slicesIndex(a.Partitions, tp); a.Since[i] != first {
				t.Fatalf("since %v, want %d for %v", a.Since, first, tp)
			}
			if end == "commit" {
				if _, _, code := r.EndTxnV2("a", pid, epoch, true); code != 0 {
					t.Fatal(code)
				}
			} else {
				clock = clock.Add(2 * time.Second)
				r.Sweep()
			}
			if ms := s.markersOn(tp); len(ms) != 1 || ms[0].commit != (end == "commit") {
				t.Fatalf("markers on the recovered partition: %+v", ms)
			}
			if s.isOpen(tp, pid) || s.isOpen(other, pid) {
				t.Fatal("a transaction stayed open on a partition")
			}
		})
	}
}

// TestImplicitAddDataLost: the crash kept the implicit add's record and
// lost the batch. The transaction lists a partition without records of
// it; ending it writes nothing there that matters, and the epoch moves on.
func TestImplicitAddDataLost(t *testing.T) {
	s := newSink()
	fs := vfs.NewMem()
	now := fixedClock()
	c := openOn(t, s, fs, now)
	pid, epoch, _ := c.InitProducerID("a", 60000, -1, -1)
	tp := TopicPartition{"t", 0}
	code, pend := c.CheckProduceAt(pid, epoch, tp.Topic, tp.Partition, 0, true)
	if code != 0 || pend.Wait() != nil {
		t.Fatalf("add: %d", code)
	}
	r := openOn(t, s, fs.CrashClone(vfs.CrashOptions{}), now)
	if a := r.Describe([]string{"a"})[0]; a.State != Ongoing || !a.has(tp) {
		t.Fatalf("recovered %+v", a)
	}
	// The producer, which got no reply, retries the batch, then commits.
	produce(t, r, s, pid, epoch, tp)
	if p, e, code := r.EndTxnV2("a", pid, epoch, true); code != 0 || p != pid || e != epoch+1 {
		t.Fatalf("commit: %d %d %d", p, e, code)
	}
	if ms := s.markersOn(tp); len(ms) != 1 || !ms[0].commit || s.isOpen(tp, pid) {
		t.Fatalf("markers %+v", ms)
	}
}

// TestImplicitAddAfterUnwrittenComplete: an EndTxn v5 commit answered
// (decision and markers durable, its Complete state not yet written),
// then the next transaction's first batch at the new epoch reached the
// disk on the same partition while its add did not. Recovery finishes
// the decided transaction again without closing the newer one's records
// with the old decision, then adds the partition to the newer one.
func TestImplicitAddAfterUnwrittenComplete(t *testing.T) {
	s := newSink()
	fs := vfs.NewMem()
	now := fixedClock()
	c := openOn(t, s, fs, now)
	pid, e0, _ := c.InitProducerID("a", 60000, -1, -1)
	tp := TopicPartition{"t", 0}
	produce(t, c, s, pid, e0, tp)
	_, e1, code := c.EndTxnV2("a", pid, e0, true)
	if code != 0 {
		t.Fatal(code)
	}
	s.write(tp, pid, e1)
	crashed := fs.CrashClone(vfs.CrashOptions{})
	n := len(s.markersOn(tp))
	r := openOn(t, s, crashed, now)
	if ms := s.markersOn(tp); len(ms) != n {
		t.Fatalf("recovery wrote the old decision's marker over the newer transaction: %+v", ms[n:])
	}
	a := r.Describe([]string{"a"})[0]
	if a.State != Ongoing || !a.has(tp) || a.Epoch != e1 {
		t.Fatalf("recovered %+v, want the newer transaction Ongoing at epoch %d", a, e1)
	}
	if _, _, code := r.EndTxnV2("a", pid, e1, false); code != 0 {
		t.Fatal(code)
	}
	if ms := s.markersOn(tp); len(ms) != n+1 || ms[n].commit || s.isOpen(tp, pid) {
		t.Fatalf("markers %+v, want the newer transaction's ABORT", ms)
	}
}

func TestCommitOffsetsAdding(t *testing.T) {
	s := newSink()
	c := openTest(t, s, nil)
	pid, epoch, _ := c.InitProducerID("a", 60000, -1, -1)
	offs := []Offset{{Topic: "t", Partition: 0, Offset: 5}}
	if codes := c.CommitOffsets("a", "g", pid, epoch, -1, "", nil, offs); codes[0] != codeBadState {
		t.Fatalf("v4 without AddOffsetsToTxn: %v", codes)
	}
	if codes := c.CommitOffsetsAdding("a", "g", pid, epoch, -1, "", nil, offs); codes[0] != 0 {
		t.Fatalf("v5: %v", codes)
	}
	if a := c.Describe([]string{"a"})[0]; a.State != Ongoing || len(a.Offsets["g"]) != 1 {
		t.Fatalf("state %+v", a)
	}
	if _, _, code := c.EndTxnV2("a", pid, epoch, true); code != 0 {
		t.Fatal(code)
	}
	if got := s.offsets["g"][TopicPartition{"t", 0}]; got != 5 {
		t.Fatalf("committed offset %d, want 5", got)
	}
}

// TestStateRecordFormats: the binary record round-trips every field, and
// JSON records written by earlier versions are still read.
func TestStateRecordFormats(t *testing.T) {
	in := &Txn{ID: "tx-é", PID: 1 << 40, Epoch: 32766, PrevPID: -1, PrevEpoch: -1, State: PrepareCommit, Bumped: true,
		TimeoutMs: 60000, Partitions: []TopicPartition{{"a", 0}, {"b", 7}}, Since: []int64{0, 1 << 33},
		Offsets: map[string][]Offset{"g": {{Topic: "a", Partition: 1, Offset: 9, LeaderEpoch: -1, Metadata: "m"}}, "h": {}},
		StartMs: 1_700_000_000_000, UpdateMs: 1_700_000_000_123}
	b := encodeTxn(in)
	if b[0] != recordVersion {
		t.Fatalf("version byte %d", b[0])
	}
	out, err := decodeTxn(recordKey(in.ID), b)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %v\n in %+v\nout %+v", err, in, out)
	}
	for i := 1; i < len(b); i++ {
		if _, err := decodeTxn(recordKey(in.ID), b[:i]); err == nil {
			t.Fatalf("a record cut at %d bytes decoded", i)
		}
	}
	old := in.clone()
	old.Bumped = false
	js, err := json.Marshal(recordValue{V: jsonRecordVersion, Txn: old})
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeTxn(recordKey(in.ID), js)
	if err != nil || !reflect.DeepEqual(old, got) {
		t.Fatalf("JSON record: %v\n in %+v\nout %+v", err, old, got)
	}
	if _, err := decodeTxn(recordKey(in.ID), append([]byte{9}, b[1:]...)); err == nil {
		t.Fatal("an unknown version decoded")
	}
}

func slicesIndex(ps []TopicPartition, tp TopicPartition) int {
	for i, p := range ps {
		if p == tp {
			return i
		}
	}
	return -1
}
