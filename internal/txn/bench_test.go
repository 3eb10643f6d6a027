package txn

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// BenchmarkTxnV2 runs the coordinator's part of a one-record transaction
// of transaction version 2, as the broker drives it: the implicit add of
// the partition with its record waited for (CheckProduceAt, Pending.Wait),
// then EndTxnV2(commit), whose decision overlaps its markers. The records
// go through the shared WAL in a temporary directory; the markers are not
// written (WriteMarkers returns at once). Allocations per transaction are
// what it measures: with 16-64 producers the broker's CPU, not the disk,
// sets the pace, and the coordinator's share of it is this work.
//
//	go test ./internal/txn -run '^$' -bench TxnV2 -benchmem -count 5
func BenchmarkTxnV2(b *testing.B) {
	fs, dir := vfs.OS(), b.TempDir()
	w, rp, err := wal.Open(wal.Options{FS: fs, Dir: filepath.Join(dir, "wal")})
	if err != nil {
		b.Fatal(err)
	}
	if err := rp.Done(); err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	s := newSink()
	cfg := s.config(fs, time.Now)
	cfg.Dir = filepath.Join(dir, "transactions")
	cfg.WAL, cfg.Fsync = w, acceptor.FsyncAlways
	cfg.WriteMarkers = func(int64, int16, bool, []TopicPartition, int16) error { return nil }
	cfg.OpenTransactions = nil
	c, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	pid, epoch, code := c.InitProducerID("bench", 60_000, -1, -1)
	if code != 0 {
		b.Fatalf("InitProducerID: code %d", code)
	}
	var base int64
	b.ReportAllocs()
	for b.Loop() {
		code, pend := c.CheckProduceAt(pid, epoch, "t", 0, base, true)
		if code != 0 || pend == nil {
			b.Fatalf("implicit add: code %d, pending %v", code, pend)
		}
		if err := pend.Wait(); err != nil {
			b.Fatal(err)
		}
		base += 2 // the batch and the marker
		if pid, epoch, code = c.EndTxnV2("bench", pid, epoch, true); code != 0 {
			b.Fatalf("EndTxnV2: code %d", code)
		}
	}
}
