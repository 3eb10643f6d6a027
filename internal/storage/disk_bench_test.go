//go:build linux

package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluicedb/sluice/internal/vfs"
)

// These benchmarks measure the disk under the data directory, not Sluice:
// they are the evidence for two storage choices (docs/architecture.md).
//
// BenchmarkFdatasync: a 4 KiB write then fdatasync, appending to a
// growing file (every fdatasync also commits the new file size and
// extents) or overwriting a file whose blocks were written and synced
// before (pre-zeroed: fdatasync flushes data only), or overwriting a
// file zeroed with direct writes (O_DIRECT, as the WAL's preparer does:
// it must behave like the buffered-zeroed one, not like unwritten
// extents whose first overwrite commits metadata).
func BenchmarkFdatasync(b *testing.B) {
	for _, mode := range []string{"append", "prezeroed", "prezeroed-direct"} {
		b.Run(mode, func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			const block = 4096
			if mode == "prezeroed" {
				zero := make([]byte, 1<<20)
				for off := int64(0); off < int64(b.N)*block; off += int64(len(zero)) {
					if _, err := f.WriteAt(zero, off); err != nil {
						b.Fatal(err)
					}
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
			if mode == "prezeroed-direct" {
				size := (int64(b.N)*block + 1<<20 - 1) &^ (1<<20 - 1)
				if err := vfs.OS().(vfs.DirectZeroer).ZeroDirect(f.Name(), size); err != nil {
					b.Skipf("direct writes: %v", err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
			buf := make([]byte, block)
			for i := range buf {
				buf[i] = byte(i)
			}
			b.SetBytes(block)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := f.WriteAt(buf, int64(i)*block); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSyncMany: one group-commit cycle over many partitions, each
// with a small append (200 B) to make durable: fdatasync of each file in
// turn (serial), from a pool of k goroutines, from one goroutine per file
// (what one sync goroutine per partition amounts to), or one syncfs of
// the whole filesystem. ns/op is one cycle.
func BenchmarkSyncMany(b *testing.B) {
	for _, files := range []int{256, 2000} {
		for _, mode := range []string{"serial", "pool4", "pool16", "pool64", "all", "syncfs"} {
			b.Run(fmt.Sprintf("files=%d/%s", files, mode), func(b *testing.B) {
				dir := b.TempDir()
				fs := make([]*os.File, files)
				for i := range fs {
					f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(i)), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					fs[i] = f
				}
				rec := make([]byte, 200)
				workers := map[string]int{"serial": 1, "pool4": 4, "pool16": 16, "pool64": 64, "all": files}[mode]
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for _, f := range fs {
						if _, err := f.Write(rec); err != nil {
							b.Fatal(err)
						}
					}
					if mode == "syncfs" {
						if err := unix.Syncfs(int(fs[0].Fd())); err != nil {
							b.Fatal(err)
						}
						continue
					}
					syncAll(b, fs, workers)
				}
			})
		}
	}
}

func syncAll(b *testing.B, fs []*os.File, workers int) {
	work := make(chan *os.File)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for _, f := range fs {
		work <- f
	}
	close(work)
	wg.Wait()
}
