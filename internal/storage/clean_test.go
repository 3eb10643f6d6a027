package storage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

// origRec is what a test appended at one offset.
type origRec struct {
	key, value string
	tombstone  bool
	codec      batch.Codec
}

// keyedLog appends keyed records and keeps a model of them.
type keyedLog struct {
	t      *testing.T
	l      *Log
	rng    *rand.Rand
	next   int64
	ts     int64
	orig   map[int64]origRec
	latest map[string]int64 // key -> offset of its latest record
	pid    int64            // producer id of the next batch (-1: none)
	seq    int32
	codecs []batch.Codec // codecs to draw from
}

func newKeyedLog(t *testing.T, l *Log, seed uint64) *keyedLog {
	return &keyedLog{t: t, l: l, rng: rand.New(rand.NewPCG(seed, 11)), next: l.NextOffset(),
		orig: map[int64]origRec{}, latest: map[string]int64{}, pid: -1, codecs: codecs}
}

var codecs = []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}

// appendRandom appends one batch of 1-5 records over keys k0..k(keys-1),
// about one in seven a tombstone, with a random codec.
func (k *keyedLog) appendRandom(keys int) error {
	n := 1 + k.rng.IntN(5)
	codec := k.codecs[k.rng.IntN(len(k.codecs))]
	var recs []batch.Record
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%d", k.rng.IntN(keys))
		r := batch.Record{OffsetDelta: int32(i), Timestamp: k.ts, Key: []byte(key)}
		o := origRec{key: key, codec: codec, tombstone: k.rng.IntN(7) == 0}
		if !o.tombstone {
			o.value = fmt.Sprintf("v%d-%s", k.next+int64(i), string(make([]byte, k.rng.IntN(80))))
			r.Value = []byte(o.value)
		}
		recs = append(recs, r)
		k.orig[k.next+int64(i)] = o
		k.latest[key] = k.next + int64(i)
	}
	p := batch.Params{BaseOffset: k.next, Codec: codec}.NoProducer()
	if k.pid >= 0 {
		p.ProducerID, p.ProducerEpoch, p.BaseSequence = k.pid, 0, k.seq
		k.seq += int32(n)
	}
	b, err := batch.Append(nil, &p, recs)
	if err != nil {
		k.t.Fatal(err)
	}
	if err := k.l.Append(b, nil); err != nil {
		return err
	}
	k.next += int64(n)
	k.ts++
	return nil
}

// readRec is a record read back from the log.
type readRec struct {
	off   int64
	key   string
	value []byte
	codec batch.Codec
}

// readRecords reads every record of the log through Read.
func readRecords(t *testing.T, l *Log) []readRec {
	t.Helper()
	var out []readRec
	end := l.NextOffset()
	for off := l.StartOffset(); off < end; {
		s, err := l.Read(off, end, 1<<20)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		b, err := s.Bytes()
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			break // compaction removed everything from off to the end
		}
		if _, err := batch.Split(b, func(h batch.Header, raw []byte) error {
			if h.LastOffset() < off {
				return fmt.Errorf("batch %d..%d read for offset %d", h.BaseOffset, h.LastOffset(), off)
			}
			err := batch.Records(&h, raw, func(r *batch.Record) error {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if len(out) > 0 && o <= out[len(out)-1].off {
					return fmt.Errorf("offset %d after %d", o, out[len(out)-1].off)
				}
				out = append(out, readRec{off: o, key: string(r.Key), value: append([]byte(nil), r.Value...), codec: h.Compression()})
				return nil
			})
			off = h.LastOffset() + 1
			return err
		}); err != nil {
			t.Fatalf("batches read at %d: %v", off, err)
		}
	}
	return out
}

