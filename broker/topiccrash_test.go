package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicStep is one step of the topic lifecycle crash test and the topics
// (name: partitions) that exist once it is acknowledged.
type topicStep struct {
	name  string
	run   func(b *Broker) error
	after map[string]int
}

func topicSteps() []topicStep {
	ctx := context.Background()
	return []topicStep{
		{"create a", func(b *Broker) error { return b.CreateTopic(ctx, "a", 2, nil) }, map[string]int{"a": 2}},
		{"create b", func(b *Broker) error { return b.CreateTopic(ctx, "b", 1, nil) }, map[string]int{"a": 2, "b": 1}},
		{"grow b", func(b *Broker) error { return b.addPartitions("b", 3, false) }, map[string]int{"a": 2, "b": 3}},
		{"delete a", func(b *Broker) error { return b.deleteTopic("a") }, map[string]int{"b": 3}},
		{"create a again", func(b *Broker) error { return b.CreateTopic(ctx, "a", 1, nil) }, map[string]int{"a": 1, "b": 3}},
	}
}

// topicsOf lists b's topics as name: partitions.
func topicsOf(b *Broker) string {
	m := map[string]int{}
	for _, t := range b.Topics() {
		m[t.Name] = len(t.Partitions)
	}
	return fmt.Sprint(m)
}

