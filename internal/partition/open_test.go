package partition

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/txn"
	"github.com/sluicedb/sluice/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openTest(t *testing.T, fs vfs.FS, create bool) *Partition {
	t.Helper()
	p, err := Open(Config{FS: fs, Dir: "/data/topics/t/0", Topic: "t", Index: 0, Create: create,
		Storage: storage.Config{Preallocate: -1}, Acceptor: acceptor.Config{RetentionCheck: -1}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// appendBatch validates b as the broker does and appends it durably.
func appendBatch(t *testing.T, p *Partition, b []byte, ap *Append) (int64, error) {
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
	pend, err := p.Enqueue(context.Background(), b, hs, n, true, ap)
	if err != nil {
		return -1, err
	}
	return p.Wait(context.Background(), pend)
}

func idemBatch(pid int64, epoch int16, seq int32, records int) []byte {
	return storagetest.Build(storagetest.Spec{Records: records, ValueSize: 10, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq})
}

// TestIdempotentAppends: a retried batch gets its original offset and
// is not written again; a gap in sequences is refused with its Kafka
// code; the state survives a clean close (a snapshot at the log end, so
// the reopen scans nothing) and a close without one (a full scan).
func TestIdempotentAppends(t *testing.T) {
	fs := vfs.NewMem()
	p := openTest(t, fs, true)
	if base, err := appendBatch(t, p, idemBatch(7, 0, 0, 3), new(Append)); err != nil || base != 0 {
		t.Fatalf("first batch: base %d, %v", base, err)
	}
	if base, err := appendBatch(t, p, idemBatch(7, 0, 0, 3), new(Append)); err != nil || base != 0 {
		t.Fatalf("retried batch: base %d, %v; want the original 0", base, err)
	}
	if next := p.NextOffset(); next != 3 {
		t.Fatalf("log end %d after a retry; want 3", next)
	}
	if _, err := appendBatch(t, p, idemBatch(7, 0, 5, 1), new(Append)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("sequence gap: %v; want OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	before := p.DescribeState()
	if err := p.CloseClean(); err != nil {
		t.Fatal(err)
	}
	p = openTest(t, fs, false)
	if off, ok := p.RecoveredFrom(); !ok || off != 3 {
		t.Fatalf("after a clean close: scanned from %d (snapshot %v); want the log end from a snapshot", off, ok)
	}
	if got := p.DescribeState(); got != before {
		t.Fatalf("state after reopen\n%s\nbefore\n%s", got, before)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, off := range mustOffsets(t, fs) {
		if err := fs.Remove(SnapshotPath("/data/topics/t/0", off)); err != nil {
			t.Fatal(err)
		}
	}
	p = openTest(t, fs, false)
	defer p.Close()
	if off, ok := p.RecoveredFrom(); ok || off != 0 {
		t.Fatalf("without snapshots: scanned from %d (snapshot %v); want a full scan", off, ok)
	}
	if got := p.DescribeState(); got != before {
		t.Fatalf("state after a full scan\n%s\nbefore\n%s", got, before)
	}
}

func mustOffsets(t *testing.T, fs vfs.FS) []int64 {
	t.Helper()
	offs, err := SnapshotOffsets(fs, "/data/topics/t/0")
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

// coordinator is a transaction coordinator that accepts every batch.
type coordinator struct{}

func (coordinator) CheckProduceAt(int64, int16, string, int32, int64, bool) (int16, *txn.Pending) {
	return 0, nil
}

// TestTransactionIsolation: an open transaction holds the last stable
// offset at its first offset, read_committed reads stop there, and its
// ABORT marker lists it among the aborted transactions of the range.
func TestTransactionIsolation(t *testing.T) {
	p := openTest(t, vfs.NewMem(), true)
	defer p.Close()
	if _, err := appendBatch(t, p, storagetest.Build(storagetest.Spec{Records: 2, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}), new(Append)); err != nil {
		t.Fatal(err)
	}
	txnal := storagetest.Build(storagetest.Spec{Records: 3, ProducerID: 9, ProducerEpoch: 0, BaseSequence: 0, Attributes: batch.AttrTransactional})
	if _, err := appendBatch(t, p, txnal, &Append{}); !errors.Is(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("transactional batch without a coordinator: %v; want COORDINATOR_NOT_AVAILABLE", err)
	}
	if _, err := appendBatch(t, p, txnal, &Append{Txn: coordinator{}}); err != nil {
		t.Fatal(err)
	}
	if hw, lso := p.HighWatermark(), p.LastStableOffset(); hw != 5 || lso != 2 {
		t.Fatalf("open transaction: hw %d lso %d; want 5 and 2", hw, lso)
	}
	if s, limit, err := p.Read(0, true, 1<<20); err != nil || limit != 2 || s.Len() == 0 {
		t.Fatalf("read_committed: limit %d, %d bytes, %v; want the records below 2", limit, s.Len(), err)
	}
	if pids := p.Producers(); len(pids) != 1 || pids[0].ID != 9 || pids[0].TxnStartOffset != 2 || pids[0].CoordinatorEpoch != -1 {
		t.Fatalf("producers %+v; want 9 with its transaction open at 2, no marker", pids)
	}
	pend, err := p.EnqueueMarker(9, 0, false, 0, 7, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(context.Background(), pend); err != nil {
		t.Fatal(err)
	}
	if hw, lso := p.HighWatermark(), p.LastStableOffset(); hw != 6 || lso != 6 {
		t.Fatalf("after the abort: hw %d lso %d; want 6 and 6", hw, lso)
	}
	if ab := p.AbortedIn(0, 6); len(ab) != 1 || ab[0].ProducerID != 9 || ab[0].FirstOffset != 2 {
		t.Fatalf("aborted transactions %+v; want producer 9 from 2", ab)
	}
	if pids := p.Producers(); len(pids) != 1 || pids[0].CoordinatorEpoch != 7 {
		t.Fatalf("producers %+v after the marker; want coordinator epoch 7", pids)
	}
	// The log scan at open finds the marker's coordinator epoch again.
	want := p.DescribeState()
	if got, err := p.RescanState(); err != nil || got != want || !strings.Contains(got, "CoordEpoch:7") {
		t.Fatalf("state rebuilt from the log %q, %v; want %q with CoordEpoch:7", got, err, want)
	}
	// A second marker finds no open transaction and writes nothing.
	pend, err = p.EnqueueMarker(9, 0, false, 0, 7, 1)
	if err == nil {
		_, err = p.Wait(context.Background(), pend)
	}
	if err != nil || p.NextOffset() != 6 {
		t.Fatalf("marker without a transaction: %v, log end %d; want nothing written", err, p.NextOffset())
	}
}

// TestWaiterSignalled: a waiter registered on a partition is signalled
// when its high watermark advances, and by Close; a stopped one is not.
func TestWaiterSignalled(t *testing.T) {
	p := openTest(t, vfs.NewMem(), true)
	w := NewWaiter()
	w.Watch(p)
	select {
	case <-w.C():
		t.Fatal("signalled before any append")
	default:
	}
	if _, err := appendBatch(t, p, storagetest.MakeBatch(1, 10, 0), new(Append)); err != nil {
		t.Fatal(err)
	}
	wait(t, w, "the append")
	closing := NewWaiter()
	closing.Watch(p)
	stopped := NewWaiter()
	stopped.Watch(p)
	stopped.Stop()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	wait(t, closing, "Close")
	closing.Stop()
	w.Stop()
	select {
	case <-stopped.C():
		t.Fatal("a stopped waiter was signalled")
	default:
	}
}

func wait(t *testing.T, w *Waiter, what string) {
	t.Helper()
	select {
	case <-w.C():
	case <-time.After(30 * time.Second):
		t.Fatalf("waiter not signalled by %s", what)
	}
}