// checkCompacted checks what the log holds against the model: every
// record is the one appended at its offset, with its codec; the latest
// value of every key is there; in the sealed part below cleanedTo no key
// appears twice; and no tombstone older than dropBefore remains.
func (k *keyedLog) checkCompacted(recs []readRec, cleanedTo int64, what string) {
	t := k.t
	t.Helper()
	seen := map[string]int64{}
	for _, r := range recs {
		o, ok := k.orig[r.off]
		if !ok || o.key != r.key || (o.tombstone != (r.value == nil)) || (!o.tombstone && o.value != string(r.value)) {
			t.Fatalf("%s: offset %d holds key %q value %q; %+v was appended there", what, r.off, r.key, r.value, o)
		}
		if r.codec != o.codec {
			t.Fatalf("%s: offset %d is in a %v batch; it was written %v", what, r.off, r.codec, o.codec)
		}
		if prev, dup := seen[r.key]; dup && r.off < cleanedTo {
			t.Fatalf("%s: key %s at %d and %d, both below the cleaned offset %d", what, r.key, prev, r.off, cleanedTo)
		}
		seen[r.key] = r.off
	}
	got := map[string]string{}
	for _, r := range recs {
		if r.value == nil {
			delete(got, r.key)
		} else {
			got[r.key] = string(r.value)
		}
	}
	want := map[string]string{}
	for key, off := range k.latest {
		if o := k.orig[off]; !o.tombstone {
			want[key] = o.value
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d live keys, want %d", what, len(got), len(want))
	}
	for key, v := range want {
		if got[key] != v {
			t.Fatalf("%s: key %s reads %q, latest value is %q", what, key, got[key], v)
		}
	}
}

const cleanTestRetention = time.Hour

func cleanOpts(now time.Time) CleanOptions {
	return CleanOptions{Now: now, DeleteRetention: cleanTestRetention, TargetSegmentBytes: 8 << 10}
}

// TestCleanConvergesToLatest is the property test: random keyed updates
// and tombstones in every codec, compacted between appends, always read
// back as exactly the latest value per key at their original offsets;
// tombstones go once delete.retention.ms has passed since they were
// first cleaned; a clean reopen and a crash reopen read the same.
func TestCleanConvergesToLatest(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4}
	if testing.Short() {
		seeds = seeds[:2]
	}
	for _, seed := range seeds {
		m := vfs.NewMem()
		cfg := Config{SegmentBytes: 1500, IndexInterval: 256, RetentionAge: -1}
		l := mustOpen(t, m, dir, cfg)
		k := newKeyedLog(t, l, seed)
		if seed%2 == 0 {
			k.pid = 7 // an idempotent producer: its last batch must survive
		}
		now := time.Unix(1_000_000, 0)
		var removed int64
		for round := 0; round < 12; round++ {
			for i := 0; i < 25; i++ {
				if err := k.appendRandom(20); err != nil {
					t.Fatal(err)
				}
			}
			now = now.Add(10 * time.Minute)
			res, err := l.Clean(context.Background(), cleanOpts(now))
			if err != nil {
				t.Fatalf("seed %d round %d: Clean: %v", seed, round, err)
			}
			removed += res.RecordsRemoved
			k.checkCompacted(readRecords(t, l), res.CleanedTo, fmt.Sprintf("seed %d round %d", seed, round))
		}
		if removed == 0 {
			t.Fatalf("seed %d: nothing was ever removed", seed)
		}
		// Seal everything, then let every tombstone age out: two passes,
		// one to clean them, one after the retention to drop them.
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			now = now.Add(cleanTestRetention + time.Minute)
			if _, err := l.Clean(context.Background(), cleanOpts(now)); err != nil {
				t.Fatal(err)
			}
		}
		recs := readRecords(t, l)
		k.checkCompacted(recs, l.NextOffset(), fmt.Sprintf("seed %d final", seed))
		for _, r := range recs {
			if r.value == nil {
				t.Fatalf("seed %d: tombstone of %s at %d outlived delete.retention.ms", seed, r.key, r.off)
			}
		}
		if k.pid >= 0 {
			var last int64 = -1
			if err := l.ScanHeaders(0, func(h batch.Header) error {
				if h.ProducerID == k.pid {
					last = h.LastOffset()
				}
				return nil
			}); err != nil || last != k.next-1 {
				t.Fatalf("seed %d: producer's last batch ends at %d, want %d (%v)", seed, last, k.next-1, err)
			}
		}
		crashed := m.CrashClone(vfs.CrashOptions{})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for name, fs := range map[string]vfs.FS{"clean reopen": m, "crash reopen": crashed} {
			l2 := mustOpen(t, fs, dir, cfg)
			k.l = l2
			k.checkCompacted(readRecords(t, l2), l2.NextOffset(), fmt.Sprintf("seed %d %s", seed, name))
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// buildForCrash writes a deterministic keyed log on m, with every segment
// sealed and synced, and returns its model. Two codecs keep it quick
// under the race detector; the property test covers them all.
func buildForCrash(t *testing.T, m *vfs.MemFS, cfg Config, seed uint64) *keyedLog {
	l := mustOpen(t, m, dir, cfg)
	k := newKeyedLog(t, l, seed)
	k.codecs = []batch.Codec{batch.CodecNone, batch.CodecSnappy}
	for i := 0; i < 60; i++ {
		if err := k.appendRandom(12); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestCleanCrashAtEveryBoundary runs a compaction pass once to count its
// filesystem operations, then again crashing at each one (every later
// operation fails, then the crash image is taken, with and without a torn
// last write): the recovered log always opens, holds every latest value
// at its offset, and compacts again cleanly.
func TestCleanCrashAtEveryBoundary(t *testing.T) {
	cfg := Config{SegmentBytes: 1200, IndexInterval: 256, RetentionAge: -1}
	now := time.Unix(2_000_000, 0)
	opts := CleanOptions{Now: now, DeleteRetention: 0, TargetSegmentBytes: 3000}
	seeds := []uint64{1, 2}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		built := vfs.NewMem()
		k := buildForCrash(t, built, cfg, seed)
		full := built.CrashClone(vfs.CrashOptions{}) // everything was synced: an exact copy
		l := mustOpen(t, full, dir, cfg)
		before := full.Seq()
		res, err := l.Clean(context.Background(), opts)
		if err != nil || res.SegmentsWritten == 0 {
			t.Fatalf("seed %d: Clean: %+v %v", seed, res, err)
		}
		ops := full.Seq() - before
		l.Close()
		tearRng := rand.New(rand.NewPCG(seed, 3))
		for i := int64(1); i <= ops; i++ {
			m := built.CrashClone(vfs.CrashOptions{})
			l := mustOpen(t, m, dir, cfg)
			m.Inject(vfs.FailFromSeq(m.Seq()+i, syscall.EIO))
			if _, err := l.Clean(context.Background(), opts); err == nil {
				t.Fatalf("seed %d: pass survived a failure at its op %d of %d", seed, i, ops)
			}
			for _, tear := range []bool{false, true} {
				c := m.CrashClone(vfs.CrashOptions{Tear: tear, Rand: tearRng})
				what := fmt.Sprintf("seed %d crash at op %d/%d tear %v", seed, i, ops, tear)
				l2, err := Open(c, dir, cfg)
				if err != nil {
					t.Fatalf("%s: reopen: %v", what, err)
				}
				k.l = l2
				k.checkCompacted(readRecords(t, l2), 0, what)
				if _, err := l2.Clean(context.Background(), opts); err != nil {
					t.Fatalf("%s: Clean after recovery: %v", what, err)
				}
				k.checkCompacted(readRecords(t, l2), l2.NextOffset(), what+", cleaned again")
				l2.Close()
			}
			m.Inject(nil)
			l.Close()
		}
		t.Logf("seed %d: %d crash points", seed, ops)
	}
}

// TestCleanWithConcurrentReaders reads the log from start to end over and
// over while passes rewrite it and the writer appends: every read is a
// valid, offset-ordered stream of records that were appended at those
// offsets.
func TestCleanWithConcurrentReaders(t *testing.T) {
	m := vfs.NewMem()
	cfg := Config{SegmentBytes: 1500, IndexInterval: 256, RetentionAge: -1}
	l := mustOpen(t, m, dir, cfg)
	defer l.Close()
	k := newKeyedLog(t, l, 9)
	k.codecs = []batch.Codec{batch.CodecNone, batch.CodecSnappy} // quick under -race
	for i := 0; i < 100; i++ {
		if err := k.appendRandom(15); err != nil {
			t.Fatal(err)
		}
	}
	// The model is only read by the reader after this point; appends
	// below go to a copy so the maps are not shared.
	orig := map[int64]origRec{}
	for o, r := range k.orig {
		orig[o] = r
	}
	end := l.NextOffset()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			last := int64(-1)
			for off := l.StartOffset(); off < end; {
				s, err := l.Read(off, end, 4096)
				if err == nil {
					var b []byte
					if b, err = s.Bytes(); err == nil && len(b) == 0 {
						break // nothing left below end: compaction removed the rest
					}
					if err == nil {
						_, err = batch.Split(b, func(h batch.Header, raw []byte) error {
							off = h.LastOffset() + 1
							return batch.Records(&h, raw, func(r *batch.Record) error {
								o := h.BaseOffset + int64(r.OffsetDelta)
								if o <= last {
									return fmt.Errorf("offset %d after %d", o, last)
								}
								last = o
								if want := orig[o]; want.key != string(r.Key) {
									return fmt.Errorf("offset %d holds key %q, %q was appended", o, r.Key, want.key)
								}
								return nil
							})
						})
					}
				}
				if err != nil {
					readErr = err
					return
				}
			}
		}
	}()
	// The writer appends (and rolls) on its own goroutine while passes
	// run on this one, as the acceptor and the cleaner do.
	writerDone := make(chan error, 1)
	passesDone := make(chan struct{})
	go func() {
		for i := 0; i < 1500; i++ {
			select {
			case <-passesDone:
				writerDone <- nil
				return
			default:
			}
			if err := k.appendRandom(15); err != nil {
				writerDone <- err
				return
			}
		}
		writerDone <- nil
	}()
	now := time.Unix(3_000_000, 0)
	for round := 0; round < 60; round++ {
		now = now.Add(2 * cleanTestRetention)
		if _, err := l.Clean(context.Background(), cleanOpts(now)); err != nil {
			t.Fatal(err)
		}
	}
	close(passesDone)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if readErr != nil {
		t.Fatalf("reader during compaction: %v", readErr)
	}
}

// TestCleanLagAndAbort: min.compaction.lag.ms keeps young segments dirty,
// a cancelled pass changes nothing, and Close waits for a pass.
func TestCleanLagAndAbort(t *testing.T) {
	m := vfs.NewMem()
	cfg := Config{SegmentBytes: 1500, IndexInterval: 256, RetentionAge: -1}
	l := mustOpen(t, m, dir, cfg)
	k := newKeyedLog(t, l, 4)
	k.ts = time.Unix(5_000_000, 0).UnixMilli()
	for i := 0; i < 80; i++ {
		if err := k.appendRandom(5); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(k.ts)
	st, err := l.CleanStats(now, time.Hour, 0)
	if err != nil || st.DirtyBytes != 0 {
		t.Fatalf("records younger than the lag count as dirty: %+v %v", st, err)
	}
	if res, err := l.Clean(context.Background(), CleanOptions{Now: now, MinCompactionLag: time.Hour}); err != nil || res.SegmentsWritten != 0 {
		t.Fatalf("a pass cleaned records younger than min.compaction.lag.ms: %+v %v", res, err)
	}
	st, _ = l.CleanStats(now, 0, 0)
	if st.DirtyBytes == 0 || st.DirtyRatio() != 1 {
		t.Fatalf("stats without a lag: %+v", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := readRecords(t, l)
	if _, err := l.Clean(ctx, CleanOptions{Now: now}); !errors.Is(err, errCleanAborted) {
		t.Fatalf("cancelled pass: %v", err)
	}
	if after := readRecords(t, l); len(after) != len(before) {
		t.Fatalf("a cancelled pass changed the log: %d records, was %d", len(after), len(before))
	}
	throttled := 0
	res, err := l.Clean(context.Background(), CleanOptions{Now: now, Throttle: func(context.Context, int) error { throttled++; return nil }})
	if err != nil || throttled == 0 || res.RecordsRemoved == 0 {
		t.Fatalf("pass: %+v %v, throttle called %d times", res, err, throttled)
	}
	st, _ = l.CleanStats(now, 0, 0)
	if st.DirtyBytes != 0 || st.FirstDirty != res.CleanedTo {
		t.Fatalf("stats after a pass: %+v", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Clean(context.Background(), CleanOptions{Now: now}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Clean after Close: %v", err)
	}
}

// TestCleanDropsAbortedTransactions: a record of an aborted transaction
// never supersedes a committed value and is removed; a committed
// transaction's record does supersede; markers stay.
func TestCleanDropsAbortedTransactions(t *testing.T) {
	m := vfs.NewMem()
	l := mustOpen(t, m, dir, Config{SegmentBytes: 1 << 20, RetentionAge: -1})
	defer l.Close()
	var next int64
	add := func(p batch.Params, key, value string) {
		t.Helper()
		p.BaseOffset = next
		b, err := batch.Append(nil, &p, []batch.Record{{Timestamp: 1, Key: []byte(key), Value: []byte(value)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(b, nil); err != nil {
			t.Fatal(err)
		}
		next++
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		typ := batch.ControlAbort
		if commit {
			typ = batch.ControlCommit
		}
		b := batch.AppendMarker(nil, next, 0, batch.Marker{ProducerID: pid, ProducerEpoch: 0, Type: typ})
		if err := l.Append(b, nil); err != nil {
			t.Fatal(err)
		}
		next++
	}
	plain := batch.Params{}.NoProducer()
	txn := func(pid int64) batch.Params {
		return batch.Params{Transactional: true, ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0}
	}
	add(plain, "a", "committed-a")
	add(txn(1), "a", "aborted-a") // offset 1, aborted below
	marker(1, false)
	add(plain, "b", "old-b")
	add(txn(2), "b", "txn-b") // offset 4, committed
	marker(2, true)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	_, err := l.Clean(context.Background(), CleanOptions{Now: time.Now(),
		Aborted: func(h *batch.Header) bool { return h.ProducerID == 1 }})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var offs []int64
	controls := 0
	if err := l.ScanHeaders(0, func(h batch.Header) error {
		if h.Control() {
			controls++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range readRecords(t, l) {
		offs = append(offs, r.off)
		if r.key == "a" || r.key == "b" {
			got[r.key] = string(r.value)
		}
	}
	if got["a"] != "committed-a" || got["b"] != "txn-b" || controls != 2 {
		t.Fatalf("after compaction a=%q b=%q, %d markers (offsets %v)", got["a"], got["b"], controls, offs)
	}
	for _, o := range offs {
		if o == 1 || o == 3 {
			t.Fatalf("offset %d (aborted or superseded) survived: %v", o, offs)
		}
	}
}

// TestCleanRemovesEmptyTransactionMarkers: a marker whose transaction has
// no batch left goes once delete.retention.ms has passed since it was
// first cleaned; a marker whose transaction keeps a record, and a
// producer's last batch, stay.
func TestCleanRemovesEmptyTransactionMarkers(t *testing.T) {
	m := vfs.NewMem()
	l := mustOpen(t, m, dir, Config{SegmentBytes: 1 << 20, RetentionAge: -1})
	defer l.Close()
	var next int64
	add := func(p batch.Params, key, value string) {
		t.Helper()
		p.BaseOffset = next
		b, err := batch.Append(nil, &p, []batch.Record{{Timestamp: 1, Key: []byte(key), Value: []byte(value)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(b, nil); err != nil {
			t.Fatal(err)
		}
		next++
	}
	marker := func(pid int64, typ batch.ControlType) {
		t.Helper()
		if err := l.Append(batch.AppendMarker(nil, next, 0, batch.Marker{ProducerID: pid, Type: typ}), nil); err != nil {
			t.Fatal(err)
		}
		next++
	}
	txn := batch.Params{Transactional: true, ProducerID: 7, BaseSequence: 0}
	plain := batch.Params{}.NoProducer()
	add(txn, "a", "aborted")      // 0
	marker(7, batch.ControlAbort) // 1: its transaction is removed whole
	txn.BaseSequence = 1
	add(txn, "a", "old")           // 2: superseded below
	marker(7, batch.ControlCommit) // 3: its transaction is compacted away
	add(plain, "a", "new")         // 4
	txn.BaseSequence = 2
	add(txn, "b", "kept")          // 5: the latest b
	marker(7, batch.ControlCommit) // 6: its transaction keeps a record
	txn.BaseSequence = 3
	add(txn, "a", "aborted-again") // 7: aborted; kept emptied as producer 7's last data batch
	marker(7, batch.ControlAbort)  // 8: its transaction keeps the emptied batch
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	aborted := func(h *batch.Header) bool { return h.BaseOffset == 0 || h.BaseOffset == 7 }
	markers := func() []int64 {
		t.Helper()
		var offs []int64
		if err := l.ScanHeaders(0, func(h batch.Header) error {
			if h.Control() {
				offs = append(offs, h.BaseOffset)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return offs
	}
	t0 := time.Now()
	if _, err := l.Clean(context.Background(), CleanOptions{Now: t0, DeleteRetention: time.Hour, Aborted: aborted}); err != nil {
		t.Fatal(err)
	}
	if got := markers(); !slices.Equal(got, []int64{1, 3, 6, 8}) {
		t.Fatalf("markers after the first pass at %v, want all four until delete.retention.ms has passed", got)
	}
	if _, err := l.Clean(context.Background(), CleanOptions{Now: t0.Add(30 * time.Minute), DeleteRetention: time.Hour, Aborted: aborted}); err != nil {
		t.Fatal(err)
	}
	if got := markers(); !slices.Equal(got, []int64{1, 3, 6, 8}) {
		t.Fatalf("markers at %v half-way through delete.retention.ms", got)
	}
	if _, err := l.Clean(context.Background(), CleanOptions{Now: t0.Add(2 * time.Hour), DeleteRetention: time.Hour, Aborted: aborted}); err != nil {
		t.Fatal(err)
	}
	if got := markers(); !slices.Equal(got, []int64{6, 8}) {
		t.Fatalf("markers at %v after delete.retention.ms, want 6 (its transaction keeps b) and 8 (the producer's last batch)", got)
	}
	got := map[string]string{}
	for _, r := range readRecords(t, l) {
		if r.key == "a" || r.key == "b" { // the rest are the markers' control records
			got[r.key] = string(r.value)
		}
	}
	if got["a"] != "new" || got["b"] != "kept" {
		t.Fatalf("records after compaction: %v", got)
	}
	// Recovery finds no open transaction: every batch left has its marker.
	l.Close()
	l2 := mustOpen(t, m, dir, Config{SegmentBytes: 1 << 20, RetentionAge: -1})
	defer l2.Close()
	if n := l2.NextOffset(); n != next {
		t.Fatalf("reopened at %d, want %d", n, next)
	}
}
