package acceptor

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// TestIdlePartitionWaitsForWALToAskCheckpoint: a partition over a WAL
// whose appends are all durable waits without its flush tick (a tick
// sent stays unread however often the run goroutine wakes), until the
// WAL seals segments that hold its entries past what it keeps: then the
// next tick checkpoints it, and the WAL no longer holds it back.
func TestIdlePartitionWaitsForWALToAskCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	w, rp, err := wal.Open(wal.Options{FS: fs, Dir: walRoot + "/wal", SegmentBytes: 64 << 10, MaxBytes: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var logs []*storage.Log
	for p := range 3 {
		l, err := storage.Open(fs, walPartDir(walRoot, p), walScfg())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := rp.Apply(walKey(p), l); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
	var tickers []*manualTicker
	var accs []*Acceptor
	for p, l := range logs {
		mt := newManualTicker()
		cfg := testConfig(mt)
		cfg.BufferSize, cfg.QueueSize, cfg.WALMaxCycle = 8<<10, 64, 4<<10
		cfg.WAL = w.For(walKey(p))
		a := Start(l, cfg)
		defer a.Close()
		tickers, accs = append(tickers, mt), append(accs, a)
	}
	quiet := accs[0]
	appendTo := func(a *Acceptor, i int) {
		t.Helper()
		orig := spec{records: 1, valueSize: 1000, durable: true}.bytes(i)
		if _, err := a.Append(context.Background(), &Request{Batches: orig, Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	kickAndWait := func() {
		quiet.kickRun()
		for len(quiet.ch.Load().kick) > 0 {
			runtime.Gosched()
		}
		waitRunIdle(quiet)
	}
	appendTo(accs[1], 0)
	appendTo(quiet, 0) // after another partition's: not alone, so durable in the WAL only
	// The run goroutine may have begun its wait while the append's WAL
	// sync ran (the WAL's flusher finished it): woken, it waits anew.
	kickAndWait()
	tickers[0].mu.Lock()
	flush := tickers[0].chans[time.Second]
	tickers[0].mu.Unlock()
	flush <- time.Time{}
	// Each kick wakes the run goroutine, which looks at its state and
	// waits again: were the tick in its wait, it would be taken half the
	// times at least.
	for range 20 {
		kickAndWait()
	}
	if len(flush) != 1 {
		t.Fatal("an idle partition whose appends are durable took its flush tick before the WAL asked for a checkpoint")
	}
	if w.Behind(walKey(0)) {
		t.Fatal("the WAL asks for a checkpoint before it sealed segments")
	}
	// Two busy partitions, taking turns (neither alone, so their appends
	// go to the WAL), fill it: sealed segments, the quiet partition's
	// entries in the first, past what the WAL keeps. (Their ticks never
	// fire: once asked, they stay behind.)
	for i := 1; !w.Behind(walKey(1)); i++ {
		if i > 1000 {
			t.Fatalf("1000 appends of 1 KiB did not seal the WAL's segments (%d bytes)", w.Size())
		}
		appendTo(accs[1+i%2], i)
	}
	// Asked (by the seal), the quiet partition takes the tick and
	// checkpoints: the WAL stops asking.
	deadline := time.Now().Add(10 * time.Second)
	for w.Behind(walKey(0)) {
		if time.Now().After(deadline) {
			t.Fatalf("the quiet partition did not checkpoint after the WAL asked (tick taken: %v)", len(flush) == 0)
		}
		runtime.Gosched()
	}
	if len(flush) != 0 {
		t.Fatal("checkpointed without its tick")
	}
}
