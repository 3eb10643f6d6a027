package storage

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
	"github.com/sluicedb/sluice/internal/vfs"
)

// BenchmarkAppend measures Append of 1 KiB batches to the OS filesystem,
// with and without a Sync after each (the storage cost under the
// acceptor; coalescing is the acceptor's job).
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		name string
		sync bool
	}{{"nosync", false}, {"sync-each", true}} {
		b.Run(c.name, func(b *testing.B) {
			l, err := Open(vfs.OS(), b.TempDir(), Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			tmpl := storagetest.MakeBatch(1, 1024-70, 1)
			b.SetBytes(int64(len(tmpl)))
			next := int64(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				buf, n := storagetest.WithBaseOffset(tmpl, next)
				if err := l.Append(buf, nil); err != nil {
					b.Fatal(err)
				}
				next = n
				if c.sync {
					if err := l.Sync(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkRead measures Read plus WriteTo of 1 MiB slices of 1 KiB batches.
func BenchmarkRead(b *testing.B) {
	l, err := Open(vfs.OS(), b.TempDir(), Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	tmpl := storagetest.MakeBatch(1, 1024-70, 1)
	next := int64(0)
	for i := 0; i < 16<<10; i++ {
		buf, n := storagetest.WithBaseOffset(tmpl, next)
		if err := l.Append(buf, nil); err != nil {
			b.Fatal(err)
		}
		next = n
	}
	b.SetBytes(1 << 20)
	b.ResetTimer()
	off := int64(0)
	for i := 0; i < b.N; i++ {
		s, err := l.Read(off, next, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
		off = (off + 997) % (next - 1024)
	}
}

// BenchmarkAppendManyLogs appends 300-byte batches round-robin to 2000
// logs on the OS filesystem, as a produce request spread over 2000
// partitions does, with the write-behind tail off and at several sizes.
// Nothing is synced (with the shared WAL, a partition's segment is
// synced only at a rare checkpoint). One op is one Append.
func BenchmarkAppendManyLogs(b *testing.B) {
	const logs = 2000
	for _, wb := range []int{0, 16 << 10} {
		b.Run(fmt.Sprintf("write-behind=%dKiB", wb>>10), func(b *testing.B) {
			dir := b.TempDir()
			ls := make([]*Log, logs)
			for i := range ls {
				l, err := Open(vfs.OS(), filepath.Join(dir, strconv.Itoa(i)), Config{Preallocate: -1, WriteBehind: wb})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				ls[i] = l
			}
			tmpl := storagetest.MakeBatch(3, 100-25, 1)
			b.SetBytes(int64(len(tmpl)))
			next := make([]int64, logs)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := i % logs
				buf, n := storagetest.WithBaseOffset(tmpl, next[p])
				if err := ls[p].Append(buf, nil); err != nil {
					b.Fatal(err)
				}
				next[p] = n
			}
		})
	}
}
