package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// workload appends random batches (single and several per Append, some
// larger than a segment), syncing every few appends and rolling small
// segments. It stops at the first error. durable is the prefix of data
// that a Sync (or Roll, which syncs) confirmed.
type workload struct {
	data    []byte
	durable int
	err     error
}

func runWorkload(fs vfs.FS, cfg Config, seed uint64, appends int) (w workload) {
	return runWorkloadOn(fs, Open, cfg, seed, appends)
}

// runWorkloadOn is runWorkload on a log made by open (Open or Create).
func runWorkloadOn(fs vfs.FS, open func(vfs.FS, string, Config) (*Log, error), cfg Config, seed uint64, appends int) (w workload) {
	rng := rand.New(rand.NewPCG(seed, 7))
	l, err := open(fs, dir, cfg)
	if err != nil {
		w.err = err
		return w
	}
	defer func() {
		if err := l.Close(); err != nil && w.err == nil {
			w.err = err
		}
	}()
	next := int64(0)
	for i := 0; i < appends; i++ {
		var buf []byte
		for k := 1 + rng.IntN(3); k > 0; k-- {
			size := rng.IntN(300)
			if rng.IntN(10) == 0 {
				size = 3000 + rng.IntN(3000) // larger than a segment
			}
			b, n := storagetest.WithBaseOffset(storagetest.Build(storagetest.Spec{
				Records: 1 + rng.IntN(4), ValueSize: size, Timestamp: int64(i), Seed: byte(rng.Uint32()),
				ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
			}), next)
			buf, next = append(buf, b...), n
		}
		if err := l.Append(buf, nil); err != nil {
			w.err = err
			return w
		}
		w.data = append(w.data, buf...)
		if rng.IntN(3) == 0 {
			if err := l.Sync(); err != nil {
				w.err = err
				return w
			}
			w.durable = len(w.data)
			// What an idle acceptor does next: zeros ahead of the data
			// (with cfg.Preallocate set), later written over by appends.
			if err := l.Preallocate(); err != nil {
				w.err = err
				return w
			}
			w.durable = len(w.data)
		}
	}
	if err := l.Sync(); err != nil {
		w.err = err
		return w
	}
	w.durable = len(w.data)
	return w
}

// checkRecovered opens the crashed image and checks the invariants: the
// log opens, every batch validates with contiguous offsets from 0, every
// durable byte is there, and the rest is a prefix of what was appended.
func checkRecovered(t *testing.T, fs vfs.FS, cfg Config, w workload, what string) {
	t.Helper()
	l, err := Open(fs, dir, cfg)
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer l.Close()
	got := readAll(t, l, 0)
	next := int64(0)
	if _, err := batch.Split(got, func(h batch.Header, _ []byte) error {
		if h.BaseOffset != next {
			t.Fatalf("%s: batch at %d, want %d", what, h.BaseOffset, next)
		}
		next = h.LastOffset() + 1
		return nil
	}); err != nil {
		t.Fatalf("%s: recovered bytes invalid: %v", what, err)
	}
	if next != l.NextOffset() {
		t.Fatalf("%s: batches end at %d, NextOffset %d", what, next, l.NextOffset())
	}
	if len(got) < w.durable {
		t.Fatalf("%s: %d bytes recovered, %d were synced", what, len(got), w.durable)
	}
	if !bytes.Equal(got, w.data[:len(got)]) {
		t.Fatalf("%s: recovered bytes are not a prefix of the appended ones", what)
	}
}

// TestCrashAtEveryBoundary runs a workload once to count its filesystem
// operations, then again for every boundary k, with the machine stopping
// (every operation failing) from operation k on, and checks the crash
// image at that point, with and without a torn last write.
func TestCrashAtEveryBoundary(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		crashAtEveryBoundary(t, Config{SegmentBytes: 2 << 10, IndexInterval: 256, Preallocate: -1})
	})
	// Appends written over zeros preallocated ahead of them: a crash
	// leaves a zeroed tail, or part of a batch followed by zeros.
	t.Run("preallocated", func(t *testing.T) {
		crashAtEveryBoundary(t, Config{SegmentBytes: 2 << 10, IndexInterval: 256, Preallocate: 700})
	})
	// The newest bytes in memory until 600 of them gather or a sync
	// comes: a crash loses the unflushed tail, never a synced byte.
	t.Run("write-behind", func(t *testing.T) {
		crashAtEveryBoundary(t, Config{SegmentBytes: 2 << 10, IndexInterval: 256, Preallocate: -1, WriteBehind: 600})
	})
	t.Run("write-behind preallocated", func(t *testing.T) {
		crashAtEveryBoundary(t, Config{SegmentBytes: 2 << 10, IndexInterval: 256, Preallocate: 700, WriteBehind: 600})
	})
	// A log made by Create, whose directory and first segment exist only
	// from its first write and are synced into place by its first Sync
	// with bytes: a crash before that Sync may lose the log, never a
	// synced byte.
	t.Run("created", func(t *testing.T) {
		crashAtEveryBoundaryOn(t, Create, Config{SegmentBytes: 2 << 10, IndexInterval: 256, Preallocate: -1})
	})
	t.Run("created write-behind", func(t *testing.T) {
		crashAtEveryBoundaryOn(t, Create, Config{SegmentBytes: 2 << 10, IndexInterval: 256, Preallocate: 700, WriteBehind: 600})
	})
}

