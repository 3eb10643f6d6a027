package broker

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// TestFrameClasses: a frame goes to the smallest class that holds it,
// a buffer back to the largest class it fills, so that a pooled buffer
// always holds the frame that asks for it.
func TestFrameClasses(t *testing.T) {
	for _, n := range []int{1 << 16, 1<<16 + 1, 100 << 10, 1 << 20, 1<<20 + 7, 5 << 20} {
		b := newFrame(n)
		if len(b) != n || cap(b) < n {
			t.Fatalf("newFrame(%d): len %d cap %d", n, len(b), cap(b))
		}
		if k := frameClass(n); cap(b) != 1<<(k+minFrameShift) || (k > 0 && n <= 1<<(k-1+minFrameShift)) {
			t.Fatalf("frame of %d bytes: class %d, capacity %d", n, k, cap(b))
		}
		putFrame(b)
		// sync.Pool may drop what it was given (it does at random under
		// the race detector): a buffer returned must fit, nothing more.
		if g := getFrame(n); g != nil && (len(g) != n || cap(g) < n) {
			t.Fatalf("getFrame(%d): len %d cap %d", n, len(g), cap(g))
		}
	}
	if getFrame(100) != nil {
		t.Fatal("a small frame came from the pool")
	}
}

// TestProduceFramesReused: pipelined produce requests of hundreds of KiB
// (whose frames are pooled and reused) over several partitions, acks=all
// and acks=1, with the WAL (appends mostly written inline, while the
// request is handled) and without (every append queued to its
// partition's goroutine, which reads the frame's bytes later): every
// record reads back with its own value, in order.
//
// With large batches (past the segments' write-behind tail) to a new
// topic, whose partitions keep their first bytes in memory, those bytes
// are kept as slices of the frames they came in (storage.Shared): a frame
// is reused only once no partition keeps it, so every value still reads
// back although later requests take frames from the same pool.
func TestProduceFramesReused(t *testing.T) {
	for _, wal := range []bool{true, false} {
		t.Run(fmt.Sprintf("wal=%v", wal), func(t *testing.T) { testProduceFramesReused(t, wal, 256, 20000, 200, 8<<10) })
	}
	t.Run("large-batches", func(t *testing.T) { testProduceFramesReused(t, true, 64, 6000, 900, 128<<10) })
}

func testProduceFramesReused(t *testing.T, wal bool, parts, n, valueSize int, batchBytes int32) {
	tb := startTest(t, WAL(wal))
	const topic = "frames"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tb.b.CreateTopic(ctx, topic, int32(parts), nil); err != nil {
		t.Fatal(err)
	}
	value := func(i int) []byte {
		v := make([]byte, valueSize+i%300)
		for j := range v {
			v[j] = byte(i*31 + j*7)
		}
		return v
	}
	for round, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.LeaderAck()} {
		// Several large requests in flight at once: the read loop reads
		// the next while the partitions still work on the last.
		opts := []kgo.Opt{kgo.RequiredAcks(acks), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5), kgo.ProducerLinger(5 * time.Millisecond),
			kgo.ProducerBatchMaxBytes(batchBytes)}
		if batchBytes > segmentWriteBehind {
			opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression())) // batches as large as asked
		}
		cl := tb.client(opts...)
		var wg sync.WaitGroup
		var mu sync.Mutex // guards firstErr
		var firstErr error
		for i := round * n; i < (round+1)*n; i++ {
			wg.Add(1)
			r := &kgo.Record{Topic: topic, Partition: int32(i % parts), Key: []byte(fmt.Sprint(i)), Value: value(i)}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			t.Fatalf("produce: %v", firstErr)
		}
		cl.Close()
	}
	if wal && batchBytes > segmentWriteBehind {
		kept := 0
		for i := range parts {
			if tb.b.partition(topic, int32(i)).Pending() {
				kept++
			}
		}
		if kept == 0 || tb.b.pendBudget.SharedBuffers() == 0 {
			t.Fatalf("%d partitions keep their bytes in memory, in %d frames: want some of both", kept, tb.b.pendBudget.SharedBuffers())
		}
	}
	cl := tb.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	last := map[int32]int{} // per partition, the last record index read
	got := 0
	for got < 2*n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, 2*n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			var i int
			if _, err := fmt.Sscan(string(r.Key), &i); err != nil || int32(i%parts) != r.Partition {
				t.Fatalf("record at %d/%d has key %q", r.Partition, r.Offset, r.Key)
			}
			if string(r.Value) != string(value(i)) {
				t.Fatalf("record %d (%d/%d): value differs from the one produced", i, r.Partition, r.Offset)
			}
			if prev, ok := last[r.Partition]; ok && i <= prev {
				t.Fatalf("partition %d: record %d after %d", r.Partition, i, prev)
			}
			last[r.Partition] = i
			got++
		}
	}
}

