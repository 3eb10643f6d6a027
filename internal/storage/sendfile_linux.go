package storage

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// sendfileBytes counts bytes sent with sendfile, so tests can tell that
// the zero-copy path ran.
var sendfileBytes atomic.Int64

// sendfile sends n bytes of src at pos to dst with sendfile(2), passing
// an explicit offset so src's file position is untouched. handled is
// false when the kernel refuses the pair (the caller then copies).
func sendfile(dst *net.TCPConn, src *os.File, pos, n int64) (written int64, handled bool, err error) {
	srcRC, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	dstRC, err := dst.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var serr error
	cerr := srcRC.Control(func(sfd uintptr) {
		werr := dstRC.Write(func(dfd uintptr) bool {
			for written < n {
				off := pos + written
				k, err := unix.Sendfile(int(dfd), int(sfd), &off, int(min(n-written, 1<<30)))
				if k > 0 {
					written += int64(k)
				}
				switch {
				case errors.Is(err, unix.EAGAIN):
					return false // wait until the socket is writable
				case errors.Is(err, unix.EINTR):
					continue
				case err != nil:
					serr = os.NewSyscallError("sendfile", err)
					return true
				case k == 0:
					serr = io.ErrUnexpectedEOF // the file is shorter than the slice
					return true
				}
			}
			return true
		})
		if werr != nil && serr == nil {
			serr = werr
		}
	})
	if cerr != nil && serr == nil {
		serr = cerr
	}
	sendfileBytes.Add(written)
	if written == 0 && (errors.Is(serr, unix.EINVAL) || errors.Is(serr, unix.ENOSYS)) {
		return 0, false, nil
	}
	return written, true, serr
}