func crashAtEveryBoundary(t *testing.T, cfg Config) { crashAtEveryBoundaryOn(t, Open, cfg) }

// crashAtEveryBoundaryOn is crashAtEveryBoundary on a log made by open
// (Open or Create) in a directory whose parent is durable.
func crashAtEveryBoundaryOn(t *testing.T, open func(vfs.FS, string, Config) (*Log, error), cfg Config) {
	newFS := func() *vfs.MemFS {
		m := vfs.NewMem()
		if err := vfs.MkdirAllDurable(m, filepath.Dir(dir)); err != nil {
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
		w := runWorkloadOn(full, open, cfg, seed, 40)
		if w.err != nil {
			t.Fatal(w.err)
		}
		total := full.Seq()
		checkRecovered(t, full.CrashClone(vfs.CrashOptions{}), cfg, w, "after the whole workload")
		tearRng := rand.New(rand.NewPCG(seed, 99))
		for k := base + 1; k <= total; k++ {
			m := newFS()
			m.Inject(vfs.FailFromSeq(k, syscall.EIO))
			w := runWorkloadOn(m, open, cfg, seed, 40)
			if w.err == nil {
				t.Fatalf("seed %d: workload survived a failure from op %d", seed, k)
			}
			if !errors.Is(w.err, syscall.EIO) {
				t.Fatalf("seed %d op %d: error %v does not wrap EIO", seed, k, w.err)
			}
			for _, tear := range []bool{false, true} {
				c := m.CrashClone(vfs.CrashOptions{Tear: tear, Rand: tearRng})
				checkRecovered(t, c, cfg, w, "crash")
			}
		}
		t.Logf("seed %d: %d crash points", seed, total)
	}
}

// TestCrashRepeated crashes, recovers and continues several times in a
// row, with and without a write-behind tail.
func TestCrashRepeated(t *testing.T) {
	for _, wb := range []int{0, 700} {
		t.Run(fmt.Sprint("write-behind=", wb), func(t *testing.T) {
			crashRepeated(t, Config{SegmentBytes: 2 << 10, IndexInterval: 256, WriteBehind: wb})
		})
	}
}

func crashRepeated(t *testing.T, cfg Config) {
	m := vfs.NewMem()
	rng := rand.New(rand.NewPCG(5, 5))
	var durable []byte
	for round := 0; round < 8; round++ {
		l := mustOpen(t, m, dir, cfg)
		a := newAppender(t, l)
		a.data = append([]byte(nil), durable...)
		if got := readAll(t, l, 0); !bytes.Equal(got, durable) {
			t.Fatalf("round %d: recovered %d bytes, %d were durable", round, len(got), len(durable))
		}
		for i := 0; i < 20; i++ {
			a.add(1+rng.IntN(3), rng.IntN(500), int64(round*100+i))
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		durable = a.data
		a.add(1, 100, 0) // unsynced: lost or torn by the crash
		m = m.CrashClone(vfs.CrashOptions{Tear: true, Rand: rng})
		l.Close()
	}
}

func TestInjectedErrors(t *testing.T) {
	cases := []injectCase{
		{"write ENOSPC", vfs.OpWrite, 3, syscall.ENOSPC},
		{"write EIO", vfs.OpWrite, 5, syscall.EIO},
		{"sync EIO", vfs.OpSync, 2, syscall.EIO},
		{"index create on roll ENOSPC", vfs.OpCreate, 1, syscall.ENOSPC},
		{"segment create on roll ENOSPC", vfs.OpCreate, 3, syscall.ENOSPC},
		{"syncdir on roll EIO", vfs.OpSyncDir, 1, syscall.EIO},
	}
	for _, wb := range []int{0, 4 << 10} {
		cfg := Config{SegmentBytes: 1 << 10, WriteBehind: wb}
		for _, c := range cases {
			injectedError(t, cfg, c)
		}
	}
}

// injectCase is a failure TestInjectedErrors injects.
type injectCase struct {
	name  string
	kind  vfs.OpKind
	n     int64 // which operation of kind, counted after Open
	errno syscall.Errno
}

// injectedError runs appends and syncs until the injected failure,
// checks that it surfaces and sticks, and that a crash keeps every
// synced byte.
func injectedError(t *testing.T, cfg Config, c injectCase) {
	t.Run(fmt.Sprintf("%s write-behind=%d", c.name, cfg.WriteBehind), func(t *testing.T) {
		m := vfs.NewMem()
		l := mustOpen(t, m, dir, cfg)
		m.Inject(vfs.FailNth(c.kind, m.Ops(c.kind)+c.n, c.errno, false))
		next := int64(0)
		var durable, appended []byte
		var failure error
		for i := 0; i < 30 && failure == nil; i++ {
			b, n := storagetest.WithBaseOffset(storagetest.MakeBatch(2, 200, int64(i)), next)
			if err := l.Append(b, nil); err != nil {
				failure = err
				break
			}
			next = n
			appended = append(appended, b...)
			if err := l.Sync(); err != nil {
				failure = err
				break
			}
			durable = append(durable[:0], appended...)
		}
		if failure == nil {
			t.Fatal("no error surfaced")
		}
		if !errors.Is(failure, c.errno) || !errors.Is(failure, ErrFailed) {
			t.Fatalf("error %v: want it to match %v and ErrFailed", failure, c.errno)
		}
		// The log refuses further writes with the same error.
		m.Inject(nil)
		b, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(1, 1, 0), next)
		if err := l.Append(b, nil); !errors.Is(err, c.errno) {
			t.Fatalf("Append after failure: %v", err)
		}
		if err := l.Sync(); !errors.Is(err, ErrFailed) {
			t.Fatalf("Sync after failure: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close after failure: %v", err)
		}
		// Reopening after a crash keeps everything that was synced.
		l = mustOpen(t, m.CrashClone(vfs.CrashOptions{}), dir, cfg)
		defer l.Close()
		got := readAll(t, l, 0)
		if len(got) < len(durable) || !bytes.Equal(got[:len(durable)], durable) || !bytes.Equal(got, appended[:len(got)]) {
			t.Fatalf("recovered %d bytes; %d durable, %d appended", len(got), len(durable), len(appended))
		}
	})
}

func TestAppendRejectsBadInput(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), dir, Config{})
	defer l.Close()
	good, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(3, 10, 1), 0)
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 1
	gap, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(3, 10, 1), 5)
	cases := []struct {
		name string
		b    []byte
	}{
		{"bad CRC", badCRC},
		{"offset gap", gap},
		{"truncated", good[:len(good)-2]},
		{"trailing garbage", append(append([]byte(nil), good...), 1, 2, 3)},
	}
	for _, c := range cases {
		if err := l.Append(c.b, nil); !errors.Is(err, ErrBadAppend) {
			t.Fatalf("%s: Append = %v, want ErrBadAppend", c.name, err)
		}
		if l.NextOffset() != 0 || l.Size() != 0 {
			t.Fatalf("%s: rejected append changed the log", c.name)
		}
	}
	if err := l.Append(good, nil); err != nil {
		t.Fatalf("good append after rejections: %v", err)
	}
}

