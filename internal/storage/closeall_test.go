package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// closeAllLogs are the logs of the CloseAll tests: each a directory and
// a configuration (write-behind, zeros written ahead, segments that
// roll), and whether the first round creates it (Create) or opens it.
var closeAllLogs = []struct {
	dir    string
	cfg    Config
	create bool
}{
	{"/data/t/0", Config{SegmentBytes: 2 << 10, IndexInterval: 256, Preallocate: -1}, false},
	{"/data/t/1", Config{SegmentBytes: 2 << 10, IndexInterval: 256, Preallocate: 700, WriteBehind: 600}, false},
	{"/data/t/2", Config{SegmentBytes: 64 << 10, IndexInterval: 256, Preallocate: 700}, true},
	{"/data/t/3", Config{SegmentBytes: 64 << 10, IndexInterval: 256, Preallocate: -1, WriteBehind: 600}, true},
}

// closeAllRun is what the CloseAll workload did to each log: the bytes
// appended, and, at the filesystem operation count (Seq) where each
// durability point was reached, how many of them were durable.
type closeAllRun struct {
	data    [][]byte
	durable [][]durablePoint
	closed  [][]int // the log's size at the end of each CloseAll
}

type durablePoint struct {
	seq int64 // the last operation before the point
	n   int   // bytes durable from then on
}

// durableAt is how many bytes of log i were durable before operation k.
func (r *closeAllRun) durableAt(i int, k int64) int {
	n := 0
	for _, p := range r.durable[i] {
		if p.seq < k {
			n = max(n, p.n)
		}
	}
	return n
}

// runCloseAll opens the logs (the first round creates some), appends
// random batches to each, syncing some of them, and closes them all with
// CloseAll, in two rounds: the second reopens what the first closed, so
// that its close writes over the index files and checkpoints the first
// made. It stops at the first error.
func runCloseAll(fs *vfs.MemFS, seed uint64) (*closeAllRun, error) {
	rng := rand.New(rand.NewPCG(seed, 11))
	r := &closeAllRun{data: make([][]byte, len(closeAllLogs)), durable: make([][]durablePoint, len(closeAllLogs)), closed: make([][]int, len(closeAllLogs))}
	for round := range 2 {
		logs := make([]*Log, len(closeAllLogs))
		for i, c := range closeAllLogs {
			open := Open
			if round == 0 && c.create {
				open = Create
			}
			l, err := open(fs, c.dir, c.cfg)
			if err != nil {
				for _, l := range logs[:i] {
					l.Close()
				}
				return r, err
			}
			logs[i] = l
		}
		var err error
		for n := 0; n < 12 && err == nil; n++ {
			i := rng.IntN(len(logs))
			if round == 0 && i == 2 {
				continue // left as created: CloseAll makes its files
			}
			l := logs[i]
			b, _ := storagetest.WithBaseOffset(storagetest.Build(storagetest.Spec{
				Records: 1 + rng.IntN(4), ValueSize: rng.IntN(900), Timestamp: int64(n), Seed: byte(rng.Uint32()),
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			}), l.NextOffset())
			if err = l.Append(b, nil); err != nil {
				break
			}
			r.data[i] = append(r.data[i], b...)
			if rng.IntN(3) == 0 {
				if err = l.Sync(); err == nil {
					r.durable[i] = append(r.durable[i], durablePoint{fs.Seq(), len(r.data[i])})
				}
			}
		}
		errs := CloseAll(fs, logs, nil)
		if err != nil {
			return r, err
		}
		if err := errors.Join(errs...); err != nil {
			return r, err
		}
		for i := range logs {
			r.durable[i] = append(r.durable[i], durablePoint{fs.Seq(), len(r.data[i])})
			r.closed[i] = append(r.closed[i], len(r.data[i]))
		}
	}
	return r, nil
}

// checkCloseAllRecovered opens each log of a crashed image, before
// operation k: every byte durable then is there, the rest is a prefix of
// what was appended, and a log opened as closed cleanly (its active
// segment not scanned) holds exactly what it held at the end of one of
// the CloseAll rounds.
func checkCloseAllRecovered(t *testing.T, fs vfs.FS, r *closeAllRun, k int64, what string) (clean int) {
	t.Helper()
	for i, c := range closeAllLogs {
		l, err := Open(fs, c.dir, c.cfg)
		if err != nil {
			t.Fatalf("%s: log %d: reopen: %v", what, i, err)
		}
		got := readAll(t, l, 0)
		rep := l.Recovery()
		if err := l.Close(); err != nil {
			t.Fatalf("%s: log %d: close: %v", what, i, err)
		}
		if want := r.durableAt(i, k); len(got) < want {
			t.Fatalf("%s: log %d: %d bytes recovered, %d were durable", what, i, len(got), want)
		}
		if len(got) > len(r.data[i]) || !bytes.Equal(got, r.data[i][:len(got)]) {
			t.Fatalf("%s: log %d: recovered bytes are not a prefix of the appended ones", what, i)
		}
		if rep.Clean {
			clean++
			ok := false
			for _, n := range r.closed[i] {
				ok = ok || n == len(got)
			}
			if !ok && len(got) > 0 {
				t.Fatalf("%s: log %d: opened as closed cleanly with %d bytes, which no clean close left (%v)", what, i, len(got), r.closed[i])
			}
		}
	}
	return clean
}

