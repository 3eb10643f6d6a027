package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// SegmentsFloorConfig describes a segments floor run: what putting bytes
// into partitions' segment files costs, written through the page cache as
// a durable broker's segments take them (the shared WAL's own writes go
// past the page cache and are not this figure).
type SegmentsFloorConfig struct {
	Dir   string // where the scratch directory is made (and removed)
	Bytes int64  // written in all, spread over Files
	Files int    // segment files written round robin (0: SegmentsFloorFiles)
}

// SegmentsFloorFiles is the default number of files of a segments floor.
const SegmentsFloorFiles = 16

// segmentsFloorWrite is the size of each write: a partition's
// write-behind tail (internal/storage).
const segmentsFloorWrite = 16 << 10

// SegmentsFloorResult is the outcome of a segments floor run.
type SegmentsFloorResult struct {
	Dir       string        `json:"dir"`
	Bytes     int64         `json:"bytes"`
	Files     int           `json:"files"`
	WriteSize int           `json:"write_size"`
	Elapsed   time.Duration `json:"elapsed_ns"`   // the writes and the syncs
	WriteCPU  time.Duration `json:"write_cpu_ns"` // this process's user and system time in the writes
	SyncCPU   time.Duration `json:"sync_cpu_ns"`  // and in each file's fdatasync after them (the writeback)
}

// CPUPerMiB is the writes' and syncs' CPU time per MiB written.
func (r SegmentsFloorResult) CPUPerMiB() time.Duration {
	if r.Bytes <= 0 {
		return 0
	}
	return time.Duration(float64(r.WriteCPU+r.SyncCPU) * float64(1<<20) / float64(r.Bytes))
}

// SegmentsFloor appends cfg.Bytes to cfg.Files new files in a scratch
// directory under cfg.Dir, in 16 KiB writes taken by the files in turn,
// then fdatasyncs each file, and reports the time and the CPU of the
// writes and of the syncs; the scratch directory is removed at the end.
// Every byte a durable broker keeps in its segments is copied into the
// page cache once and written back once, which an in-memory broker does
// not do: this is the CPU that costs on this machine, with nothing else
// in the way. On a virtual machine whose host takes back the guest's free
// pages, the page cache's pages new to the guest make most of it, and it
// varies with how many the machine freed just before (as the memory
// floor does).
func SegmentsFloor(ctx context.Context, cfg SegmentsFloorConfig) (SegmentsFloorResult, error) {
	if cfg.Files == 0 {
		cfg.Files = SegmentsFloorFiles
	}
	switch {
	case cfg.Dir == "":
		return SegmentsFloorResult{}, errors.New("a directory is required")
	case cfg.Bytes < segmentsFloorWrite:
		return SegmentsFloorResult{}, fmt.Errorf("segment bytes %d: want at least %d", cfg.Bytes, segmentsFloorWrite)
	case cfg.Files < 0:
		return SegmentsFloorResult{}, fmt.Errorf("segment files %d: want 1 or more", cfg.Files)
	}
	scratch, err := os.MkdirTemp(cfg.Dir, ".sluice-bench-segments-*")
	if err != nil {
		return SegmentsFloorResult{}, err
	}
	defer os.RemoveAll(scratch)
	files := make([]*os.File, cfg.Files)
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i := range files {
		f, err := os.OpenFile(filepath.Join(scratch, fmt.Sprintf("%020d.log", i)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return SegmentsFloorResult{}, err
		}
		files[i] = f
	}
	buf := patterned(segmentsFloorWrite)
	offs := make([]int64, cfg.Files)
	cpu0, err := processCPU()
	if err != nil {
		return SegmentsFloorResult{}, err
	}
	start := time.Now()
	for left, i := cfg.Bytes, 0; left > 0; i = (i + 1) % cfg.Files {
		if err := ctx.Err(); err != nil {
			return SegmentsFloorResult{}, err
		}
		n := int64(len(buf))
		if left < n {
			n = left
		}
		if _, err := files[i].WriteAt(buf[:n], offs[i]); err != nil {
			return SegmentsFloorResult{}, err
		}
		offs[i] += n
		left -= n
	}
	cpu1, err := processCPU()
	if err != nil {
		return SegmentsFloorResult{}, err
	}
	for _, f := range files {
		if err := fdatasync(f); err != nil {
			return SegmentsFloorResult{}, fmt.Errorf("sync: %w", err)
		}
	}
	elapsed := time.Since(start)
	cpu2, err := processCPU()
	if err != nil {
		return SegmentsFloorResult{}, err
	}
	return SegmentsFloorResult{
		Dir: cfg.Dir, Bytes: cfg.Bytes, Files: cfg.Files, WriteSize: segmentsFloorWrite,
		Elapsed: elapsed, WriteCPU: cpu1 - cpu0, SyncCPU: cpu2 - cpu1,
	}, nil
}

// WriteSegmentsFloor prints a segments floor result in the style of
// WriteFloor.
func WriteSegmentsFloor(w io.Writer, r SegmentsFloorResult) {
	fmt.Fprintf(w, "segment writes: %d MiB in %d KiB writes to %d files through the page cache, then fdatasync each, in %s in %.3fs, CPU %.3fs (%s per MiB; writes %.3fs, syncs %.3fs)\n",
		r.Bytes>>20, r.WriteSize>>10, r.Files, r.Dir, r.Elapsed.Seconds(), (r.WriteCPU + r.SyncCPU).Seconds(), fmtDur(r.CPUPerMiB()), r.WriteCPU.Seconds(), r.SyncCPU.Seconds())
}
