package wal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memLog is a Target that keeps batches in memory.
type memLog struct {
	data []byte
	next int64
}

func (l *memLog) NextOffset() int64 { return l.next }

func (l *memLog) Append(b []byte, _ []batch.Header) error {
	_, err := batch.Split(b, func(h batch.Header, _ []byte) error {
		if h.BaseOffset != l.next {
			return fmt.Errorf("batch at %d, log ends at %d", h.BaseOffset, l.next)
		}
		l.next = h.LastOffset() + 1
		return nil
	})
	if err != nil {
		return err
	}
	l.data = append(l.data, b...)
	return nil
}

// batches returns n one-record batches with offsets from base.
func batches(base int64, n int, seed int64) []byte {
	var out []byte
	for i := range n {
		b, _ := storagetest.WithBaseOffset(storagetest.MakeBatch(1, 20, seed+int64(i)), base+int64(i))
		out = append(out, b...)
	}
	return out
}

func key(p int32) Key { return Key{Topic: [16]byte{9}, Partition: p} }

func open(t *testing.T, fs vfs.FS, segBytes int64) (*WAL, *Replay) {
	t.Helper()
	// Two sealed segments before checkpoints, however many keys: the
	// tests fill and retire segments with a few keys.
	w, rp, err := Open(Options{FS: fs, Dir: "/wal", SegmentBytes: segBytes, MaxBytes: 2 * segBytes})
	if err != nil {
		t.Fatal(err)
	}
	return w, rp
}

// TestGroupCommitAndReplay: entries of many keys appended concurrently
// are durable after Sync; after a crash a replay rebuilds each key's log
// exactly, across several segments.
func TestGroupCommitAndReplay(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := open(t, fs, 4<<10)
	const keys, per = 8, 40
	want := make([][]byte, keys)
	var wg sync.WaitGroup
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				b := batches(int64(i), 1, int64(k*1000+i))
				want[k] = append(want[k], b...)
				pos, err := w.Append(key(int32(k)), int64(i), int64(i+1), b)
				if err == nil {
					err = w.Sync(pos)
				}
				if err != nil {
					t.Errorf("key %d append %d: %v", k, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	crashed := fs.CrashClone(vfs.CrashOptions{})
	w.Close()
	w2, rp := open(t, crashed, 4<<10)
	defer w2.Close()
	for k := range keys {
		l := &memLog{}
		a, err := rp.Apply(key(int32(k)), l)
		if err != nil {
			t.Fatal(err)
		}
		if a.Batches != per || !bytes.Equal(l.data, want[k]) {
			t.Fatalf("key %d: replay appended %d batches (%d bytes), want %d (%d bytes)", k, a.Batches, len(l.data), per, len(want[k]))
		}
	}
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
}

// TestOneFsyncPerRound: appends of many keys made before a Sync share
// one write and one fdatasync of the segment.
func TestOneFsyncPerRound(t *testing.T) {
	fs := vfs.NewMem()
	var mu sync.Mutex // guards segSyncs
	segSyncs := map[string]int{}
	fs.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync {
			mu.Lock()
			segSyncs[op.Name]++
			mu.Unlock()
		}
		return nil
	})
	w, _ := open(t, fs, 1<<20)
	defer w.Close()
	var last Pos
	for k := range 100 {
		p, err := w.Append(key(int32(k)), 0, 1, batches(0, 1, int64(k)))
		if err != nil {
			t.Fatal(err)
		}
		last = p
	}
	if err := w.Sync(last); err != nil {
		t.Fatal(err)
	}
	seg := w.segPath(1)
	mu.Lock()
	n := segSyncs[seg]
	mu.Unlock()
	// One when the preparer zeroed it, one for the round.
	if n != 2 {
		t.Fatalf("segment %s synced %d times, want 2 (prepared, then one round for 100 appends)", seg, n)
	}
	st := w.Stats()
	if st.Rounds != 1 || st.Entries != 100 || st.FailedRounds != 0 || st.Bytes <= 0 || st.RoundTime <= 0 {
		t.Fatalf("stats %+v, want one round of 100 entries, no failure", st)
	}
}