// TestCloseAllCrashAtEveryBoundary cuts the power before every mutating
// filesystem operation of a workload over several logs closed together
// by CloseAll twice (vfs.MemFS.CrashBefore, with and without torn
// writes), and checks what each log recovers: nothing durable lost,
// nothing invented, and a checkpoint trusted only with what it
// describes. After the whole workload every log opens clean.
func TestCloseAllCrashAtEveryBoundary(t *testing.T) {
	newFS := func() *vfs.MemFS {
		m := vfs.NewMem()
		if err := vfs.MkdirAllDurable(m, "/data/t"); err != nil {
			t.Fatal(err)
		}
		return m
	}
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		full := newFS()
		base := full.Seq()
		r, err := runCloseAll(full, seed)
		if err != nil {
			t.Fatal(err)
		}
		total := full.Seq()
		if clean := checkCloseAllRecovered(t, full.CrashClone(vfs.CrashOptions{}), r, total+1, "after the whole workload"); clean != len(closeAllLogs) {
			t.Fatalf("seed %d: %d of %d logs open clean after CloseAll", seed, clean, len(closeAllLogs))
		}
		tearRng := rand.New(rand.NewPCG(seed, 5))
		for k := base + 1; k <= total; k++ {
			for _, tear := range []bool{false, true} {
				m := newFS()
				cut := m.CrashBefore(k, vfs.CrashOptions{Tear: tear, Rand: tearRng})
				r, err := runCloseAll(m, seed)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				c := cut()
				if c == nil {
					t.Fatalf("seed %d: the workload ran fewer than %d operations", seed, k)
				}
				checkCloseAllRecovered(t, c, r, k, fmt.Sprintf("seed %d, cut before op %d, tear %v", seed, k, tear))
			}
		}
		t.Logf("seed %d: %d crash points", seed, total-base)
	}
}

// TestCloseAllSyncFails fails each sync of a CloseAll in turn: every
// log reports it, none loses a byte made durable before the close, and
// one that opens clean holds all it was given (its checkpoint was
// written after its bytes were durable); a failure in the first batched
// sync leaves no log clean.
func TestCloseAllSyncFails(t *testing.T) {
	const logs = 3
	for n := int64(1); ; n++ {
		m := vfs.NewMem()
		if err := vfs.MkdirAllDurable(m, "/data/t"); err != nil {
			t.Fatal(err)
		}
		ls := make([]*Log, logs)
		var data [logs][]byte
		for i := range ls {
			l, err := Open(m, filepath.Join("/data/t", fmt.Sprint(i)), Config{IndexInterval: 256})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(3, 100, int64(i)), 0)
			if err := l.Append(b, nil); err != nil {
				t.Fatal(err)
			}
			data[i], ls[i] = b, l
		}
		var syncs int64
		failedAt := int64(0)             // the sync count at the failure; 0: none failed
		m.Inject(func(op vfs.Op) error { // runs under the MemFS's lock
			if op.Kind != vfs.OpSync && op.Kind != vfs.OpSyncDir {
				return nil
			}
			if syncs++; syncs == n {
				failedAt = syncs
				return syscall.EIO
			}
			return nil
		})
		errs := CloseAll(m, ls, nil)
		m.Inject(nil)
		if failedAt == 0 {
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("no sync failed, yet %v", err)
			}
			if n < 2*logs {
				t.Fatalf("CloseAll of %d logs made only %d syncs", logs, n-1)
			}
			return
		}
		firstBatch := failedAt <= 4*logs // each log's segment, its two indexes and (they are new) its directory
		c := m.CrashClone(vfs.CrashOptions{})
		for i := range ls {
			if !errors.Is(errs[i], syscall.EIO) {
				t.Fatalf("sync %d failed: log %d reported %v", n, i, errs[i])
			}
			l, err := Open(c, filepath.Join("/data/t", fmt.Sprint(i)), Config{IndexInterval: 256})
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, l, 0)
			clean := l.Recovery().Clean
			l.Close()
			if !bytes.Equal(got, data[i][:len(got)]) {
				t.Fatalf("sync %d failed: log %d recovered bytes that were not appended", n, i)
			}
			if clean && (firstBatch || !bytes.Equal(got, data[i])) {
				t.Fatalf("sync %d failed: log %d opens clean with %d of %d bytes", n, i, len(got), len(data[i]))
			}
		}
	}
}
