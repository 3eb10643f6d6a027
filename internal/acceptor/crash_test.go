package acceptor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

const crashDir = "/data/p0"

// crashStorage is a small-segment layout so that workloads roll segments.
var crashStorage = storage.Config{SegmentBytes: 48 << 10, IndexInterval: 1024, RetentionAge: -1, SegmentAge: -1}

// spec is one append of a workload.
type spec struct {
	records, valueSize int
	durable            bool
	seed               byte
}

// workload returns n appends of mixed sizes, a few larger than bufSize.
func workload(seed uint64, n, bufSize int) []spec {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]spec, n)
	for i := range out {
		s := spec{records: 1 + rng.IntN(4), durable: rng.IntN(4) != 0, seed: byte(i)}
		switch rng.IntN(8) {
		case 0: // larger than the buffer
			s.valueSize = (bufSize + rng.IntN(bufSize)) / s.records
		default:
			s.valueSize = rng.IntN(1500)
		}
		out[i] = s
	}
	return out
}

func (s spec) bytes(i int) []byte {
	return storagetest.Build(storagetest.Spec{Records: s.records, ValueSize: s.valueSize, Timestamp: int64(i) * 10,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Seed: s.seed})
}

// acked is an append that Append reported as done.
type acked struct {
	i       int
	base    int64
	orig    []byte // its batches with base offset 0
	durable bool
}

// runWorkload appends specs from workers goroutines through an acceptor
// on the log in fs, then closes both. It returns the appends acknowledged,
// the highest high watermark seen, and the first append error.
func runWorkload(t *testing.T, fs vfs.FS, specs []spec, workers int, cfg Config) (acks []acked, hw int64, firstErr error) {
	t.Helper()
	return runWorkloadOn(t, fs, crashStorage, specs, workers, cfg)
}

// runWorkloadOn is runWorkload with the log laid out by scfg.
func runWorkloadOn(t *testing.T, fs vfs.FS, scfg storage.Config, specs []spec, workers int, cfg Config) (acks []acked, hw int64, firstErr error) {
	t.Helper()
	l, err := storage.Open(fs, crashDir, scfg)
	if err != nil {
		return nil, 0, err
	}
	a := Start(l, cfg)
	var mu sync.Mutex // guards acks and firstErr
	idx := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				orig := specs[i].bytes(i)
				req := &Request{Batches: append([]byte(nil), orig...), Durable: specs[i].durable}
				if i%2 == 0 { // half as the broker sends them: parsed once, headers attached
					req.Headers = mustHeaders(req.Batches)
				}
				res, err := a.Append(context.Background(), req)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
				} else {
					acks = append(acks, acked{i: i, base: res.BaseOffset, orig: orig, durable: specs[i].durable})
				}
				mu.Unlock()
			}
		}()
	}
	for i := range specs {
		idx <- i
	}
	close(idx)
	wg.Wait()
	hw = a.HighWatermark()
	if err := a.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	// A failed fsync covering only acks=1 appends (already released) is
	// reported by Err alone.
	if err := a.Err(); err != nil && firstErr == nil {
		firstErr = err
	}
	// A failed log closes without a checkpoint (and without an error);
	// a healthy one fails here if its checkpoint cannot be written.
	if err := l.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	return acks, hw, firstErr
}