// TestReplaySkipsHeldHolesAndStale: batches the log holds are skipped,
// a batch past its end (a hole) is ignored, and entries before a
// truncate entry count only below its offset.
func TestReplaySkipsHeldHolesAndStale(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := open(t, fs, 1<<20)
	k := key(1)
	must := func(p Pos, err error) {
		t.Helper()
		if err == nil {
			err = w.Sync(p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Append(k, 0, 4, batches(0, 4, 1)))
	must(w.Append(k, 4, 8, batches(4, 4, 2))) // stale past 6: the truncate below
	must(w.Truncate(k, 6))
	fresh := batches(6, 3, 3)
	must(w.Append(k, 6, 9, fresh))
	must(w.Append(key(2), 5, 6, batches(5, 1, 4))) // a hole for a log that ends at 0
	w.Close()

	w2, rp := open(t, fs.CrashClone(vfs.CrashOptions{}), 1<<20)
	defer w2.Close()
	held := &memLog{}
	if err := held.Append(batches(0, 2, 1), nil); err != nil {
		t.Fatal(err)
	}
	a, err := rp.Apply(k, held)
	if err != nil {
		t.Fatal(err)
	}
	if held.next != 9 || a.Batches != 7 {
		t.Fatalf("log ends at %d after %d batches replayed, want 9 after 7", held.next, a.Batches)
	}
	if !bytes.Equal(held.data[len(held.data)-len(fresh):], fresh) {
		t.Fatal("the batches after the truncate entry are not the fresh ones")
	}
	other := &memLog{}
	a, err = rp.Apply(key(2), other)
	if err != nil || other.next != 0 || a.Skipped != 1 {
		t.Fatalf("entry past a hole: log end %d, skipped %d, err %v", other.next, a.Skipped, err)
	}
}

// TestCheckpointFreesSegments: sealed segments are retired once every key
// with entries in them checkpointed past them, and not before.
func TestCheckpointFreesSegments(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := open(t, fs, 2<<10)
	defer w.Close()
	off := []int64{0, 0}
	for i := range 40 {
		k := int32(i % 2)
		b := batches(off[k], 1, int64(i))
		p, err := w.Append(key(k), off[k], off[k]+1, b)
		if err == nil {
			err = w.Sync(p)
		}
		if err != nil {
			t.Fatal(err)
		}
		off[k]++
	}
	before := w.Size()
	if before < 4<<10 {
		t.Fatalf("WAL holds %d bytes of segments: the workload did not fill several", before)
	}
	if !w.Behind(key(0)) || !w.Behind(key(1)) {
		t.Fatal("with several sealed segments holding their entries, the keys are not asked to checkpoint")
	}
	w.Checkpoint(key(0), off[0])
	if w.Behind(key(0)) {
		t.Fatal("a key that checkpointed past its entries is still asked to")
	}
	if w.Size() != before {
		t.Fatalf("segments freed (%d -> %d bytes) while key 1 still needs them", before, w.Size())
	}
	w.Checkpoint(key(1), off[1])
	if w.Size() > 2<<10 {
		t.Fatalf("WAL holds %d bytes after every key checkpointed; want the active segment only", w.Size())
	}
}

// TestCheckpointBudget: the more keys write to each segment, the more
// sealed segments the WAL holds before it asks for checkpoints, within
// MaxBytes and an eighth of the free space, and never fewer than two.
func TestCheckpointBudget(t *testing.T) {
	const seg = 1 << 20
	for _, c := range []struct {
		name     string
		keys     int
		maxBytes int64
		capacity int64 // of the filesystem; 0: unlimited
		want     int   // sealed segments before Behind
	}{
		{"one key", 1, 1 << 30, 0, 2},
		{"few keys", 8, 1 << 30, 0, 2},
		{"many keys", 64, 1 << 30, 0, 64 * ckptBytesPerKey / seg},
		{"bounded by MaxBytes", 64, 8 * seg, 0, 8},
		{"bounded by free space", 64, 1 << 30, 80 * seg, 10},
		{"a full disk keeps two", 64, 1 << 30, 4 * seg, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			fs.SetCapacity(c.capacity)
			w, _, err := Open(Options{FS: fs, Dir: "/wal", SegmentBytes: seg, MaxBytes: c.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if got := w.keepFor(c.keys); got != c.want {
				t.Fatalf("keepFor(%d) = %d segments, want %d", c.keys, got, c.want)
			}
		})
	}
}

// TestManyKeysDeferCheckpoints: with many keys writing, sealed segments
// accumulate past two before any key is asked to checkpoint, and once
// the budget is reached every key with entries in them is.
func TestManyKeysDeferCheckpoints(t *testing.T) {
	const seg, keys = 16 << 10, 32 // 32 keys: keepFor wants 512 segments, MaxBytes allows 6
	fs := vfs.NewMem()
	w, _, err := Open(Options{FS: fs, Dir: "/wal", SegmentBytes: seg, MaxBytes: 6 * seg})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	off := make([]int64, keys)
	sealed := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		n := 0
		for _, s := range w.segs {
			if s.sealed {
				n++
			}
		}
		return n
	}
	sawDeferred := false
	for i := 0; sealed() < 6; i++ {
		k := int32(i % keys)
		b := batches(off[k], 1, int64(i))
		p, err := w.Append(key(k), off[k], off[k]+1, b)
		if err == nil {
			err = w.Sync(p)
		}
		if err != nil {
			t.Fatal(err)
		}
		off[k]++
		if n := sealed(); n >= 2 && n < 6 {
			sawDeferred = true
			if w.Behind(key(k)) {
				t.Fatalf("asked to checkpoint with %d sealed segments; the budget allows 6", n)
			}
		}
	}
	if !sawDeferred {
		t.Fatal("the workload never held between two and six sealed segments")
	}
	for k := range keys {
		if !w.Behind(key(int32(k))) {
			t.Fatalf("key %d not asked to checkpoint with the budget reached", k)
		}
		w.Checkpoint(key(int32(k)), off[k])
	}
	if n := sealed(); n != 0 {
		t.Fatalf("%d sealed segments left after every key checkpointed", n)
	}
	// The retired segments are kept for reuse, as many as the WAL keeps
	// sealed (not zeroed again by the next ones), and no more.
	names, err := fs.ReadDir("/wal")
	if err != nil {
		t.Fatal(err)
	}
	spares := 0
	for _, n := range names {
		if strings.HasSuffix(n, ".spare") {
			spares++
		}
	}
	if spares < 2 || spares > 6 {
		t.Fatalf("%d spare segment files after six were retired; want between 2 and the 6 the WAL keeps", spares)
	}
}

// TestFailedRoundFailsItsWaiters: a failed fsync fails every append of the
// round, and the WAL goes on in a fresh segment.
func TestFailedRoundFailsItsWaiters(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := open(t, fs, 64<<10)
	defer w.Close()
	p0, _ := w.Append(key(0), 0, 1, batches(0, 1, 1))
	if err := w.Sync(p0); err != nil {
		t.Fatal(err)
	}
	fs.Inject(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync {
			return vfs.Errno(op, syscall.EIO)
		}
		return nil
	})
	p1, _ := w.Append(key(0), 1, 2, batches(1, 1, 2))
	p2, _ := w.Append(key(1), 0, 1, batches(0, 1, 3))
	if err := w.Sync(p2); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync of a failed round: %v", err)
	}
	if err := w.Sync(p1); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the other append of the failed round: %v", err)
	}
	if err := w.Sync(p0); err != nil {
		t.Fatalf("an append synced before the failure: %v", err)
	}
	fs.Inject(nil)
	p3, _ := w.Append(key(1), 0, 1, batches(0, 1, 4))
	if err := w.Sync(p3); err != nil {
		t.Fatalf("after the failure: %v", err)
	}
	if st := w.Stats(); st.Rounds != 3 || st.FailedRounds != 1 || st.Entries != 4 {
		t.Fatalf("stats %+v, want 3 rounds (one failed) of 4 entries", st)
	}
	// Both keys had an entry in the failed round; key 2 none.
	if f0, f1, f2 := w.For(key(0)).Failures(), w.For(key(1)).Failures(), w.For(key(2)).Failures(); f0 != 1 || f1 != 1 || f2 != 0 {
		t.Fatalf("failures per key %d, %d, %d; want 1, 1, 0", f0, f1, f2)
	}
	w.For(key(1)).Forget()
	if f := w.For(key(1)).Failures(); f != 0 {
		t.Fatalf("failures of a forgotten key: %d", f)
	}
}

