package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestFloor times the requested writes on a pre-zeroed scratch file, cycles
// through a file smaller than the run, removes the file, and refuses bad
// configurations with a message naming the problem.
func TestFloor(t *testing.T) {
	dir := t.TempDir()
	res, err := Floor(context.Background(), FloorConfig{Dir: dir, Ops: 50, Size: 512, FileBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Latency
	if res.Ops != 50 || res.Size != 512 || res.Dir != dir || res.Elapsed <= 0 {
		t.Fatalf("result %+v", res)
	}
	if l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.Max || res.OpsPerSec() <= 0 {
		t.Fatalf("latencies %+v, %.0f ops/s", l, res.OpsPerSec())
	}
	// Linux accounts a process's CPU time to the nanosecond: 50 writes
	// and fdatasyncs cost some, and no more than the window held.
	if runtime.GOOS == "linux" && (res.CPU <= 0 || res.CPU > res.Elapsed*time.Duration(runtime.NumCPU())+10*time.Millisecond || res.CPUPerOp() != res.CPU/50) {
		t.Fatalf("CPU %v (%v per write) over %v", res.CPU, res.CPUPerOp(), res.Elapsed)
	}
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Fatalf("scratch file left behind: %v %v", left, err)
	}
	var out bytes.Buffer
	WriteFloor(&out, res)
	if !strings.HasPrefix(out.String(), "floor: 50 writes of 512 B + fdatasync in "+dir) || !strings.Contains(out.String(), "p99 ") ||
		runtime.GOOS == "linux" && !strings.Contains(out.String(), "\ncpu: ") {
		t.Fatalf("summary %q", out.String())
	}

	// A duration bounds the run instead of a count.
	res, err = Floor(context.Background(), FloorConfig{Dir: dir, Duration: 20 * time.Millisecond, Size: 4096})
	if err != nil || res.Ops < 1 {
		t.Fatalf("by duration: %d ops, %v", res.Ops, err)
	}

	// With a peer, each write first waits for its answer; the peer's
	// spinning is not counted as the writer's CPU, and its goroutine ends
	// with the run.
	res, err = Floor(context.Background(), FloorConfig{Dir: dir, Ops: 20, Size: 4096, Peer: 50 * time.Microsecond})
	if err != nil || res.Ops != 20 || res.Peer != 50*time.Microsecond {
		t.Fatalf("with a peer: %+v, %v", res, err)
	}
	if res.Elapsed < 20*res.Peer {
		t.Fatalf("20 writes each after a peer spinning %v took %v", res.Peer, res.Elapsed)
	}
	out.Reset()
	WriteFloor(&out, res)
	if !strings.Contains(out.String(), "each after a 50µs round trip to a busy peer") {
		t.Fatalf("summary %q", out.String())
	}

	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  FloorConfig
		want string
	}{
		{FloorConfig{Ops: 1, Size: 1}, "a directory is required"},
		{FloorConfig{Dir: dir, Size: 1}, "give an op count or a duration"},
		{FloorConfig{Dir: dir, Ops: 1}, "write size 0"},
		{FloorConfig{Dir: filepath.Join(dir, "missing"), Ops: 1, Size: 1}, "no such file or directory"},
		{FloorConfig{Dir: file, Ops: 1, Size: 1}, "is not a directory"},
		{FloorConfig{Dir: dir, Ops: 1, Size: 1, Peer: -time.Microsecond}, "peer time -1µs must not be negative"},
	} {
		if _, err := Floor(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
}

// TestFilesFloor makes the partitions' directories and files, reports
// their count, size and cost, leaves nothing behind, and refuses a bad
// configuration.
func TestFilesFloor(t *testing.T) {
	dir := t.TempDir()
	res, err := FilesFloor(context.Background(), FilesFloorConfig{Dir: dir, Partitions: 40, Bytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Partitions != 40 || res.Bytes != 1000 || res.Dir != dir || res.Elapsed <= 0 || res.CPU < 0 {
		t.Fatalf("result %+v", res)
	}
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Fatalf("scratch files left behind: %v %v", left, err)
	}
	var out bytes.Buffer
	WriteFilesFloor(&out, res)
	if !strings.HasPrefix(out.String(), "partition files: 40 directories with a file of 1000 B") {
		t.Fatalf("summary %q", out.String())
	}
	for _, c := range []FilesFloorConfig{{Partitions: 1}, {Dir: dir}, {Dir: dir, Partitions: 1, Bytes: -1}, {Dir: filepath.Join(dir, "missing"), Partitions: 1}} {
		if _, err := FilesFloor(context.Background(), c); err == nil {
			t.Fatalf("%+v: no error", c)
		}
	}
}

// TestSegmentsFloor writes the bytes it reports over its files, leaves
// nothing behind, and refuses a bad configuration.
func TestSegmentsFloor(t *testing.T) {
	dir := t.TempDir()
	const n = 1<<20 + 100 // a last write shorter than the others
	res, err := SegmentsFloor(context.Background(), SegmentsFloorConfig{Dir: dir, Bytes: n, Files: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != n || res.Files != 3 || res.WriteSize != 16<<10 || res.Dir != dir || res.Elapsed <= 0 || res.WriteCPU < 0 || res.SyncCPU < 0 {
		t.Fatalf("result %+v", res)
	}
	if runtime.GOOS == "linux" && res.CPUPerMiB() <= 0 {
		t.Fatalf("no CPU measured: %+v", res)
	}
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Fatalf("scratch files left behind: %v %v", left, err)
	}
	var out bytes.Buffer
	WriteSegmentsFloor(&out, res)
	if !strings.HasPrefix(out.String(), "segment writes: 1 MiB in 16 KiB writes to 3 files through the page cache") || !strings.Contains(out.String(), "per MiB; writes ") {
		t.Fatalf("summary %q", out.String())
	}
	if res, err := SegmentsFloor(context.Background(), SegmentsFloorConfig{Dir: dir, Bytes: 64 << 10}); err != nil || res.Files != SegmentsFloorFiles {
		t.Fatalf("default files: %+v %v", res, err)
	}
	for _, c := range []struct {
		cfg  SegmentsFloorConfig
		want string
	}{
		{SegmentsFloorConfig{Bytes: 1 << 20}, "a directory is required"},
		{SegmentsFloorConfig{Dir: dir, Bytes: 100}, "want at least 16384"},
		{SegmentsFloorConfig{Dir: dir, Bytes: 1 << 20, Files: -1}, "want 1 or more"},
		{SegmentsFloorConfig{Dir: filepath.Join(dir, "missing"), Bytes: 1 << 20}, "no such file or directory"},
	} {
		if _, err := SegmentsFloor(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.cfg, err, c.want)
		}
	}
}

// TestMemoryFloor touches every page of the memory it reports and
// refuses less than a page.
func TestMemoryFloor(t *testing.T) {
	res, err := MemoryFloor(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != 8<<20 || res.Pages != 2048 || res.Elapsed <= 0 || res.CPU < 0 {
		t.Fatalf("result %+v", res)
	}
	var out bytes.Buffer
	WriteMemoryFloor(&out, res)
	if !strings.HasPrefix(out.String(), "new memory: 8 MiB touched, one write per 4 KiB page") || !strings.Contains(out.String(), "per page), CPU ") {
		t.Fatalf("summary %q", out.String())
	}
	if _, err := MemoryFloor(100); err == nil || !strings.Contains(err.Error(), "want at least 4096") {
		t.Fatalf("100 bytes: %v", err)
	}
}

// TestSummaryFloor prints a produce run's floor beside its latencies,
// naming the peer's time when the floor waited for one.
func TestSummaryFloor(t *testing.T) {
	r := Result{Records: 10, Elapsed: time.Second, Latency: Latencies{P50: time.Millisecond, Max: 2 * time.Millisecond}}
	for _, c := range []struct {
		peer time.Duration
		want string
	}{
		{0, "(4096 B write + fdatasync in /data, 10 ops/s)"},
		{100 * time.Microsecond, "(4096 B write + fdatasync in /data, each after a 100µs peer, 10 ops/s)"},
	} {
		r.Floor = &FloorResult{Dir: "/data", Ops: 10, Size: 4096, Elapsed: time.Second, Latency: Latencies{P50: 90 * time.Microsecond, Max: time.Millisecond}, Peer: c.peer}
		var out bytes.Buffer
		WriteSummary(&out, "produce", r)
		if !strings.Contains(out.String(), "\nfloor:   p50 90µs") || !strings.Contains(out.String(), c.want) {
			t.Errorf("peer %v: summary %q, want %q", c.peer, out.String(), c.want)
		}
	}
}