// TestParallelProduce: a request over many partitions is split between
// goroutines, each item done exactly once; a small request, or one that
// names a partition twice, runs in order on the caller.
func TestParallelProduce(t *testing.T) {
	parts := make([]*partition.Partition, 1000)
	for i := range parts {
		parts[i] = new(partition.Partition)
	}
	for _, c := range []struct {
		name   string
		n      int
		dup    bool
		serial bool
	}{
		{"small", parallelMin - 1, false, true},
		{"many", 1000, false, false},
		{"many with a partition twice", 1000, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			items := make([]*partition.Partition, c.n)
			copy(items, parts)
			if c.dup {
				items[c.n-1] = items[0]
			}
			var mu sync.Mutex // guards order
			var order []int
			done := make([]int, c.n)
			parallelProduce(items, func(i int) *partition.Partition { return items[i] }, func(i int) {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				done[i]++
			})
			for i, d := range done {
				if d != 1 {
					t.Fatalf("item %d done %d times", i, d)
				}
			}
			if c.serial {
				for i, o := range order {
					if o != i {
						t.Fatalf("item %d done at position %d: not in order on one goroutine", o, i)
					}
				}
			}
		})
	}
}

// TestFrameCacheSurvivesCollections: a returned frame is handed out
// again after garbage collections (which may empty a sync.Pool), and the
// cache keeps no more than frameCacheBytes: it refuses a frame past that
// (putFrame then gives it to the pools).
func TestFrameCacheSurvivesCollections(t *testing.T) {
	var s frameStack
	const k = 4 // 1 MiB buffers
	b := make([]byte, 0, 1<<(k+minFrameShift))
	if !s.put(k, b) {
		t.Fatal("an empty cache refused a 1 MiB frame")
	}
	runtime.GC()
	runtime.GC()
	if g := s.get(k); cap(g) != cap(b) || &g[:1][0] != &b[:1][0] {
		t.Fatalf("after two collections the cache gave back a buffer of capacity %d, not the frame it was given", cap(g))
	}
	if g := s.get(k); g != nil {
		t.Fatal("the cache gave the same frame twice")
	}
	kept := 0
	for s.put(k, make([]byte, 0, 1<<(k+minFrameShift))) {
		kept++
	}
	if want := frameCacheBytes >> (k + minFrameShift); kept != want {
		t.Fatalf("the cache kept %d frames of 1 MiB, want %d (frameCacheBytes)", kept, want)
	}
	if s.bytes != frameCacheBytes {
		t.Fatalf("cache holds %d bytes, want %d", s.bytes, frameCacheBytes)
	}
	for range kept {
		if s.get(k) == nil {
			t.Fatal("the cache lost a frame")
		}
	}
	if s.bytes != 0 {
		t.Fatalf("an emptied cache counts %d bytes", s.bytes)
	}
}

// TestProduceFrameSharedOnlyWhenMostlyKept: a Produce frame is held by
// new partitions (storage.Shared) only when its large batches to them
// are most of it; a frame mostly for partitions whose files are made
// (here a topic of 4, made at create) is copied from, and goes back to
// the pool with the reply. Either way every batch reads back.
func TestProduceFrameSharedOnlyWhenMostlyKept(t *testing.T) {
	tb := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tb.b.CreateTopic(ctx, "made", 4, nil); err != nil {
		t.Fatal(err)
	}
	if err := tb.b.CreateTopic(ctx, "new", 64, nil); err != nil {
		t.Fatal(err)
	}
	cl := tb.client()
	batchOf := func(records int) []byte {
		return storagetest.Build(storagetest.Spec{Records: records, ValueSize: 2000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	}
	type tp struct {
		topic string
		part  int32
	}
	produce := func(batches map[tp][]byte) {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 60000
		for _, topic := range []string{"made", "new"} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = topic, tb.b.lookup(topic).id
			for k, raw := range batches {
				if k.topic == topic {
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Partition, rp.Records = k.part, raw
					rt.Partitions = append(rt.Partitions, rp)
				}
			}
			if len(rt.Partitions) > 0 {
				req.Topics = append(req.Topics, rt)
			}
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("produce to %s/%d: error code %d", rt.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
	}
	if !tb.b.partition("new", 0).Pending() || tb.b.partition("made", 0).Pending() {
		t.Fatal("want the 64-partition topic's files not made yet, the 4-partition topic's made")
	}
	// 200 KiB for a made partition, 20 KiB for a new one: copied.
	produce(map[tp][]byte{{"made", 0}: batchOf(100), {"new", 0}: batchOf(10)})
	if n := tb.b.pendBudget.SharedBuffers(); n != 0 {
		t.Fatalf("%d frames held after a request mostly for made partitions, want 0", n)
	}
	// 400 KiB for new partitions: the frame is held.
	produce(map[tp][]byte{{"new", 1}: batchOf(100), {"new", 2}: batchOf(100)})
	if n := tb.b.pendBudget.SharedBuffers(); n != 1 {
		t.Fatalf("%d frames held after a request for new partitions, want 1", n)
	}
	// The held frame's batches read back after the next requests took
	// frames from the pool.
	for range 4 {
		produce(map[tp][]byte{{"made", 1}: batchOf(100), {"made", 2}: batchOf(100)})
	}
	for _, c := range []struct {
		tp
		records int
	}{{tp{"new", 0}, 10}, {tp{"new", 1}, 100}, {tp{"new", 2}, 100}} {
		rc := tb.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: {c.part: kgo.NewOffset().AtStart()}}))
		got := 0
		for got < c.records {
			fs := rc.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("%s/%d: %d of %d records read back: %v", c.topic, c.part, got, c.records, err)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
			got += len(fs.Records())
		}
		if got != c.records {
			t.Fatalf("%s/%d: %d records read back, want %d", c.topic, c.part, got, c.records)
		}
	}
}
