package broker

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// TestSockIO: the raw socket reader and writer move bytes both ways
// (a write larger than the socket's buffers waits for room), keep the
// read deadline's timeout a net.Error Timeout, return io.EOF when the
// peer closes, and fail once the connection itself is closed.
func TestSockIO(t *testing.T) {
	srv, cli := tcpPair(t)
	rw := newSockIO(srv)
	if _, ok := rw.(*sockIO); !ok {
		t.Fatalf("newSockIO of a TCP connection: %T", rw)
	}

	// A write far larger than the socket buffers: it completes as the
	// peer reads.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(big))
		io.ReadFull(cli, b)
		got <- b
	}()
	if n, err := rw.Write(big); n != len(big) || err != nil {
		t.Fatalf("write: %d of %d, %v", n, len(big), err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatal("the peer read other bytes than were written")
	}

	if _, err := cli.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(rw, buf, len("request"))
	if err != nil || string(buf[:n]) != "request" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}

	srv.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = rw.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	srv.SetReadDeadline(time.Time{})

	cli.Close()
	if _, err := rw.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
	srv.Close()
	if _, err := rw.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write on a closed connection: %v, want net.ErrClosed", err)
	}
	if _, err := rw.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed connection: %v, want net.ErrClosed", err)
	}
}

// TestSockIOPeerReset: writing to a connection the peer reset fails with
// the system's error, as net.Conn's Write does, instead of hanging.
func TestSockIOPeerReset(t *testing.T) {
	srv, cli := tcpPair(t)
	rw := newSockIO(srv)
	cli.SetLinger(0) // close sends a reset
	cli.Close()
	var err error
	for range 100 { // the reset arrives after the close returns
		if _, err = rw.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("writes to a reset connection: %v, want a write OpError", err)
	}
}