// TestRefillAvailable: a refill that does not know what was acknowledged
// takes the key's batches as far as they continue the log, stopping at a
// hole without an error.
func TestRefillAvailable(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := open(t, fs, 64<<10)
	defer w.Close()
	h := w.For(key(3))
	for _, b := range []struct{ first, n int64 }{{0, 2}, {2, 1}, {5, 1}} { // 3 and 4 are a hole
		p, err := h.Append(b.first, b.first+b.n, batches(b.first, int(b.n), b.first))
		if err == nil {
			err = h.Sync(p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	l := &memLog{}
	end, err := h.RefillAvailable(l, 10)
	if err != nil || end != 3 || l.next != 3 {
		t.Fatalf("refill: end %d, log at %d, err %v; want 3, 3, nil", end, l.next, err)
	}
	if err := h.Refill(&memLog{}, 4); err == nil {
		t.Fatal("Refill short of the acknowledged end returned nil")
	}
}

// TestAlone: a key is alone after a round that carried its entries and no
// other's, and no longer once a round carries another key's.
func TestAlone(t *testing.T) {
	w, _ := open(t, vfs.NewMem(), 1<<20)
	defer w.Close()
	a, b := w.For(key(1)), w.For(key(2))
	sync := func(h *Handle, first int64) {
		t.Helper()
		p, err := h.Append(first, first+1, batches(first, 1, first))
		if err == nil {
			err = h.Sync(p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if a.Alone() {
		t.Fatal("alone before any round")
	}
	sync(a, 0)
	if !a.Alone() || b.Alone() {
		t.Fatalf("after a round of key 1 only: alone %v, %v; want true, false", a.Alone(), b.Alone())
	}
	pa, _ := a.Append(1, 2, batches(1, 1, 1))
	pb, _ := b.Append(0, 1, batches(0, 1, 2))
	if err := w.Sync(max(Pos(pa), Pos(pb))); err != nil {
		t.Fatal(err)
	}
	if a.Alone() || b.Alone() {
		t.Fatal("a round of two keys left one alone")
	}
	// A solo key is not alone while another key's entry waits for the
	// next round, and is again once that round ran without it.
	sync(a, 2)
	if !a.Alone() {
		t.Fatal("after a round of key 1 only: not alone")
	}
	pb, _ = b.Append(1, 2, batches(1, 1, 3))
	if a.Alone() {
		t.Fatal("alone while key 2's entry is buffered")
	}
	pa, _ = a.Append(3, 4, batches(3, 1, 4))
	if a.Alone() {
		t.Fatal("alone while its entry and key 2's are buffered")
	}
	if err := w.Sync(max(Pos(pa), Pos(pb))); err != nil {
		t.Fatal(err)
	}
	sync(a, 4)
	pa, _ = a.Append(5, 6, batches(5, 1, 5))
	if !a.Alone() {
		t.Fatal("not alone with only its own entry buffered after a solo round")
	}
	if err := a.Sync(pa); err != nil {
		t.Fatal(err)
	}
}

// TestSyncRoundHoldsOnlySmallRounds: only a round of at most
// heldMaxBytes asks to hold its processor (vfs decides whether it may).
func TestSyncRoundHoldsOnlySmallRounds(t *testing.T) {
	if !mayHold(heldMaxBytes) || !mayHold(100) {
		t.Fatal("a small round does not ask to hold its processor")
	}
	if mayHold(heldMaxBytes + 1) {
		t.Fatal("a round over heldMaxBytes asks to hold its processor")
	}
}

// TestRoundsOnOSFiles: rounds on the operating system's files (where
// small rounds hold their processor through the fdatasync) make their
// entries durable and replayable.
func TestRoundsOnOSFiles(t *testing.T) {
	fs, dir := vfs.OS(), t.TempDir()
	w, rp, err := Open(Options{FS: fs, Dir: filepath.Join(dir, "wal"), SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
	want := map[int32][]byte{}
	for round := range 5 {
		var last Pos
		for k := range int32(3) {
			b := batches(int64(round), 1, int64(round)*10+int64(k))
			p, err := w.Append(key(k), int64(round), int64(round)+1, b)
			if err != nil {
				t.Fatal(err)
			}
			want[k] = append(want[k], b...)
			last = p
		}
		if err := w.Sync(last); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	st := w.Stats()
	if st.Rounds != 5 || st.FailedRounds != 0 {
		t.Fatalf("stats %+v, want 5 rounds, none failed", st)
	}
	// The first round holds its processor (later ones too, unless an
	// fdatasync was slow); never without a second processor.
	if multi := runtime.GOMAXPROCS(0) >= 2; multi && st.HeldRounds < 1 || !multi && st.HeldRounds != 0 {
		t.Fatalf("%d of 5 rounds held their processor with GOMAXPROCS %d", st.HeldRounds, runtime.GOMAXPROCS(0))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, rp, err = Open(Options{FS: fs, Dir: filepath.Join(dir, "wal"), SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for k := range int32(3) {
		var l memLog
		if _, err := rp.Apply(key(k), &l); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(l.data, want[k]) {
			t.Fatalf("key %d: replayed %d bytes, want %d", k, len(l.data), len(want[k]))
		}
	}
	if err := rp.Done(); err != nil {
		t.Fatal(err)
	}
}

// TestInspectFindsDamage: Inspect reports each key's pending range and
// an entry that no longer decodes while later ones of its segment do,
// and nothing for a segment that simply ends (zeros, a recycled file's
// stale bytes).
func TestInspectFindsDamage(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := open(t, fs, 1<<20)
	var ps []Pos
	for i := range 6 {
		p, err := w.Append(key(1), int64(10+2*i), int64(12+2*i), batches(int64(10+2*i), 2, int64(i)))
		if err == nil {
			err = w.Sync(p)
		}
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if p, err := w.Truncate(key(2), 3); err != nil || w.Sync(p) != nil {
		t.Fatal(err)
	}
	w.Close()
	names, err := fs.ReadDir("/wal")
	if err != nil || len(names) == 0 {
		t.Fatalf("segments: %v %v", names, err)
	}
	var seg string
	for _, n := range names {
		if strings.HasSuffix(n, segSuffix) && seg == "" {
			seg = "/wal/" + n // the first: the one written
		}
	}

	rp, ds, err := Inspect(fs, "/wal")
	if err != nil || len(ds) != 0 {
		t.Fatalf("intact WAL: damage %v, err %v", ds, err)
	}
	if first, end, n := rp.Pending(key(1)); first != 10 || end != 22 || n != 6 {
		t.Fatalf("Pending(key 1) = %d, %d, %d entries; want 10, 22, 6", first, end, n)
	}
	if _, _, n := rp.Pending(key(3)); n != 0 {
		t.Fatalf("a key without entries has %d pending", n)
	}

	// Flip a byte inside the third entry: the segment's readable entries
	// end there, three data entries and the truncate entry follow.
	f, err := fs.OpenRW(seg)
	if err != nil {
		t.Fatal(err)
	}
	at := int64(ps[1]) + entryHead + 30
	var one [1]byte
	if _, err := f.ReadAt(one[:], at); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x5a
	if _, err := f.WriteAt(one[:], at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rp, ds, err = Inspect(fs, "/wal")
	if err != nil || len(ds) != 1 || ds[0].Segment != seg || ds[0].At != int64(ps[1]) || ds[0].After != 4 {
		t.Fatalf("damaged WAL: %+v, err %v; want one at byte %d of %s with 4 entries after it", ds, err, ps[1], seg)
	}
	if first, end, n := rp.Pending(key(1)); first != 10 || end != 14 || n != 2 {
		t.Fatalf("Pending(key 1) after the damage = %d, %d, %d; want 10, 14, 2", first, end, n)
	}
}

// TestRetireAfterFailedDirSync: a segment renamed aside for reuse whose
// directory sync failed is retired again at the next checkpoint (the
// rename already happened): the WAL keeps freeing segments instead of
// sticking on that one.
func TestRetireAfterFailedDirSync(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := open(t, fs, 2<<10)
	defer w.Close()
	var off int64
	fill := func(n int) {
		t.Helper()
		for range n {
			b := batches(off, 1, off)
			p, err := w.Append(key(0), off, off+1, b)
			if err == nil {
				err = w.Sync(p)
			}
			if err != nil {
				t.Fatal(err)
			}
			off++
		}
	}
	fill(40)
	// The first directory sync after the checkpoint's rename fails.
	fs.Inject(vfs.FailNth(vfs.OpSyncDir, fs.Ops(vfs.OpSyncDir)+1, syscall.EIO, false))
	w.Checkpoint(key(0), off)
	fill(40)
	before := w.Size()
	w.Checkpoint(key(0), off)
	if w.Size() >= before || w.Size() > 2<<10 {
		t.Fatalf("WAL holds %d bytes after a checkpoint (%d before); want the active segment only", w.Size(), before)
	}
}

// TestReplayExplainsDroppedEntries: when a log is shorter than the WAL
// expects (it lost fsynced bytes, or a write of the key failed), replay
// drops the entries that do not continue it and says so at WARN: which
// log, where it ends, which offsets were dropped.
func TestReplayExplainsDroppedEntries(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := open(t, fs, 1<<20)
	k := key(3)
	for _, r := range [][2]int64{{0, 4}, {4, 8}, {8, 10}} {
		p, err := w.Append(k, r[0], r[1], batches(r[0], int(r[1]-r[0]), r[0]))
		if err == nil {
			err = w.Sync(p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	w2, rp, err := Open(Options{FS: fs.CrashClone(vfs.CrashOptions{}), Dir: "/wal", SegmentBytes: 1 << 20, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	// The log kept offsets 0 and 1 only, and the WAL's entry of 0-3
	// is gone (retired once the log checkpointed past it): the entries
	// of 4-9 follow a hole.
	short := &memLog{}
	if err := short.Append(batches(0, 2, 0), nil); err != nil {
		t.Fatal(err)
	}
	rp.byKey[k] = rp.byKey[k][1:]
	a, err := rp.ApplyNamed(k, "orders/3", short)
	if err != nil {
		t.Fatal(err)
	}
	if a.Skipped != 2 || a.Batches != 0 || a.LogEnd != 2 || a.DroppedFrom != 4 || a.DroppedTo != 9 {
		t.Fatalf("Applied = %+v, want 2 entries dropped, offsets 4 to 9, log end 2", a)
	}
	out := logs.String()
	for _, want := range []string{"level=WARN", "log=orders/3", "log_end=2", "dropped_from=4", "dropped_to=9", "entries=2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the replay warning lacks %q:\n%s", want, out)
		}
	}
}

// TestStartGivesRoundBuffers: Start gives the WAL its two round buffers
// at full size, so that rounds up to startBufBytes grow neither; an
// entry appended before Start is kept.
func TestStartGivesRoundBuffers(t *testing.T) {
	w, _ := open(t, vfs.NewMem(), 64<<20)
	defer w.Close()
	h := w.For(Key{Topic: [16]byte{1}, Partition: 0})
	pos, err := h.Append(0, 1, batches(0, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	w.mu.Lock()
	buf, spare := cap(w.buf), cap(w.spare)
	w.mu.Unlock()
	if buf < startBufBytes || spare < startBufBytes {
		t.Fatalf("round buffers of %d and %d bytes after Start, want %d", buf, spare, startBufBytes)
	}
	big := batches(1, 2000, 0) // about 180 KiB per append
	next := int64(1)
	for range 8 {
		end := next + 2000
		if _, err := h.Append(next, end, big); err != nil {
			t.Fatal(err)
		}
		next = end
		big = batches(next, 2000, next)
	}
	w.mu.Lock()
	grown := cap(w.buf) != buf && cap(w.buf) != spare
	w.mu.Unlock()
	if grown {
		t.Fatal("a round buffer was reallocated for rounds within startBufBytes")
	}
	if err := w.Sync(Pos(pos)); err != nil {
		t.Fatalf("the entry appended before Start: %v", err)
	}
}
