package broker

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn speaks the Kafka protocol over a plain TCP connection, so tests
// control every byte.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	corr int32
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// frame encodes req with a request header (v1, or v2 for flexible
// versions) and a size prefix.
func frame(req kmsg.Request, corr int32, clientID string) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func (c *rawConn) send(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame, returning its correlation id and
// the bytes after it.
func (c *rawConn) readFrame() (int32, []byte, error) {
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return 0, nil, fmt.Errorf("response size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.nc, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// roundTrip sends req and decodes its response.
func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.corr++
	c.send(frame(req, c.corr, "raw-test"))
	corr, body, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("%s: read response: %v", kmsg.NameForKey(req.Key()), err)
	}
	if corr != c.corr {
		c.t.Fatalf("correlation id %d, want %d", corr, c.corr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // response header tags (none)
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("%s: decode response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// expectClosed checks that the broker closes the connection (EOF or
// reset) rather than answering.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	n, err := c.nc.Read(b[:])
	if err == nil {
		c.t.Fatalf("connection still open: read %d bytes", n)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Fatalf("connection still open after 10 s")
	}
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