// TestAppendWithHeaders: headers a caller parsed are trusted (no CRC
// pass) but must add up to the bytes and continue the log; any other
// list writes nothing. The index and timestamps come from the headers.
func TestAppendWithHeaders(t *testing.T) {
	l := mustOpen(t, vfs.NewMem(), dir, Config{})
	defer l.Close()
	one, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(3, 10, 1), 0)
	two, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(2, 10, 50), 3)
	buf := append(append([]byte(nil), one...), two...)
	h1, _ := batch.Validate(one)
	h2, _ := batch.Validate(two)
	gap := h2
	gap.BaseOffset = 9
	cases := []struct {
		name string
		hs   []batch.Header
	}{
		{"too few", []batch.Header{h1}},
		{"too many", []batch.Header{h1, h2, h2}},
		{"offset gap", []batch.Header{h1, gap}},
		{"empty list", []batch.Header{}},
	}
	for _, c := range cases {
		if err := l.Append(buf, c.hs); !errors.Is(err, ErrBadAppend) {
			t.Fatalf("%s: Append = %v, want ErrBadAppend", c.name, err)
		}
		if l.NextOffset() != 0 || l.Size() != 0 {
			t.Fatalf("%s: rejected append changed the log", c.name)
		}
	}
	if err := l.Append(buf, []batch.Header{h1, h2}); err != nil {
		t.Fatalf("Append with headers: %v", err)
	}
	if ts, off := l.MaxTimestamp(); l.NextOffset() != 5 || ts != 51 || off != 3 {
		t.Fatalf("next %d, max timestamp %d at %d; want 5, 51 at 3 (the batch holding it)", l.NextOffset(), ts, off)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, buf) {
		t.Fatalf("log holds %d bytes that differ from the %d appended", len(got), len(buf))
	}
}
