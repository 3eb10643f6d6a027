package bench

import (
	"os"

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
