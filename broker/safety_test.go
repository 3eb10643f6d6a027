package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// treeState lists every file under dir with its size and modification
// time, to show that something changed nothing.
func treeState(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %d %d", p, fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestSecondBrokerOnLockedDir: a second embedded broker on a directory in
// use fails at once, naming the directory and the holder's pid, and
// changes nothing on disk; after Close the directory can be opened again.
func TestSecondBrokerOnLockedDir(t *testing.T) {
	dir := t.TempDir()
	// No zeros written ahead, no WAL: the first broker's idle partition
	// would otherwise grow its segment, and the WAL prepare its next
	// one, between the two snapshots.
	b := newBroker(t, dir, withPreallocate(-1), WAL(false))
	if _, err := b.AppendBatch(context.Background(), "t", 0, storagetest.MakeBatch(3, 10, 1), -1); err != nil {
		t.Fatal(err)
	}
	before := treeState(t, dir)
	b2, err := New(DataDir(dir), ListenAddr("127.0.0.1:0"))
	if err == nil {
		b2.Close()
		t.Fatal("a second broker opened a directory in use")
	}
	if !errors.Is(err, vfs.ErrLocked) || !strings.Contains(err.Error(), dir) ||
		!strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
		t.Fatalf("error %q: want ErrLocked naming %s and process %d", err, dir, os.Getpid())
	}
	if after := treeState(t, dir); after != before {
		t.Fatalf("the refused broker changed the directory:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b3 := newBroker(t, dir)
	if off := b3.partition("t", 0).HighWatermark(); off != 3 {
		t.Fatalf("reopened: high watermark %d, want 3", off)
	}
}

// waitHealthy waits until every partition of topic takes appends.
func waitHealthy(t *testing.T, b *Broker, topic string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for _, p := range b.lookup(topic).parts {
		for {
			ch := p.HealthChanged()
			if p.Err() == nil {
				break
			}
			select {
			case <-ch:
			case <-timeout:
				t.Fatalf("%s/%d did not heal: %v", topic, p.Index(), p.Err())
			}
		}
	}
}

// produceTo sends one acks=all batch to a partition and returns its error
// code and message.
func produceTo(c *rawConn, topic string, part int32, records []byte) (int16, string) {
	req := produceReq(topic, -1, records)
	req.Topics[0].Partitions[0].Partition = part
	resp := c.roundTrip(req).(*kmsg.ProduceResponse)
	sp := resp.Topics[0].Partitions[0]
	return sp.ErrorCode, ptrStr(sp.ErrorMessage)
}

// fillRun is one disk-full scenario's bookkeeping: the timestamps of the
// batches each partition acknowledged (a batch is identified by its
// first record's timestamp, unique in the test).
type fillRun struct {
	t      *testing.T
	topic  string
	parts  int32
	nextTs int64
	acked  map[int32][]int64
	// between, when set, runs after each round of produces (the disk
	// guard test waits there for the next free-space check, so that
	// the check it asserts on runs between writes however busy the
	// machine is).
	between func()
	// valueSize is each record's value size; 0: 2000 bytes.
	valueSize int
}

const fillRecords = 5 // records per batch

func (f *fillRun) batch() ([]byte, int64) {
	f.nextTs += 1000
	size := f.valueSize
	if size == 0 {
		size = 2000
	}
	return storagetest.Build(storagetest.Spec{Records: fillRecords, ValueSize: size, Timestamp: f.nextTs,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}), f.nextTs
}

// fill produces round-robin until every partition has been refused
// refusals times, checking each refusal's code; it returns the messages.
func (f *fillRun) fill(c *rawConn, refusals int) []string {
	f.t.Helper()
	refused := map[int32]int{}
	var msgs []string
	for round := 0; ; round++ {
		if round > 100000 {
			f.t.Fatalf("the disk never filled: %v", refused)
		}
		done := true
		for p := int32(0); p < f.parts; p++ {
			if refused[p] >= refusals {
				continue
			}
			done = false
			b, ts := f.batch()
			code, msg := produceTo(c, f.topic, p, b)
			switch code {
			case 0:
				f.acked[p] = append(f.acked[p], ts)
			case kerr.KafkaStorageError.Code:
				refused[p]++
				msgs = append(msgs, msg)
			default:
				f.t.Fatalf("produce to %s/%d: %v %s", f.topic, p, kerr.ErrorForCode(code), msg)
			}
		}
		if !done && f.between != nil {
			f.between()
		}
		if done {
			f.t.Logf("%s: %d rounds, acknowledged %d batches on partition 0 before the disk was full", f.topic, round, len(f.acked[0]))
			return msgs
		}
	}
}

// produceOK produces one batch to every partition and requires success.
func (f *fillRun) produceOK(c *rawConn) {
	f.t.Helper()
	for p := int32(0); p < f.parts; p++ {
		b, ts := f.batch()
		if code, msg := produceTo(c, f.topic, p, b); code != 0 {
			f.t.Fatalf("produce to %s/%d after space was freed: %v %s", f.topic, p, kerr.ErrorForCode(code), msg)
		}
		f.acked[p] = append(f.acked[p], ts)
	}
}

// check reads every partition through a kgo consumer and requires every
// acknowledged batch, whole, with offsets contiguous from 0.
func (f *fillRun) check(addr string) {
	f.t.Helper()
	got := readAll(f.t, addr, f.topic)
	for p := int32(0); p < f.parts; p++ {
		have := map[int64]int{}
		for i, r := range got[p] {
			if r.Offset != int64(i) {
				f.t.Fatalf("%s/%d: record %d has offset %d", f.topic, p, i, r.Offset)
			}
			ms := r.Timestamp.UnixMilli()
			have[ms-ms%1000]++
		}
		for _, ts := range f.acked[p] {
			if have[ts] != fillRecords {
				f.t.Fatalf("%s/%d: acknowledged batch %d has %d of %d records after restart", f.topic, p, ts, have[ts], fillRecords)
			}
		}
	}
}

// readAll consumes every partition of topic up to its end offset.
func readAll(t *testing.T, addr, topic string) map[int32][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	admin.Close()
	if err != nil || ends.Error() != nil {
		t.Fatalf("ListEndOffsets: %v %v", err, ends.Error())
	}
	want := map[int32]int64{}
	offs := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		offs[o.Partition] = kgo.NewOffset().At(0)
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]*kgo.Record{}
	pending := func() bool {
		for p, end := range want {
			if int64(len(got[p])) < end {
				return true
			}
		}
		return false
	}
	for pending() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (have %d partitions' records, want ends %v)", topic, ctx.Err(), len(got), want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r) })
	}
	for p, end := range want {
		if int64(len(got[p])) != end {
			t.Fatalf("%s/%d: read %d records, end offset %d", topic, p, len(got[p]), end)
		}
	}
	return got
}

// memFiller takes space on a MemFS with one file, and frees it.
func memFiller(t *testing.T, mem *vfs.MemFS, name string, n int) func() {
	t.Helper()
	f, err := mem.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return func() {
		if err := mem.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDiskFullCrashFS fills a small crash filesystem with the guard off,
// so that appends meet ENOSPC: the partitions fail, every acknowledged
// record survives, the same partitions take appends again once space is
// freed, without a restart, and a crash and a restart both find
// everything acknowledged.
func TestDiskFullCrashFS(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(2 << 20)
	b := newBroker(t, "/data", withFS(mem), DiskLowWatermark(0), withHealBackoff(time.Millisecond))
	const topic = "full"
	if err := b.CreateTopic(context.Background(), topic, 3, nil); err != nil {
		t.Fatal(err)
	}
	free := memFiller(t, mem, "/data/filler", 512<<10)
	c := dialRaw(t, b.Addr())
	f := &fillRun{t: t, topic: topic, parts: 3, acked: map[int32][]int64{}}
	msgs := f.fill(c, 3)
	for _, m := range msgs {
		if !strings.Contains(m, syscall.ENOSPC.Error()) {
			t.Fatalf("refusal %q does not name the cause (%v)", m, syscall.ENOSPC)
		}
	}
	free()
	waitHealthy(t, b, topic)
	f.produceOK(c)

	crashed := mem.CrashClone(vfs.CrashOptions{})
	cb := newBroker(t, "/data", withFS(crashed))
	f.check(cb.Addr())
	cb.Close()

	addr := b.Addr()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b2 := newBroker(t, "/data", withFS(mem), ListenAddr(addr))
	f.check(b2.Addr())
	c2 := dialRaw(t, b2.Addr())
	f.produceOK(c2)
}

// TestDiskGuard: below the low watermark produce is refused per
// partition with KAFKA_STORAGE_ERROR saying the disk is full, before
// any write fails; no partition fails; once space is freed produce works
// again, and the gauge follows.
func TestDiskGuard(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(4 << 20)
	b := newBroker(t, "/data", withFS(mem), DiskLowWatermark(1<<20), DiskCheckInterval(5*time.Millisecond))
	const topic = "guarded"
	if err := b.CreateTopic(context.Background(), topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	free := memFiller(t, mem, "/data/filler", 1<<20)
	c := dialRaw(t, b.Addr())
	f := &fillRun{t: t, topic: topic, parts: 2, acked: map[int32][]int64{}}
	f.between = func() { <-b.diskChecked() }
	msgs := f.fill(c, 2)
	for _, m := range msgs {
		if !strings.Contains(m, "disk full") || !strings.Contains(m, "low watermark") {
			t.Fatalf("refusal %q does not say the disk is full", m)
		}
	}
	if u, _ := mem.Usage("/data"); u.Free == 0 {
		t.Fatal("the disk filled up: the guard refused too late")
	}
	for _, p := range b.lookup(topic).parts {
		if err := p.Err(); err != nil {
			t.Fatalf("%s/%d failed under the guard: %v", topic, p.Index(), err)
		}
	}
	if free, low := b.DiskFree(); !low || free >= 1<<20 {
		t.Fatalf("DiskFree = %d, %v; want below 1 MiB and low", free, low)
	}
	free()
	for {
		ch := b.diskChecked()
		if _, low := b.DiskFree(); !low {
			break
		}
		<-ch
	}
	f.produceOK(c)
	f.check(b.Addr())
}

// TestEIOThenHealthy: fsyncs fail with EIO; the append they cover is
// refused and never visible; once the disk works the partition heals by
// itself, the unsynced bytes are gone, new appends follow the
// acknowledged ones, and a crash keeps exactly what was acknowledged.
func TestEIOThenHealthy(t *testing.T) {
	// Without the WAL the partition's own fsync fails; with it, the WAL's.
	for _, wal := range []bool{false, true} {
		t.Run(fmt.Sprintf("wal=%v", wal), func(t *testing.T) { testEIOThenHealthy(t, wal) })
	}
}

func testEIOThenHealthy(t *testing.T, wal bool) {
	mem := vfs.NewMem()
	b := newBroker(t, "/data", withFS(mem), withHealBackoff(time.Millisecond), WAL(wal))
	// With the WAL, the fsync a cycle waits for is the WAL's, or the
	// partition's own when it writes alone (as here) or much: fail both.
	failing := func(name string) bool {
		return strings.HasPrefix(name, "/data/topics/eio/") || (wal && strings.HasPrefix(name, "/data/wal/"))
	}
	const topic = "eio"
	if err := b.CreateTopic(context.Background(), topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, b.Addr())
	f := &fillRun{t: t, topic: topic, parts: 1, acked: map[int32][]int64{}}
	f.produceOK(c) // offsets 0..4

	p := b.partition(topic, 0)
	health := p.HealthChanged()
	mem.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && failing(op.Name) {
			return vfs.Errno(op, syscall.EIO)
		}
		return nil
	})
	bad, _ := f.batch()
	if code, msg := produceTo(c, topic, 0, bad); code != kerr.KafkaStorageError.Code || !strings.Contains(msg, syscall.EIO.Error()) {
		t.Fatalf("produce under EIO: %v %q; want KAFKA_STORAGE_ERROR naming EIO", kerr.ErrorForCode(code), msg)
	}
	<-health
	if hw := p.HighWatermark(); hw != fillRecords {
		t.Fatalf("high watermark %d after the failed fsync, want %d", hw, fillRecords)
	}
	if got := readAll(t, b.Addr(), topic); len(got[0]) != fillRecords {
		t.Fatalf("a consumer sees %d records, want the %d acknowledged", len(got[0]), fillRecords)
	}
	mem.Inject(nil)
	waitHealthy(t, b, topic)
	if next := p.Log().NextOffset(); next != fillRecords {
		t.Fatalf("healed log ends at %d, want %d: unsynced bytes were kept", next, fillRecords)
	}
	f.produceOK(c) // offsets 5..9
	if hw := p.HighWatermark(); hw != 2*fillRecords {
		t.Fatalf("high watermark %d, want %d", hw, 2*fillRecords)
	}
	crashed := mem.CrashClone(vfs.CrashOptions{})
	cb := newBroker(t, "/data", withFS(crashed))
	got := readAll(t, cb.Addr(), topic)
	f.check(cb.Addr())
	if len(got[0]) != 2*fillRecords {
		t.Fatalf("after a crash: %d records, want %d", len(got[0]), 2*fillRecords)
	}
	var ts []int64
	for _, r := range got[0] {
		ts = append(ts, r.Timestamp.UnixMilli())
	}
	if !sort.SliceIsSorted(ts, func(i, j int) bool { return ts[i] < ts[j] }) {
		t.Fatalf("records out of order: %v", ts)
	}
}

// TestDiskFullTmpfs is TestDiskFullCrashFS on a real filesystem: a small
// tmpfs mounted for the test (skipped where mounting is not permitted).
func TestDiskFullTmpfs(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8m"); err != nil {
		if os.Getenv("CI") == "true" && !errors.Is(err, syscall.EPERM) {
			t.Fatalf("mount tmpfs: %v", err)
		}
		t.Skipf("cannot mount a tmpfs here (%v); run as root to test a real full disk", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	data := filepath.Join(dir, "data")
	b := newBroker(t, data, DiskLowWatermark(0), withHealBackoff(time.Millisecond))
	const topic = "full"
	if err := b.CreateTopic(context.Background(), topic, 3, nil); err != nil {
		t.Fatal(err)
	}
	// The filler frees room enough, once removed, for the healed
	// partitions' zeros ahead (up to 256 KiB each), their batches and the
	// write-ahead log's copy of them.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, b.Addr())
	f := &fillRun{t: t, topic: topic, parts: 3, acked: map[int32][]int64{}}
	for _, m := range f.fill(c, 3) {
		if !strings.Contains(m, syscall.ENOSPC.Error()) {
			t.Fatalf("refusal %q does not name the cause (%v)", m, syscall.ENOSPC)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, b, topic)
	f.produceOK(c)
	addr := b.Addr()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	b2 := newBroker(t, data, ListenAddr(addr), DiskLowWatermark(0))
	f.check(b2.Addr())
	f.produceOK(dialRaw(t, b2.Addr()))
	if err := b2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestAdminUnderFaults: DeleteTopics answers success when the topic is
// gone even though the disk is full (closing its partitions fails), and
// an error only when the topic is still there (its rename failed), in
// which case the topic keeps working. A CreatePartitions that fails
// leaves no partition behind, and a stray partition directory left by a
// crash is removed at the next start.
func TestAdminUnderFaults(t *testing.T) {
	mem := vfs.NewMem()
	b := newBroker(t, "/data", withFS(mem))
	ctx := context.Background()
	for _, name := range []string{"gone", "kept"} {
		if err := b.CreateTopic(ctx, name, 2, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.AppendBatch(ctx, name, 0, storagetest.MakeBatch(2, 10, 1), -1); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// A full disk: every write, create and fsync fails.
	mem.Inject(func(op vfs.Op) error {
		switch op.Kind {
		case vfs.OpWrite, vfs.OpCreate, vfs.OpSync:
			return vfs.Errno(op, syscall.ENOSPC)
		}
		return nil
	})
	res, err := adm.DeleteTopics(ctx, "gone")
	if err != nil || res["gone"].Err != nil {
		t.Fatalf("DeleteTopics on a full disk: %v %v, want success", err, res["gone"].Err)
	}
	if b.lookup("gone") != nil {
		t.Fatal("the deleted topic is still listed")
	}
	if _, err := mem.Stat("/data/topics/gone"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted topic's directory: %v", err)
	}

	// A failed rename: the topic is not deleted, the answer says so, and
	// the topic still works.
	mem.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpRename && strings.HasPrefix(op.Name, "/data/topics/kept") {
			return vfs.Errno(op, syscall.EIO)
		}
		return nil
	})
	res, err = adm.DeleteTopics(ctx, "kept")
	if err != nil || !errors.Is(res["kept"].Err, kerr.KafkaStorageError) {
		t.Fatalf("DeleteTopics with a failing rename: %v %v, want KAFKA_STORAGE_ERROR", err, res["kept"].Err)
	}
	if off, err := b.AppendBatch(ctx, "kept", 0, storagetest.MakeBatch(1, 10, 2), -1); err != nil || off != 2 {
		t.Fatalf("append to the topic whose deletion failed: %d %v, want offset 2", off, err)
	}

	// CreatePartitions whose topic.json cannot be written adds nothing.
	mem.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpCreate && strings.HasSuffix(op.Name, "topic.json.tmp") {
			return vfs.Errno(op, syscall.ENOSPC)
		}
		return nil
	})
	cp, err := adm.CreatePartitions(ctx, 2, "kept")
	if err != nil || !errors.Is(cp["kept"].Err, kerr.KafkaStorageError) {
		t.Fatalf("CreatePartitions with a failing write: %v %v", err, cp["kept"].Err)
	}
	mem.Inject(nil)
	if n := len(b.lookup("kept").parts); n != 2 {
		t.Fatalf("%d partitions after a failed CreatePartitions, want 2", n)
	}
	for _, p := range []string{"/data/topics/kept/2", "/data/topics/kept/3"} {
		if _, err := mem.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left by a failed CreatePartitions: %v", p, err)
		}
	}

	// A crash between creating a partition and writing topic.json leaves
	// a directory with data: the next start removes it.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	mem.MkdirAll("/data/topics/kept/2")
	f, _ := mem.Create("/data/topics/kept/2/" + fmt.Sprintf("%020d.log", 0))
	f.Write(storagetest.MakeBatch(1, 10, 3))
	f.Close()
	mem.MkdirAll("/data/deleted/old.0123")
	b2 := newBroker(t, "/data", withFS(mem))
	for _, p := range []string{"/data/topics/kept/2", "/data/deleted/old.0123"} {
		if _, err := mem.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s survived the start: %v", p, err)
		}
	}
	if err := b2.addPartitions("kept", 3, false); err != nil {
		t.Fatal(err)
	}
	if hw := b2.partition("kept", 2).HighWatermark(); hw != 0 {
		t.Fatalf("new partition 2 holds %d records, want none", hw)
	}
}

// TestIdempotentRetryAfterHeal: an idempotent batch that passed the
// sequence check but whose fsync failed is cut when the partition heals;
// the producer's retry of the same sequence must be written again, not
// answered as a duplicate of records that no longer exist.
func TestIdempotentRetryAfterHeal(t *testing.T) {
	for _, wal := range []bool{false, true} {
		t.Run(fmt.Sprintf("wal=%v", wal), func(t *testing.T) { testIdempotentRetryAfterHeal(t, wal) })
	}
}

func testIdempotentRetryAfterHeal(t *testing.T, wal bool) {
	mem := vfs.NewMem()
	b := newBroker(t, "/data", withFS(mem), withHealBackoff(time.Millisecond), WAL(wal))
	// With the WAL, the fsync a cycle waits for is the WAL's, or the
	// partition's own when it writes alone (as here) or much: fail both.
	failing := func(name string) bool {
		return strings.HasPrefix(name, "/data/topics/idem-heal/") || (wal && strings.HasPrefix(name, "/data/wal/"))
	}
	const topic = "idem-heal"
	if err := b.CreateTopic(context.Background(), topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, b.Addr())
	pid, epoch := initPID(c, -1, -1)
	if got := produceOne(c, topic, idemBatch(pid, epoch, 0, 3)); got.ErrorCode != 0 {
		t.Fatalf("first batch: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	mem.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && failing(op.Name) {
			return vfs.Errno(op, syscall.EIO)
		}
		return nil
	})
	if got := produceOne(c, topic, idemBatch(pid, epoch, 3, 2)); got.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("batch under EIO: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(got.ErrorCode))
	}
	mem.Inject(nil)
	waitHealthy(t, b, topic)
	got := produceOne(c, topic, idemBatch(pid, epoch, 3, 2))
	if got.ErrorCode != 0 || got.BaseOffset != 3 {
		t.Fatalf("retry after healing: %v at %d, want success at offset 3", kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
	}
	if end := latestOffset(c, topic); end != 5 {
		t.Fatalf("log end %d after the retry, want 5: the retry was taken for a duplicate", end)
	}
	if got := produceOne(c, topic, idemBatch(pid, epoch, 3, 2)); got.ErrorCode != 0 || got.BaseOffset != 3 {
		t.Fatalf("a second retry: %v at %d, want the duplicate's offset 3", kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
	}
	if end := latestOffset(c, topic); end != 5 {
		t.Fatalf("log end %d after a duplicate, want 5", end)
	}
}