// verifyRecovered reopens the log in fs and checks that every append
// acknowledged as durable is there byte for byte at its offset, that the
// offsets are contiguous from the log start, and that nothing the
// acceptor published as committed (hw) is missing.
func verifyRecovered(t *testing.T, fs vfs.FS, dir string, acks []acked, hw int64) {
	t.Helper()
	l, err := storage.Open(fs, dir, crashStorage)
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer l.Close()
	end := l.NextOffset()
	if end < hw {
		t.Fatalf("log ends at %d after the crash, but the high watermark had reached %d", end, hw)
	}
	var data []byte
	pos := map[int64]int{} // base offset -> byte position in data
	next := l.StartOffset()
	for next < end {
		s, err := l.Read(next, end, 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		b, err := s.Bytes()
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		if _, err := batch.Split(b, func(h batch.Header, raw []byte) error {
			if h.BaseOffset != next {
				return fmt.Errorf("batch at offset %d, want %d (offsets not contiguous)", h.BaseOffset, next)
			}
			pos[h.BaseOffset] = len(data)
			data = append(data, raw...)
			next = h.LastOffset() + 1
			return nil
		}); err != nil {
			t.Fatalf("recovered log: %v", err)
		}
	}
	for _, ack := range acks {
		if !ack.durable {
			continue
		}
		want, _ := storagetest.WithBaseOffset(ack.orig, ack.base)
		p, ok := pos[ack.base]
		if !ok || p+len(want) > len(data) || !bytes.Equal(data[p:p+len(want)], want) {
			t.Fatalf("durable append %d at offset %d (%d bytes) is missing or differs after the crash (log ends at %d)", ack.i, ack.base, len(want), end)
		}
	}
}

// checkAckOrder checks that acknowledged appends have distinct,
// non-overlapping offset ranges.
func checkAckOrder(t *testing.T, acks []acked) {
	t.Helper()
	seen := map[int64]bool{}
	for _, a := range acks {
		if seen[a.base] {
			t.Fatalf("two appends got base offset %d", a.base)
		}
		seen[a.base] = true
	}
}

// TestCrashAtEveryBoundary runs a randomized workload once to count its
// filesystem operations, then again with the machine stopping at each
// mutating operation in turn (every later write, sync, create, rename...
// fails with EIO), crashes (dropping unsynced bytes, or tearing them), and
// checks recovery.
func TestCrashAtEveryBoundary(t *testing.T) {
	const bufSize = 8 << 10
	cfg := Config{BufferSize: bufSize, QueueSize: 64, RetentionCheck: -1}
	for _, seed := range []uint64{1, 2} {
		specs := workload(seed, 60, bufSize)
		fs := vfs.NewMem()
		acks, hw, err := runWorkload(t, fs, specs, 4, cfg)
		if err != nil {
			t.Fatalf("seed %d: clean run: %v", seed, err)
		}
		if len(acks) != len(specs) {
			t.Fatalf("seed %d: clean run acknowledged %d of %d", seed, len(acks), len(specs))
		}
		checkAckOrder(t, acks)
		verifyRecovered(t, fs, crashDir, acks, hw)
		total := fs.Seq()
		names, err := fs.ReadDir(crashDir)
		if err != nil {
			t.Fatal(err)
		}
		segs := 0
		for _, n := range names {
			if strings.HasSuffix(n, ".log") {
				segs++
			}
		}
		if segs < 3 {
			t.Fatalf("seed %d: workload did not roll segments (%d segments: %v)", seed, segs, names)
		}
		// Goroutine scheduling changes how appends coalesce, so each run
		// has its own operation count: go a little past the first run's.
		for k := int64(1); k <= total+total/8+1; k++ {
			fs := vfs.NewMem()
			fs.Inject(vfs.FailFromSeq(k, syscall.EIO))
			acks, hw, err := runWorkload(t, fs, specs, 4, cfg)
			if fs.Seq() >= k && err == nil {
				t.Fatalf("seed %d: op %d of %d failed, but no append or Close reported it", seed, k, fs.Seq())
			}
			if fs.Seq() < k && (err != nil || len(acks) != len(specs)) {
				t.Fatalf("seed %d: no op failed (%d ops), yet %d of %d acknowledged, error %v", seed, fs.Seq(), len(acks), len(specs), err)
			}
			if err != nil && !errors.Is(err, syscall.EIO) {
				t.Fatalf("seed %d: stop at op %d: error %v does not say EIO", seed, k, err)
			}
			checkAckOrder(t, acks)
			tear := k%2 == 0
			crashed := fs.CrashClone(vfs.CrashOptions{Tear: tear, Rand: rand.New(rand.NewPCG(seed, uint64(k)))})
			t.Run(fmt.Sprintf("seed=%d/stop=%d/tear=%v", seed, k, tear), func(t *testing.T) {
				verifyRecovered(t, crashed, crashDir, acks, hw)
			})
		}
		t.Logf("seed %d: %d crash points, %d appends", seed, total+total/8+1, len(specs))
	}
}

// TestCrashMidFlight crashes the machine (a CrashClone) at random moments
// while appends are in flight, without stopping the writer: every append
// acknowledged before the crash instant must survive it.
func TestCrashMidFlight(t *testing.T) {
	const bufSize = 8 << 10
	specs := workload(7, 400, bufSize)
	fs := vfs.NewMem()
	l, err := storage.Open(fs, crashDir, crashStorage)
	if err != nil {
		t.Fatal(err)
	}
	a := Start(l, Config{BufferSize: bufSize, RetentionCheck: -1})
	var mu sync.Mutex // guards acks
	var acks []acked
	idx := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				orig := specs[i].bytes(i)
				res, err := a.Append(context.Background(), &Request{Batches: append([]byte(nil), orig...), Durable: specs[i].durable})
				if err != nil {
					t.Errorf("append %d: %v", i, err)
					continue
				}
				mu.Lock()
				acks = append(acks, acked{i: i, base: res.BaseOffset, orig: orig, durable: specs[i].durable})
				mu.Unlock()
			}
		}()
	}
	type crash struct {
		fs   *vfs.MemFS
		acks []acked
		hw   int64
	}
	var crashes []crash
	for i := range specs {
		idx <- i
		if i%50 == 49 {
			// Acks and the HW are read before the clone: all of them were
			// durable before this instant.
			mu.Lock()
			c := crash{acks: append([]acked(nil), acks...)}
			mu.Unlock()
			c.hw = a.HighWatermark()
			c.fs = fs.CrashClone(vfs.CrashOptions{Tear: i%100 == 49, Rand: rand.New(rand.NewPCG(7, uint64(i)))})
			crashes = append(crashes, c)
		}
	}
	close(idx)
	wg.Wait()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range crashes {
		t.Run(fmt.Sprintf("crash=%d/acks=%d", i, len(c.acks)), func(t *testing.T) {
			verifyRecovered(t, c.fs, crashDir, c.acks, c.hw)
		})
	}
	verifyRecovered(t, fs, crashDir, acks, a.HighWatermark())
}

