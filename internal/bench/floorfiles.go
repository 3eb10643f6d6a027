package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicedb/sluice/internal/vfs"
)

// FilesFloorConfig describes a files floor run: what giving N partitions
// their first bytes costs on a disk when each partition is a directory
// with a segment file, as in Sluice, Kafka and Redpanda.
type FilesFloorConfig struct {
	Dir        string // where the scratch directory is made (and removed)
	Partitions int    // directories, each with one file
	Bytes      int    // written to each file (one write)
}

// FilesFloorResult is the outcome of a files floor run.
type FilesFloorResult struct {
	Dir        string        `json:"dir"`
	Partitions int           `json:"partitions"`
	Bytes      int           `json:"bytes"`
	Elapsed    time.Duration `json:"elapsed_ns"` // making, writing and syncing them all
	CPU        time.Duration `json:"cpu_ns"`     // this process's user and system time for it
}

// FilesFloor makes cfg.Partitions directories in a scratch directory
// under cfg.Dir, a file in each holding cfg.Bytes bytes, then makes the
// files and their directory entries durable with the filesystem syncs a
// broker uses for many new partitions (vfs.SyncSet: one syncfs on
// Linux), and reports the time and CPU that took; the scratch directory
// is removed at the end. It is the least a durable broker that keeps a
// directory and a file per partition pays for partitions' first writes,
// beside which an in-memory broker pays nothing.
func FilesFloor(ctx context.Context, cfg FilesFloorConfig) (FilesFloorResult, error) {
	switch {
	case cfg.Dir == "":
		return FilesFloorResult{}, errors.New("a directory is required")
	case cfg.Partitions < 1:
		return FilesFloorResult{}, fmt.Errorf("partitions %d: want 1 or more", cfg.Partitions)
	case cfg.Bytes < 0:
		return FilesFloorResult{}, fmt.Errorf("bytes %d must not be negative", cfg.Bytes)
	}
	scratch, err := os.MkdirTemp(cfg.Dir, ".sluice-bench-files-*")
	if err != nil {
		return FilesFloorResult{}, err
	}
	defer os.RemoveAll(scratch)
	buf := patterned(cfg.Bytes)
	fs := vfs.OS()
	set := vfs.NewSyncSet(fs, scratch)
	defer set.Close()
	cpu0, err := processCPU()
	if err != nil {
		return FilesFloorResult{}, err
	}
	start := time.Now()
	dirs := make([]string, 0, cfg.Partitions+1)
	for i := range cfg.Partitions {
		if err := ctx.Err(); err != nil {
			return FilesFloorResult{}, err
		}
		d := filepath.Join(scratch, fmt.Sprint(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			return FilesFloorResult{}, err
		}
		name := filepath.Join(d, "00000000000000000000.log")
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return FilesFloorResult{}, err
		}
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return FilesFloorResult{}, err
		}
		if err := f.Close(); err != nil {
			return FilesFloorResult{}, err
		}
		set.AddName(name)
		dirs = append(dirs, d)
	}
	set.AddDir(append(dirs, scratch)...)
	if err := set.Sync(); err != nil {
		return FilesFloorResult{}, fmt.Errorf("sync: %w", err)
	}
	elapsed := time.Since(start)
	cpu1, err := processCPU()
	if err != nil {
		return FilesFloorResult{}, err
	}
	return FilesFloorResult{Dir: cfg.Dir, Partitions: cfg.Partitions, Bytes: cfg.Bytes, Elapsed: elapsed, CPU: cpu1 - cpu0}, nil
}

// WriteFilesFloor prints a files floor result in the style of WriteFloor.
func WriteFilesFloor(w io.Writer, r FilesFloorResult) {
	n := time.Duration(r.Partitions)
	fmt.Fprintf(w, "partition files: %d directories with a file of %d B, made durable in %s in %.3fs (%s each), CPU %.3fs (%s each)\n",
		r.Partitions, r.Bytes, r.Dir, r.Elapsed.Seconds(), fmtDur(r.Elapsed/n), r.CPU.Seconds(), fmtDur(r.CPU/n))
}

// patterned returns n bytes of a fixed non-zero pattern, what the floors
// write.
func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}
