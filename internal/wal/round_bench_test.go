//go:build unix

package wal

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/vfs"
)

// BenchmarkSmallRound is the floor of a durable step through the shared
// WAL on the disk under the test's temporary directory: one goroutine,
// one entry (a 20-record batch) per round, each appended and synced
// alone, so every round is one direct (or page-cache) write and one
// fdatasync with nothing else to do. It reports the process's CPU time
// (user+system, getrusage) per round, the kernel's share of it, and how
// many rounds held their processor through the write and the fdatasync.
//
//	go test ./internal/wal -run '^$' -bench SmallRound -benchtime 5000x -count 3
func BenchmarkSmallRound(b *testing.B) {
	w, rp, err := Open(Options{FS: vfs.OS(), Dir: filepath.Join(b.TempDir(), "wal")})
	if err != nil {
		b.Fatal(err)
	}
	if err := rp.Done(); err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	data := batches(0, 1, 1)
	round := func(i int64) {
		p, err := w.Append(key(0), i, i+1, data)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Sync(p); err != nil {
			b.Fatal(err)
		}
	}
	round(0) // the first segment is prepared
	st0 := w.Stats()
	u0, s0 := rusage(b)
	b.ResetTimer()
	for i := int64(1); i <= int64(b.N); i++ {
		round(i)
	}
	b.StopTimer()
	st := w.Stats()
	u1, s1 := rusage(b)
	n := float64(st.Rounds - st0.Rounds)
	b.ReportMetric(float64((u1+s1-u0-s0).Microseconds())/n, "cpu-µs/round")
	b.ReportMetric(float64((s1-s0).Microseconds())/n, "sys-µs/round")
	b.ReportMetric(float64(st.DirectRounds-st0.DirectRounds)/n, "direct/round")
	b.ReportMetric(float64(st.HeldRounds-st0.HeldRounds)/n, "held-syncs/round")
	b.ReportMetric(float64(st.HeldWrites-st0.HeldWrites)/n, "held-writes/round")
}

// rusage returns the process's user and system CPU time so far.
func rusage(b *testing.B) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Skipf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
