package broker

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sockIO reads and writes a TCP connection's socket with raw system
// calls, through the connection's poller (syscall.RawConn): a call that
// would block returns EAGAIN, and the goroutine parks on the poller as
// net.Conn's Read and Write park, deadlines included. Go's own Read and
// Write enter the runtime's blocking-call path even though a socket
// never blocks; on a broker that idles between requests, the first such
// call after each idle spell wakes the runtime's monitor thread, which
// then polls every 20 µs, a context switch each time, while the request
// is served. With the socket calls raw and the lone producer's write and
// fsync held (vfs.SyncHeld), its request wakes no thread but its own.
//
// One goroutine reads (the read loop) and one at a time writes (under
// conn.wmu), so the read and the write state are separate fields, and
// the callbacks are method values made once.
type sockIO struct {
	rc syscall.RawConn

	rp    []byte // the read's buffer
	rn    int
	rerr  error
	readf func(fd uintptr) bool

	wp     []byte // what is left to write
	wn     int
	werr   error
	writef func(fd uintptr) bool

	local, remote net.Addr // for errors, as net.Conn reports them
}

// newSockIO returns nc's reader and writer: a sockIO for a TCP
// connection, nc itself otherwise.
func newSockIO(nc net.Conn) io.ReadWriter {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	s := &sockIO{rc: rc, local: tc.LocalAddr(), remote: tc.RemoteAddr()}
	s.readf, s.writef = s.read, s.write
	return s
}

func (s *sockIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rp, s.rn, s.rerr = p, 0, nil
	err := s.rc.Read(s.readf)
	n, rerr := s.rn, s.rerr
	s.rp = nil
	switch {
	case err != nil:
		return n, s.opError("read", err)
	case rerr != nil:
		return n, s.opError("read", os.NewSyscallError("read", rerr))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read is the poller's callback for Read: false asks it to wait until
// the socket is readable and call again.
func (s *sockIO) read(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&s.rp[0])), uintptr(len(s.rp)))
		switch e {
		case 0:
			s.rn = int(n)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		s.rerr = e
		return true
	}
}

func (s *sockIO) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.wp, s.wn, s.werr = p, 0, nil
	err := s.rc.Write(s.writef)
	n, werr := s.wn, s.werr
	s.wp = nil
	switch {
	case err != nil:
		return n, s.opError("write", err)
	case werr != nil:
		return n, s.opError("write", os.NewSyscallError("write", werr))
	}
	return n, nil
}

// write is the poller's callback for Write: it writes until all of wp
// is written, and returns false to wait for room in the socket's buffer.
func (s *sockIO) write(fd uintptr) bool {
	for s.wn < len(s.wp) {
		rest := s.wp[s.wn:]
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch e {
		case 0:
			s.wn += int(n)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			s.werr = e
			return true
		}
	}
	return true
}

// opError wraps err as net.Conn's methods do. The poller's own errors
// (a deadline, a closed connection) come wrapped already.
func (s *sockIO) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op // "raw-read" from the poller: the call is a read to the caller
		return oe
	}
	return &net.OpError{Op: op, Net: "tcp", Source: s.local, Addr: s.remote, Err: err}
}
