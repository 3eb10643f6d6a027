//go:build !linux

package bench

import (
	"os"
	"time"
)

// fdatasync is fsync where fdatasync is not available.
func fdatasync(f *os.File) error { return f.Sync() }

// processCPU is not measured here: it reports 0.
func processCPU() (time.Duration, error) { return 0, nil }

// threadCPU is not measured here: it reports 0.
func threadCPU() time.Duration { return 0 }