// TestInjectedErrors fails one write or fsync with ENOSPC or EIO: the
// error is clear, the partition stops, nothing acknowledged is lost, and
// a reopened log accepts appends again.
func TestInjectedErrors(t *testing.T) {
	const bufSize = 8 << 10
	specs := workload(3, 80, bufSize)
	tests := []struct {
		kind  vfs.OpKind
		n     int64
		errno syscall.Errno
	}{
		{vfs.OpWrite, 1, syscall.ENOSPC},
		{vfs.OpWrite, 5, syscall.ENOSPC},
		{vfs.OpWrite, 12, syscall.EIO},
		{vfs.OpSync, 2, syscall.EIO},
		{vfs.OpSync, 6, syscall.ENOSPC},
		{vfs.OpCreate, 2, syscall.ENOSPC}, // a segment roll
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v#%d/%v", tt.kind, tt.n, tt.errno), func(t *testing.T) {
			fs := vfs.NewMem()
			fs.Inject(vfs.FailNth(tt.kind, tt.n, tt.errno, false))
			// No zeros written ahead, so that the nth write is a data
			// write: a failed write of zeros leaves the partition healthy
			// (TestPreallocateFailureKeepsPartition).
			noPrealloc := crashStorage
			noPrealloc.Preallocate = -1
			acks, hw, err := runWorkloadOn(t, fs, noPrealloc, specs, 4, Config{BufferSize: bufSize, QueueSize: 64, RetentionCheck: -1})
			if !errors.Is(err, tt.errno) || !errors.Is(err, ErrFailed) {
				t.Fatalf("first error %v, want ErrFailed wrapping %v", err, tt.errno)
			}
			if len(acks) == len(specs) {
				t.Fatal("every append succeeded despite the failure")
			}
			checkAckOrder(t, acks)
			fs.Inject(nil)
			verifyRecovered(t, fs.CrashClone(vfs.CrashOptions{}), crashDir, acks, hw)
			verifyRecovered(t, fs, crashDir, acks, hw)

			// Reopened, the partition takes appends again after what survived.
			l, err := storage.Open(fs, crashDir, crashStorage)
			if err != nil {
				t.Fatal(err)
			}
			a := Start(l, Config{RetentionCheck: -1})
			if a.HighWatermark() != l.NextOffset() {
				t.Errorf("reopened high watermark %d, log end %d", a.HighWatermark(), l.NextOffset())
			}
			res, err := a.Append(context.Background(), &Request{Batches: storagetest.MakeBatch(2, 10, 1), Durable: true})
			if err != nil || res.BaseOffset < hw {
				t.Errorf("append after reopen: %+v, %v (high watermark before was %d)", res, err, hw)
			}
			if err := a.Close(); err != nil {
				t.Error(err)
			}
			if err := l.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// mustHeaders parses b as the broker does (batch.Split, CRC32C included)
// and returns the headers, for a Request that carries them.
func mustHeaders(b []byte) []batch.Header {
	var hs []batch.Header
	if _, err := batch.Split(b, func(h batch.Header, _ []byte) error {
		hs = append(hs, h)
		return nil
	}); err != nil {
		panic("mustHeaders: " + err.Error())
	}
	return hs
}

// TestPreallocateFailureKeepsPartition: when writing zeros ahead of the
// data fails (a full disk), the partition stays healthy, later appends
// succeed, and everything acknowledged is in the log.
func TestPreallocateFailureKeepsPartition(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll(crashDir); err != nil {
		t.Fatal(err)
	}
	l, err := storage.Open(fs, crashDir, crashStorage)
	if err != nil {
		t.Fatal(err)
	}
	a := Start(l, Config{RetentionCheck: -1})
	zeroFailed := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex // guards writes
	writes := 0
	fs.Inject(func(op vfs.Op) error {
		if op.Kind != vfs.OpWrite {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if writes++; writes == 1 {
			return nil // the first append's data
		}
		once.Do(func() { close(zeroFailed) })
		return vfs.Errno(op, syscall.ENOSPC) // the zeros after it
	})
	ctx := context.Background()
	r0, o0 := mkReq(2, 100, 1, true)
	c0 := goAppend(ctx, a, r0, o0).wait(t)
	select {
	case <-zeroFailed:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle acceptor never wrote zeros ahead")
	}
	fs.Inject(nil)
	r1, o1 := mkReq(3, 100, 2, true)
	c1 := goAppend(ctx, a, r1, o1).wait(t)
	if c0.err != nil || c1.err != nil || a.Err() != nil {
		t.Fatalf("appends around a failed preallocation: %v, %v; partition: %v", c0.err, c1.err, a.Err())
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	acks := []acked{{i: 0, base: c0.res.BaseOffset, orig: o0, durable: true}, {i: 1, base: c1.res.BaseOffset, orig: o1, durable: true}}
	verifyRecovered(t, fs, crashDir, acks, c1.res.BaseOffset+3)
}
