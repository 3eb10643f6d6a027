package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/vfs"
)

// partitionState renders a partition's producer state and transaction
// index (and its last stable offset) for comparison.
func partitionState(p *partition.Partition) string { return p.DescribeState() }

// rescanState is the state a scan of p's whole log rebuilds.
func rescanState(t *testing.T, p *partition.Partition) string {
	t.Helper()
	s, err := p.RescanState()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// moveSnapshotsPastEnd rewrites every snapshot in dir as one of an
// offset far past the log end (valid otherwise), as a log truncated
// after the snapshots were written leaves them.
func moveSnapshotsPastEnd(t *testing.T, fs vfs.FS, dir string) {
	t.Helper()
	offs, err := partition.SnapshotOffsets(fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) == 0 {
		t.Fatalf("no producer snapshot in %s", dir)
	}
	for _, off := range offs {
		name := partition.SnapshotPath(dir, off)
		data, err := vfs.ReadFile(fs, name)
		if err != nil {
			t.Fatal(err)
		}
		// The documented format: a header line with the CRC32C of the
		// JSON body that follows it.
		_, body, _ := bytes.Cut(data, []byte{'\n'})
		var s map[string]any
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatal(err)
		}
		next := int64(s["next"].(float64)) + 1<<30
		s["next"] = next
		if body, err = json.Marshal(s); err != nil {
			t.Fatal(err)
		}
		body = append(body, '\n')
		data = append(fmt.Appendf(nil, "sluice-producers v2 crc32c=%08x\n", crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))), body...)
		if err := vfs.WriteFileAtomic(fs, partition.SnapshotPath(dir, next), data); err != nil {
			t.Fatal(err)
		}
		if err := fs.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

// corruptSnapshot flips a byte in the body of the snapshot at off.
func corruptSnapshot(t *testing.T, fs vfs.FS, dir string, off int64) {
	t.Helper()
	name := partition.SnapshotPath(dir, off)
	data, err := vfs.ReadFile(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-10] ^= 0x01
	if err := vfs.WriteFileAtomic(fs, name, data); err != nil {
		t.Fatal(err)
	}
}

// snapshotWorkload produces, to one partition of a broker that
// snapshots every KiB, idempotent records and committed and aborted
// transactions until the broker has written at least two periodic
// snapshots, then leaves one transaction open.
func snapshotWorkload(t *testing.T, mem *vfs.MemFS, topic string) *Broker {
	t.Helper()
	// The writer writes one snapshot at a time: once it creates the
	// third, the first two are complete and durable.
	var created int
	third := make(chan struct{})
	mem.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpCreate && strings.HasPrefix(filepath.Base(op.Name), "producers-") {
			if created++; created == 3 {
				close(third)
			}
		}
		return nil
	})
	t.Cleanup(func() { mem.Inject(nil) })
	b := newBroker(t, "/data", withFS(mem), withSnapshotInterval(1<<10), withPreallocate(-1))
	ctx := txnCtx(t)
	if err := b.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	idem := newTestClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	tx := newTestClient(t, b.Addr(), kgo.TransactionalID("snap-tx"), kgo.DefaultProduceTopic(topic))
	val := bytes.Repeat([]byte("v"), 200)
	for round := 0; ; round++ {
		for i := 0; i < 3; i++ {
			if err := idem.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		produceTxn(t, tx, topic, round%3 != 0, fmt.Sprintf("t%d", round))
		select {
		case <-third:
		default:
			if round < 1000 {
				continue
			}
			t.Fatalf("no third snapshot after %d rounds", round)
		}
		if round >= 3 {
			break
		}
	}
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return b
}

func newTestClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestProducerSnapshotCrash: after a crash, recovery loads the newest
// periodic snapshot and scans only the log after it; the state equals
// both the state before the crash and a scan of the whole log. A corrupt
// newest snapshot is removed and the older one used; with every snapshot
// corrupt the whole log is scanned; snapshots past the log end (a
// truncated log) are removed, not used.
func TestProducerSnapshotCrash(t *testing.T) {
	mem := vfs.NewMem()
	const topic = "snap-crash"
	b := snapshotWorkload(t, mem, topic)
	before := partitionState(b.partition(topic, 0))
	if !bytes.Contains([]byte(before), []byte("Open:[{")) || !bytes.Contains([]byte(before), []byte("Aborted:[{")) {
		t.Fatalf("the workload left no open or no aborted transaction: %s", before)
	}

	reopen := func(t *testing.T, fs *vfs.MemFS) *partition.Partition {
		t.Helper()
		cb := newBroker(t, "/data", withFS(fs), withSnapshotInterval(0))
		p := cb.partition(topic, 0)
		if got := partitionState(p); got != before {
			t.Fatalf("recovered state\n%s\nbefore the crash\n%s", got, before)
		}
		if got, want := partitionState(p), rescanState(t, p); got != want {
			t.Fatalf("recovered state\n%s\nfull scan\n%s", got, want)
		}
		return p
	}
	dir := b.partition(topic, 0).Dir()

	t.Run("newest", func(t *testing.T) {
		crashed := mem.CrashClone(vfs.CrashOptions{})
		offs, err := partition.SnapshotOffsets(crashed, dir)
		if err != nil || len(offs) == 0 {
			t.Fatalf("no snapshot survived the crash (%v)", err)
		}
		p := reopen(t, crashed)
		if !fromSnap(p) || scanned(p) != offs[len(offs)-1] || scanned(p) <= p.StartOffset() {
			t.Fatalf("recovery scanned from %d (from a snapshot: %v), want the newest snapshot's %d", scanned(p), fromSnap(p), offs[len(offs)-1])
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		crashed := mem.CrashClone(vfs.CrashOptions{})
		offs, err := partition.SnapshotOffsets(crashed, dir)
		if err != nil || len(offs) < 2 {
			t.Fatalf("want two snapshots after the crash, have %v (%v)", offs, err)
		}
		newest, older := offs[len(offs)-1], offs[len(offs)-2]
		corruptSnapshot(t, crashed, dir, newest)
		p := reopen(t, crashed)
		if !fromSnap(p) || scanned(p) != older {
			t.Fatalf("recovery scanned from %d (from a snapshot: %v), want the older snapshot's %d", scanned(p), fromSnap(p), older)
		}
		left, _ := partition.SnapshotOffsets(crashed, dir)
		if slices.Contains(left, newest) {
			t.Fatalf("the corrupt snapshot %d was kept: %v", newest, left)
		}
	})
	t.Run("all corrupt", func(t *testing.T) {
		crashed := mem.CrashClone(vfs.CrashOptions{})
		offs, _ := partition.SnapshotOffsets(crashed, dir)
		for _, off := range offs {
			corruptSnapshot(t, crashed, dir, off)
		}
		p := reopen(t, crashed)
		if fromSnap(p) || scanned(p) != p.StartOffset() {
			t.Fatalf("recovery scanned from %d (from a snapshot: %v), want a full scan", scanned(p), fromSnap(p))
		}
	})
	t.Run("past the log end", func(t *testing.T) {
		crashed := mem.CrashClone(vfs.CrashOptions{})
		moveSnapshotsPastEnd(t, crashed, dir)
		p := reopen(t, crashed)
		if fromSnap(p) {
			t.Fatalf("a snapshot past the log end was used (scanned from %d)", scanned(p))
		}
		left, _ := partition.SnapshotOffsets(crashed, dir)
		for _, off := range left {
			if off > p.NextOffset() {
				t.Fatalf("snapshot %d past the log end %d was kept", off, p.NextOffset())
			}
		}
	})
}

// TestSnapshotKeep: a broker keeps only the newest snapshotKeep
// snapshots, and a clean restart scans nothing.
func TestSnapshotKeep(t *testing.T) {
	mem := vfs.NewMem()
	const topic = "snap-keep"
	b := snapshotWorkload(t, mem, topic)
	dir := b.partition(topic, 0).Dir()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	offs, err := partition.SnapshotOffsets(mem, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) > partition.SnapshotKeep {
		t.Fatalf("%d snapshots kept: %v", len(offs), offs)
	}
	cb := newBroker(t, "/data", withFS(mem))
	p := cb.partition(topic, 0)
	if !fromSnap(p) || scanned(p) != p.NextOffset() {
		t.Fatalf("clean restart scanned from %d (from a snapshot: %v), log end %d", scanned(p), fromSnap(p), p.NextOffset())
	}
}

// snapKillChildEnv, when set in the environment, turns
// TestProducerSnapshotKill into the child: a broker on that directory
// taking idempotent and transactional produce until it is killed.
const snapKillChildEnv = "SLUICE_SNAPSHOT_KILL_CHILD_DIR"

// TestProducerSnapshotKill re-executes the test binary as a child broker
// under idempotent and transactional load, snapshotting every KiB, and
// kills it with SIGKILL once it has written periodic snapshots. Opening
// the directory then loads a snapshot and scans only the log after it,
// and the state equals a scan of the whole log.
func TestProducerSnapshotKill(t *testing.T) {
	if dir := os.Getenv(snapKillChildEnv); dir != "" {
		snapKillChild(t, dir)
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL is not available on windows")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProducerSnapshotKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), snapKillChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	rounds, killed := 0, false
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "snapshots ") {
			continue // test framework chatter
		}
		// Kill mid-load, right after the first snapshots.
		if rounds++; rounds == 1 {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before it was killed: %v", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed by SIGKILL: %v", err)
	}
	// New opens every partition (and rebuilds its state) without
	// starting the coordinators, which could write markers meanwhile.
	b, err := New(DataDir(dir), ListenAddr("127.0.0.1:0"), withSnapshotInterval(0))
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer b.Close()
	p := b.partition("snap-kill", 0)
	if p == nil {
		t.Fatal("topic snap-kill missing after SIGKILL")
	}
	if !fromSnap(p) || scanned(p) <= p.StartOffset() {
		t.Fatalf("recovery scanned from %d (from a snapshot: %v)", scanned(p), fromSnap(p))
	}
	if got, want := partitionState(p), rescanState(t, p); got != want {
		t.Fatalf("recovered state\n%s\nfull scan\n%s", got, want)
	}
}

