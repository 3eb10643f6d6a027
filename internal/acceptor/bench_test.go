package acceptor

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// Benchmarks run on the real disk: in SLUICE_BENCH_DIR if set, else in
// the test's temporary directory (TMPDIR).
//
//	go test ./internal/acceptor -run '^$' -bench . -benchtime 3s

// countingLog counts the writes and fsyncs the acceptor makes.
type countingLog struct {
	*storage.Log
	writes, syncs atomic.Int64
	syncNanos     atomic.Int64 // time spent in Sync
}

func (c *countingLog) Append(b []byte, hs []batch.Header) error {
	c.writes.Add(1)
	return c.Log.Append(b, hs)
}

func (c *countingLog) Sync() error {
	c.syncs.Add(1)
	start := time.Now()
	err := c.Log.Sync()
	c.syncNanos.Add(int64(time.Since(start)))
	return err
}

func benchDir(b *testing.B) string {
	if d := os.Getenv("SLUICE_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "acceptor-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// batchOfSize returns one valid batch of exactly size bytes.
func batchOfSize(size int) []byte {
	vs := size
	for range 8 {
		bt := storagetest.MakeBatch(1, vs, 1)
		if len(bt) == size {
			return bt
		}
		vs -= len(bt) - size
	}
	panic(fmt.Sprintf("no batch of %d bytes", size))
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkAcceptor pushes b.N appends of one size through the real queue
// from a pool of goroutines (each waits only for its append to be written,
// so many are in flight, as in the seed's bench_wal_acceptor_throughput),
// then waits for the final durable offset (the high watermark). fsync=true
// is FsyncAlways, fsync=false FsyncNever; coalesce=false is NoCoalesce,
// one write per append.
func BenchmarkAcceptor(b *testing.B) {
	for _, size := range []int{1 << 10, 8 << 10, 128 << 10, 1 << 20} {
		for _, fsync := range []bool{true, false} {
			for _, coalesce := range []bool{true, false} {
				b.Run(fmt.Sprintf("size=%s/fsync=%v/coalesce=%v", sizeName(size), fsync, coalesce), func(b *testing.B) {
					benchAcceptor(b, size, fsync, coalesce, false)
				})
			}
		}
	}
}

// BenchmarkAcceptorAcksAll is BenchmarkAcceptor with FsyncAlways and
// Durable appends: each producer goroutine waits for the fsync covering
// its append before sending the next, as acks=all produce requests do.
func BenchmarkAcceptorAcksAll(b *testing.B) {
	for _, size := range []int{1 << 10, 128 << 10} {
		for _, coalesce := range []bool{true, false} {
			b.Run(fmt.Sprintf("size=%s/coalesce=%v", sizeName(size), coalesce), func(b *testing.B) {
				benchAcceptor(b, size, true, coalesce, true)
			})
		}
	}
}

func benchAcceptor(b *testing.B, size int, fsync, coalesce, durable bool) {
	dir := benchDir(b)
	l, err := storage.Open(vfs.OS(), dir, storage.Config{RetentionAge: -1, SegmentAge: -1})
	if err != nil {
		b.Fatal(err)
	}
	cl := &countingLog{Log: l}
	cfg := Config{NoCoalesce: !coalesce, RetentionCheck: -1}
	if !fsync {
		cfg.Fsync = FsyncNever
	}
	a := start(cl, cfg)
	tmpl := batchOfSize(size)
	// Keep about 8 MiB in flight (at most a full queue).
	workers := min(DefaultQueueSize, max(4, (8<<20)/size))
	var n atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]

	b.SetBytes(int64(size))
	b.ResetTimer()
	cpu0 := processCPU()
	cl.writes.Store(0)
	cl.syncs.Store(0)
	cl.syncNanos.Store(0)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Headers: the broker parses each batch once, CRC32C
			// included, while validating the produce request.
			h, err := batch.Validate(tmpl)
			if err != nil {
				e := err
				failed.Store(&e)
				return
			}
			req := &Request{Batches: append([]byte(nil), tmpl...), Headers: []batch.Header{h}, Records: 1, Durable: durable}
			for n.Add(1) <= int64(b.N) {
				if _, err := a.Append(context.Background(), req); err != nil {
					e := err // taking err's address would move it to the heap on every append
					failed.Store(&e)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	final := int64(b.N)
	for {
		ch := a.HWChanged()
		if a.HighWatermark() >= final {
			break
		}
		<-ch
	}
	b.StopTimer()
	elapsed := time.Since(start)
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/float64(max(1, cl.syncs.Load())), "appends/fsync")
	b.ReportMetric(100*float64(cl.syncNanos.Load())/float64(max(1, elapsed)), "%fsync")
	b.ReportMetric(float64(b.N)/float64(max(1, cl.writes.Load())), "appends/write")
	if err := a.Close(); err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAcceptorLoneSync is one producer sending 1 KiB acks=all
// appends one at a time (each waits for its fsync): the synchronous
// produce path, where each append costs a write and an fsync. With
// prealloc=true the idle acceptor keeps zeros written and synced ahead of
// the data (storage.Log.Preallocate), so each fdatasync covers data only;
// with false every fdatasync also commits the grown file size. µs/fsync
// is the mean fsync latency.
func BenchmarkAcceptorLoneSync(b *testing.B) {
	for _, prealloc := range []bool{false, true} {
		b.Run(fmt.Sprintf("prealloc=%v", prealloc), func(b *testing.B) {
			scfg := storage.Config{RetentionAge: -1, SegmentAge: -1, Preallocate: -1}
			if prealloc {
				scfg.Preallocate = 0 // the default
			}
			l, err := storage.Open(vfs.OS(), benchDir(b), scfg)
			if err != nil {
				b.Fatal(err)
			}
			cl := &countingLog{Log: l}
			a := start(cl, Config{RetentionCheck: -1})
			b1k := batchOfSize(1 << 10)
			h, err := batch.ParseHeader(b1k)
			if err != nil {
				b.Fatal(err)
			}
			req := &Request{Batches: b1k, Headers: []batch.Header{h}, Records: 1, Durable: true}
			b.SetBytes(1 << 10)
			b.ResetTimer()
			cl.syncs.Store(0)
			cl.syncNanos.Store(0)
			for range b.N {
				if _, err := a.Append(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cl.syncNanos.Load())/1e3/float64(max(1, cl.syncs.Load())), "µs/fsync")
			if err := a.Close(); err != nil {
				b.Fatal(err)
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRawDisk is the baseline: sequential 1 MiB writes to one file,
// each followed by fdatasync, through the same vfs.OS file as the log.
func BenchmarkRawDisk(b *testing.B) {
	dir := benchDir(b)
	fs := vfs.OS()
	f, err := fs.Create(dir + "/raw")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// processCPU is the process's CPU time (user+system) in nanoseconds: the
// whole test process is the acceptor under load here, and CPU time per
// append is less disturbed by other work on the machine than throughput.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