// TestTopicLifecycleCrashAtEveryBoundary cuts the power before every
// mutating filesystem operation of a broker creating, growing and
// deleting topics (vfs.MemFS.CrashBefore): the broker restarted on what
// the cut left opens, and holds the topics after the last step
// acknowledged before the cut or after the one in flight, each with its
// partitions' directories: a topic created, grown or deleted is durable
// once acknowledged.
func TestTopicLifecycleCrashAtEveryBoundary(t *testing.T) {
	steps := topicSteps()
	clean := vfs.NewMem()
	b := newBroker(t, "/data", withFS(clean), WAL(false))
	base := clean.Seq()
	for _, s := range steps {
		if err := s.run(b); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	total := clean.Seq()
	b.Close()
	states := []string{fmt.Sprint(map[string]int{})}
	for _, s := range steps {
		states = append(states, fmt.Sprint(s.after))
	}
	for n := base + 1; n <= total; n++ {
		fs := vfs.NewMem()
		b := newBroker(t, "/data", withFS(fs), WAL(false))
		cut := fs.CrashBefore(n, vfs.CrashOptions{})
		acked := 0
		for _, s := range steps {
			if err := s.run(b); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if fs.Seq() < n {
				acked++ // acknowledged before the cut
			}
		}
		b.Close()
		crashed := cut()
		if crashed == nil {
			t.Fatalf("the workload ran fewer than %d operations", n)
		}
		rb, err := New(DataDir("/data"), ListenAddr("127.0.0.1:0"), withFS(crashed), WAL(false))
		if err != nil {
			t.Fatalf("cut before op %d after %d acknowledged steps: restart: %v", n, acked, err)
		}
		got := topicsOf(rb)
		var missing []string
		for _, tp := range rb.Topics() {
			for i := range tp.Partitions {
				dir := fmt.Sprintf("/data/topics/%s/%d", tp.Name, i)
				if _, err := crashed.Stat(dir); err != nil {
					missing = append(missing, dir)
				}
			}
		}
		sort.Strings(missing)
		if got != states[acked] && (acked+1 >= len(states) || got != states[acked+1]) {
			t.Fatalf("cut before op %d after %d acknowledged steps: topics %s, want %s or the next step's", n, acked, got, states[acked])
		}
		// A partition's directory is made by its preparation or its
		// first write; one that has none after the restart must hold
		// nothing (no step writes records) and is opened as new.
		for _, dir := range missing {
			var idx int32
			topic, i, _ := strings.Cut(strings.TrimPrefix(dir, "/data/topics/"), "/")
			if _, err := fmt.Sscan(i, &idx); err != nil {
				t.Fatal(err)
			}
			if p := rb.partition(topic, idx); p == nil || p.NextOffset() != 0 {
				t.Fatalf("cut before op %d: partition %s has no directory but holds records", n, dir)
			}
		}
		rb.Close()
	}
}

// TestCreatedPartitionsPreparedDurably checks the background preparation
// of a new topic's partitions: their directories and first segments are
// made after the create is answered and synced into place without a
// write, so that a power cut afterwards keeps them.
func TestCreatedPartitionsPreparedDurably(t *testing.T) {
	fs := vfs.NewMem()
	b := newBroker(t, "/data", withFS(fs), WAL(false))
	if err := b.CreateTopic(context.Background(), "t", 8, nil); err != nil {
		t.Fatal(err)
	}
	segs := func(m *vfs.MemFS) int {
		n := 0
		for i := range 8 {
			if _, err := m.Stat(fmt.Sprintf("/data/topics/t/%d/00000000000000000000.log", i)); err == nil {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for segs(fs.CrashClone(vfs.CrashOptions{})) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("after a power cut %d of 8 new partitions have their segment file; want all once prepared", segs(fs.CrashClone(vfs.CrashOptions{})))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNewPartitionFilesMadeByFirstWrite checks a large topic's partitions
// with the WAL on: none makes a file until it is written; a written one
// keeps its first bytes in memory (durable in the WAL) and makes its
// directory and segment at the clean shutdown, and its records survive a
// power cut right after the acknowledgement (the WAL replays them into
// the partition, which has no directory yet) and a clean restart; the
// others stay without files and take writes after both.
func TestNewPartitionFilesMadeByFirstWrite(t *testing.T) {
	const parts = 40 // at least preparedInline: not prepared at the create
	fs := vfs.NewMem()
	b := newBroker(t, "/data", withFS(fs))
	if err := b.CreateTopic(context.Background(), "t", parts, nil); err != nil {
		t.Fatal(err)
	}
	dirs := func(m *vfs.MemFS) []int {
		var have []int
		for i := range parts {
			if _, err := m.Stat(fmt.Sprintf("/data/topics/t/%d", i)); err == nil {
				have = append(have, i)
			}
		}
		return have
	}
	if d := dirs(fs); len(d) != 0 {
		t.Fatalf("partitions %v have a directory before any write", d)
	}
	c := dialRaw(t, b.Addr())
	rec := func(ts int64) []byte {
		return storagetest.Build(storagetest.Spec{Records: 3, ValueSize: 100, Timestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	}
	if code, msg := produceTo(c, "t", 7, rec(1000)); code != 0 {
		t.Fatalf("produce: %v %s", kerr.ErrorForCode(code), msg)
	}
	// A power cut right after the acknowledgement.
	crashed := fs.CrashClone(vfs.CrashOptions{})
	if d := dirs(fs); len(d) != 0 {
		t.Fatalf("partitions %v have a directory after a small write; want its bytes kept in memory", d)
	}
	if p := b.partition("t", 7); !p.Pending() {
		t.Fatal("partition 7 made its files for 3 records")
	}
	c.nc.Close()
	b.Close()
	if d := dirs(fs); !slices.Equal(d, []int{7}) {
		t.Fatalf("partitions with a directory after a clean shutdown: %v; want [7]", d)
	}
	for name, m := range map[string]*vfs.MemFS{"power cut": crashed, "clean restart": fs} {
		rb := newBroker(t, "/data", withFS(m))
		if p := rb.partition("t", 7); p == nil || p.NextOffset() != 3 {
			t.Fatalf("%s: partition 7 lost its acknowledged records", name)
		}
		rc := dialRaw(t, rb.Addr())
		for _, i := range []int32{7, 0, parts - 1} {
			if code, msg := produceTo(rc, "t", i, rec(2000)); code != 0 {
				t.Fatalf("%s: produce to %d: %v %s", name, i, kerr.ErrorForCode(code), msg)
			}
		}
		if p := rb.partition("t", 7); p.NextOffset() != 6 {
			t.Fatalf("%s: partition 7 next offset %d, want 6", name, p.NextOffset())
		}
		rc.nc.Close()
		rb.Close()
		if p := dirs(m); slices.Contains(p, 3) {
			t.Fatalf("%s: partition 3, never written, has a directory", name)
		}
	}
}

// TestDeleteLargeTopicMakesNoFiles: deleting a large topic whose
// partitions have not all made their files (they make them at their
// first write) makes none of them, leaves nothing at the old path, and a
// deletion that fails leaves the topic's partitions able to make theirs.
func TestDeleteLargeTopicMakesNoFiles(t *testing.T) {
	const parts = 40 // at least preparedInline: not prepared at the create
	fs := vfs.NewMem()
	b := newBroker(t, "/data", withFS(fs))
	ctx := context.Background()
	for _, name := range []string{"t", "u"} {
		if err := b.CreateTopic(ctx, name, parts, nil); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, b.Addr())
	defer c.nc.Close()
	rec := storagetest.Build(storagetest.Spec{Records: 3, ValueSize: 100, Timestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	if code, msg := produceTo(c, "t", 7, rec); code != 0 {
		t.Fatalf("produce: %v %s", kerr.ErrorForCode(code), msg)
	}
	// The written partition's files are made by the maker; the others
	// have none.
	if err := b.partition("t", 7).Prepare(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var created []string
	fs.Inject(func(op vfs.Op) error {
		// Segment files: the written partition's close still writes
		// its index (at the old path, where it fails harmlessly).
		if op.Kind == vfs.OpCreate && strings.HasPrefix(op.Name, "/data/topics/") && strings.HasSuffix(op.Name, ".log") {
			mu.Lock()
			created = append(created, op.Name)
			mu.Unlock()
		}
		return nil
	})
	if err := b.deleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	fs.Inject(nil)
	mu.Lock()
	made := created
	mu.Unlock()
	if len(made) != 0 {
		t.Fatalf("deleting the topic created %d segment files: %v", len(made), made)
	}
	if _, err := fs.Stat("/data/topics/t"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted topic's directory: %v", err)
	}

	// A deletion whose rename fails puts the topic back, and its
	// partitions make their files again.
	fs.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpRename && strings.HasPrefix(op.Name, "/data/topics/u") {
			return vfs.Errno(op, syscall.EIO)
		}
		return nil
	})
	if err := b.deleteTopic("u"); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("deleting with a failing rename: %v, want KAFKA_STORAGE_ERROR", err)
	}
	fs.Inject(nil)
	if code, msg := produceTo(c, "u", 3, rec); code != 0 {
		t.Fatalf("produce after a failed deletion: %v %s", kerr.ErrorForCode(code), msg)
	}
	if err := b.partition("u", 3).Prepare(); err != nil {
		t.Fatalf("a partition of the topic whose deletion failed cannot make its files: %v", err)
	}
	if _, err := fs.Stat("/data/topics/u/3"); err != nil {
		t.Fatal(err)
	}
	c.nc.Close()
	b.Close()
	if _, err := fs.Stat("/data/topics/t"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after the close, the deleted topic's directory: %v", err)
	}
}

// TestPendingPartitionsCheckpointed: a large topic's partitions written a
// little keep their bytes in memory only until the WAL, having sealed
// the segments it keeps, asks them to checkpoint: each then makes its
// files and syncs them, the WAL retires the old segments, and the
// records survive a power cut afterwards.
func TestPendingPartitionsCheckpointed(t *testing.T) {
	const parts = 40 // at least preparedInline: not prepared at the create
	fs := vfs.NewMem()
	b := newBroker(t, "/data", withFS(fs), withWALSegmentBytes(256<<10))
	ctx := context.Background()
	if err := b.CreateTopic(ctx, "t", parts, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateTopic(ctx, "big", 2, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, b.Addr())
	defer c.nc.Close()
	// About 20 KiB each: past the write-behind tail, kept in memory.
	small := storagetest.Build(storagetest.Spec{Records: 20, ValueSize: 1000, Timestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	for i := range int32(parts) {
		if code, msg := produceTo(c, "t", i, small); code != 0 {
			t.Fatalf("produce to %d: %v %s", i, kerr.ErrorForCode(code), msg)
		}
	}
	for i := range parts {
		if !b.partition("t", int32(i)).Pending() {
			t.Fatalf("partition %d made its files for %d bytes", i, len(small))
		}
	}
	if used := b.pendBudget.Used(); used < parts*segmentWriteBehind {
		t.Fatalf("%d bytes counted as kept in memory, want at least %d", used, parts*segmentWriteBehind)
	}
	walFiles := func() int {
		names, err := fs.ReadDir("/data/wal")
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	// inOwnFiles checks that after a power cut every partition's bytes
	// are in its own segment file, not only in the WAL.
	inOwnFiles := func(crashed *vfs.MemFS) error {
		for i := range parts {
			fi, err := crashed.Stat(fmt.Sprintf("/data/topics/t/%d/00000000000000000000.log", i))
			if err != nil {
				return fmt.Errorf("after a power cut partition %d's segment: %w", i, err)
			}
			if fi.Size() < int64(len(small)) {
				return fmt.Errorf("after a power cut partition %d's segment holds %d bytes, want its %d", i, fi.Size(), len(small))
			}
		}
		return nil
	}
	// The WAL keeps about 256 KiB per partition writing before it asks
	// for checkpoints: write several times that to another topic.
	// Two partitions, so that neither writes alone (past the WAL).
	big := storagetest.Build(storagetest.Spec{Records: 8, ValueSize: 1000, Timestamp: 2000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	most := 0
	deadline := time.Now().Add(60 * time.Second)
	for n := int32(0); ; n++ {
		if code, msg := produceTo(c, "big", n%2, big); code != 0 {
			t.Fatalf("produce to big: %v %s", kerr.ErrorForCode(code), msg)
		}
		most = max(most, walFiles())
		made := 0
		for i := range parts {
			if !b.partition("t", int32(i)).Pending() {
				made++
			}
		}
		// A partition's file exists (Pending false) a moment before its
		// checkpoint has synced it and its directory: the power cut
		// below waits for that too.
		if made == parts && walFiles() < most && inOwnFiles(fs.CrashClone(vfs.CrashOptions{})) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d partitions made their files; WAL files %d, most %d; after a power cut: %v",
				made, parts, walFiles(), most, inOwnFiles(fs.CrashClone(vfs.CrashOptions{})))
		}
	}
	if used := b.pendBudget.Used(); used != 0 {
		t.Fatalf("%d bytes counted as kept in memory after every partition made its files", used)
	}
	crashed := fs.CrashClone(vfs.CrashOptions{})
	if err := inOwnFiles(crashed); err != nil {
		t.Fatal(err)
	}
	rb := newBroker(t, "/data", withFS(crashed))
	defer rb.Close()
	got := readAll(t, rb.Addr(), "t")
	for i := range int32(parts) {
		if len(got[i]) != 20 {
			t.Fatalf("partition %d holds %d records after the power cut, want 20", i, len(got[i]))
		}
	}
}

// TestDeletedTopicReleasesWAL: a deleted topic's entries do not hold
// back the WAL's segments (partition.Discard tells the WAL to forget
// them): once the other partitions checkpoint, the segment that held the
// deleted topic's entries is retired.
func TestDeletedTopicReleasesWAL(t *testing.T) {
	fs := vfs.NewMem()
	b := newBroker(t, "/data", withFS(fs), withWALSegmentBytes(256<<10))
	ctx := context.Background()
	for _, name := range []string{"gone", "live"} {
		if err := b.CreateTopic(ctx, name, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, b.Addr())
	defer c.nc.Close()
	rec := storagetest.Build(storagetest.Spec{Records: 8, ValueSize: 1000, Timestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	for i := range int32(2) {
		if code, msg := produceTo(c, "gone", i, rec); code != 0 {
			t.Fatalf("produce to gone: %v %s", kerr.ErrorForCode(code), msg)
		}
	}
	segments := func() []string {
		names, err := fs.ReadDir("/data/wal")
		if err != nil {
			t.Fatal(err)
		}
		var segs []string
		for _, n := range names {
			if strings.HasSuffix(n, ".wal") {
				segs = append(segs, n)
			}
		}
		slices.Sort(segs)
		return segs
	}
	first := segments()[0] // holds the deleted topic's entries
	if err := b.deleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	// Two partitions of another topic, so that neither writes alone
	// (past the WAL), until the WAL has moved past the first segment.
	deadline := time.Now().Add(60 * time.Second)
	for n := int32(0); slices.Contains(segments(), first); n++ {
		if code, msg := produceTo(c, "live", n%2, rec); code != 0 {
			t.Fatalf("produce to live: %v %s", kerr.ErrorForCode(code), msg)
		}
		if time.Now().After(deadline) {
			t.Fatalf("WAL segment %s, holding the deleted topic's entries, still kept among %d", first, len(segments()))
		}
	}
}
