package broker

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"sluice/internal/vfs"
)

// TestWALCrashRestart: with the shared write-ahead log, acknowledged
// produces to many partitions are durable before their partitions'
// segment files are fsynced; after a machine crash the next start
// replays the WAL into the logs and every acknowledged batch is there,
// with contiguous offsets. A start with the WAL off replays it too and
// removes it. A topic deleted and recreated under the same name (a new
// topic ID) gets none of the old topic's entries.
func TestWALCrashRestart(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex // guards partSyncs
	partSyncs := 0
	mem.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.HasPrefix(op.Name, "/data/topics/") {
			mu.Lock()
			partSyncs++
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
	partSyncs = 0
	mu.Unlock()
	f := &fillRun{t: t, topic: topic, parts: parts, acked: map[int32][]int64{}}
	const rounds = 20
	for range rounds {
		f.produceOK(c)
	}
	mu.Lock()
	n := partSyncs
	mu.Unlock()
	if n >= rounds*parts/2 {
		t.Fatalf("%d produces fsynced partition files %d times: the WAL did not carry them", rounds*parts, n)
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
