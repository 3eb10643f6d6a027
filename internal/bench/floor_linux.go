package bench

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data and the metadata needed to read it back,
// retrying on EINTR.
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// processCPU is the user and system time this process has used.
func processCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// threadCPU is the user and system time of the calling thread (0 if it
// cannot be read): the caller must be locked to its thread.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
