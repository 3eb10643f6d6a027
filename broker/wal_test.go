package broker

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/vfs"
)

// TestWALCrashRestart: with the shared write-ahead log, acknowledged
// produces to many partitions are durable before their partitions'
// segment files are fsynced; after a machine crash the next start
// replays the WAL into the logs and every acknowledged batch is there,
// with contiguous offsets. A start with the WAL off replays it too and
// removes it. A topic deleted and recreated under the same name (a new
// topic ID) gets none of the old topic's entries. The partitions keep
// their newest bytes in memory (the write-behind tail) rather than
// writing each produce to their segment files, so the crash loses
// those bytes from the files and the replay restores them.
func TestWALCrashRestart(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex // guards partSyncs, unsyncedWrites and written
	partSyncs := 0
	// Writes to a segment file followed by another write of it before
	// any sync: without the tail, one per produce (the WAL makes it
	// durable); with it, segment files are written only when the tail
	// fills or just before a sync.
	unsyncedWrites, written := 0, map[string]bool{}
	mem.Inject(func(op vfs.Op) error {
		if strings.HasPrefix(op.Name, "/data/topics/") {
			mu.Lock()
			switch {
			case op.Kind == vfs.OpSync:
				partSyncs++
				written[op.Name] = false
			case op.Kind == vfs.OpWrite && strings.HasSuffix(op.Name, ".log"):
				if written[op.Name] {
					unsyncedWrites++
				}
				written[op.Name] = true
			}
			mu.Unlock()
		}
		return nil
	})
	b := newBroker(t, "/data", withFS(mem), withWALSegmentBytes(256<<10))
	const topic, parts = "walled", 8
	ctx := context.Background()
	if err := b.CreateTopic(ctx, topic, parts, nil); err != nil {
		t.Fatal(err)
	}
	// A topic written, deleted and recreated: its old entries stay in
	// the WAL under the old topic ID.
	if err := b.CreateTopic(ctx, "again", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, b.Addr())
	old := &fillRun{t: t, topic: "again", parts: 1, acked: map[int32][]int64{}}
	for range 3 {
		old.produceOK(c)
	}
	if err := b.deleteTopic("again"); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(ctx, "again", 1, nil); err != nil {
		t.Fatal(err)
	}
	again := &fillRun{t: t, topic: "again", parts: 1, acked: map[int32][]int64{}, nextTs: 1_000_000_000}
	again.produceOK(c)

	mu.Lock()
	partSyncs, unsyncedWrites = 0, 0
	mu.Unlock()
	// Batches of about 1 KiB: a partition's tail holds many of them.
	f := &fillRun{t: t, topic: topic, parts: parts, acked: map[int32][]int64{}, valueSize: 200}
	const rounds = 20
	for range rounds {
		f.produceOK(c)
	}
	mu.Lock()
	n, w := partSyncs, unsyncedWrites
	for _, unsynced := range written {
		if unsynced {
			w++
		}
	}
	mu.Unlock()
	if n >= rounds*parts/2 {
		t.Fatalf("%d produces fsynced partition files %d times: the WAL did not carry them", rounds*parts, n)
	}
	if w >= rounds*parts/2 {
		t.Fatalf("%d produces left segment files written and not synced %d times: no write-behind tail", rounds*parts, w)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	crashed2 := mem.CrashClone(vfs.CrashOptions{})

	cb := newBroker(t, "/data", withFS(crashed))
	f.check(cb.Addr())
	again.check(cb.Addr())
	if got := readAll(t, cb.Addr(), "again"); len(got[0]) != fillRecords {
		t.Fatalf("the recreated topic holds %d records, want its own %d", len(got[0]), fillRecords)
	}
	cb.Close()

	// The WAL off: the WAL left by the crash is replayed all the same,
	// then removed.
	ob := newBroker(t, "/data", withFS(crashed2), WAL(false))
	f.check(ob.Addr())
	again.check(ob.Addr())
	if _, err := crashed2.Stat("/data/wal"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the WAL directory survived a start with the WAL off: %v", err)
	}
	ob.Close()
}

// TestWALCoordinatorsCrashRestart: with the WAL, the transaction and
// group coordinators' records are acknowledged once the WAL holds them,
// before their own logs are fsynced; after a machine crash the next start
// replays them from the WAL: the transactional id keeps its producer id
// and its committed transaction, the group its committed offsets.
func TestWALCoordinatorsCrashRestart(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex // guards coordSyncs
	coordSyncs := 0
	mem.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && (strings.HasPrefix(op.Name, "/data/transactions/log-") || strings.HasPrefix(op.Name, "/data/groups/log-")) {
			mu.Lock()
			coordSyncs++
			mu.Unlock()
		}
		return nil
	})
	b := newBroker(t, "/data", withFS(mem))
	ctx := txnCtx(t)
	const topic = "walled-txn"
	if err := b.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("tx-wal"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produceTxn(t, cl, topic, true, "c1", "c2")
	adm := kadm.NewClient(cl)
	if err := adm.CommitAllOffsets(ctx, "g-wal", kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: 1})); err != nil {
		t.Fatal(err)
	}
	before, err := adm.DescribeTransactions(ctx, "tx-wal")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := coordSyncs
	mu.Unlock()
	if n != 0 {
		t.Fatalf("the coordinators' logs were fsynced %d times: their records did not go through the WAL", n)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	crashed2 := mem.CrashClone(vfs.CrashOptions{})

	check := func(what string, cb *Broker) {
		t.Helper()
		rcl, err := kgo.NewClient(kgo.SeedBrokers(cb.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer rcl.Close()
		radm := kadm.NewClient(rcl)
		after, err := radm.DescribeTransactions(ctx, "tx-wal")
		if err != nil {
			t.Fatal(err)
		}
		if after["tx-wal"].ProducerID != before["tx-wal"].ProducerID || after["tx-wal"].ProducerEpoch < before["tx-wal"].ProducerEpoch ||
			after["tx-wal"].State != "CompleteCommit" {
			t.Fatalf("%s: the transactional id is %+v, before the crash %+v", what, after["tx-wal"], before["tx-wal"])
		}
		offs, err := radm.FetchOffsets(ctx, "g-wal")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup(topic, 0); !ok || o.At != 2 {
			t.Fatalf("%s: the group's offset is %+v (found %v), want 2", what, o, ok)
		}
	}
	cb := newBroker(t, "/data", withFS(crashed))
	check("after the crash", cb)
	cb.Close()
	// The WAL off at the next start: its entries are replayed all the
	// same, the coordinators then write their own logs.
	ob := newBroker(t, "/data", withFS(crashed2), WAL(false))
	check("after the crash, restarted with the WAL off", ob)
	ob.Close()
}