// snapKillChild is the child of TestProducerSnapshotKill: it produces
// rounds of idempotent records and committed and aborted transactions,
// printing "snapshots <n>" after each round once the partition has two
// or more snapshots, until it is killed.
func snapKillChild(t *testing.T, dir string) {
	b := newBroker(t, dir, withSnapshotInterval(1<<10))
	ctx := context.Background()
	if err := b.CreateTopic(ctx, "snap-kill", 1, nil); err != nil {
		t.Fatal(err)
	}
	idem := newTestClient(t, b.Addr(), kgo.DefaultProduceTopic("snap-kill"))
	tx := newTestClient(t, b.Addr(), kgo.TransactionalID("snap-kill-tx"), kgo.DefaultProduceTopic("snap-kill"))
	p := b.partition("snap-kill", 0)
	val := bytes.Repeat([]byte("v"), 200)
	for round := 0; ; round++ {
		for i := 0; i < 3; i++ {
			if err := idem.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := tx.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := tx.EndTransaction(ctx, kgo.TransactionEndTry(round%3 != 0)); err != nil {
			t.Fatal(err)
		}
		if offs, err := partition.SnapshotOffsets(vfs.OS(), p.Dir()); err == nil && len(offs) >= 2 {
			fmt.Printf("snapshots %d\n", len(offs))
		}
	}
}

// scanned and fromSnap report where a partition's recovery scanned from.
func scanned(p *partition.Partition) int64 { off, _ := p.RecoveredFrom(); return off }
func fromSnap(p *partition.Partition) bool { _, ok := p.RecoveredFrom(); return ok }
