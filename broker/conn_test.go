package broker

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCloseInterruptsConnectionBetweenIdleAndRead covers Close arriving
// after a connection has marked itself idle but before its read has
// started: the interruption must stick, not be undone by the read
// setting its own idle deadline, or Close waits out the idle timeout (or
// its grace period) for a connection that is doing nothing.
func TestCloseInterruptsConnectionBetweenIdleAndRead(t *testing.T) {
	cfg := defaultCfg()
	cfg.idleTimeout = time.Hour
	b := &Broker{cfg: cfg}
	server, client := net.Pipe()
	defer client.Close()
	defer server.Close()
	c := newConn(b, server, &listener{Listener: Listener{Protocol: Plaintext}})

	if !c.setIdle(true) { // the read loop, about to read a request
		t.Fatal("setIdle(true) refused before Close")
	}
	b.closing.Store(true) // Close, in between
	c.interruptIfIdle()

	done := make(chan error, 1)
	go func() {
		_, err := c.readFrame()
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("readFrame returned a frame on a silent connection")
		}
	case <-time.After(10 * time.Second):
		server.Close() // let the goroutine finish
		<-done
		t.Fatal("readFrame ignored Close's interruption and waited for the idle timeout")
	}
}

// countingConn counts the Write calls that reach the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int32
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestWriterCoalescesReadyResponses: responses whose requests complete
// together (a group commit releasing several pipelined produces) leave in
// one write; a response still waiting is never held back behind one that
// is not ready.
func TestWriterCoalescesReadyResponses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ready      bool // the second and third replies report ready
		wantWrites int32
	}{
		{"ready together", true, 1},
		{"not ready", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cc, client := pipeConn(t)

			release := make(chan struct{})
			for i := int32(1); i <= 3; i++ {
				resp := kmsg.NewPtrProduceResponse()
				d := &deferredReply{Response: resp, finish: func() kmsg.Response { return resp }}
				if i == 1 {
					d.finish = func() kmsg.Response { <-release; return resp } // the group commit
					d.ready = func() bool { return false }
				} else {
					d.ready = func() bool { return tc.ready }
				}
				c.send(&pending{corr: i, key: kmsg.Produce.Int16(), version: 9, name: "Produce", start: time.Now(), resp: d})
			}
			close(c.out)
			go c.writeLoop(slog.New(slog.DiscardHandler))
			close(release)
			for i := int32(1); i <= 3; i++ {
				var hdr [8]byte
				if _, err := io.ReadFull(client, hdr[:]); err != nil {
					t.Fatal(err)
				}
				if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != i {
					t.Fatalf("response %d has correlation id %d", i, corr)
				}
				if _, err := io.CopyN(io.Discard, client, int64(binary.BigEndian.Uint32(hdr[:4]))-4); err != nil {
					t.Fatal(err)
				}
			}
			<-c.writerDone
			if got := cc.writes.Load(); got != tc.wantWrites {
				t.Fatalf("%d writes to the socket, want %d", got, tc.wantWrites)
			}
		})
	}
}

// TestInlineWriteKeepsOrder: the read loop writes a response itself only
// when writeLoop owes none; while a deferred reply is still waiting, a
// later response goes through writeLoop, behind it.
func TestInlineWriteKeepsOrder(t *testing.T) {
	c, cc, client := pipeConn(t)
	c.log = slog.New(slog.DiscardHandler)
	go c.writeLoop(c.log)

	plain := func(corr int32) *pending {
		return &pending{corr: corr, key: kmsg.ApiVersions.Int16(), name: "ApiVersions", start: time.Now(), resp: kmsg.NewPtrApiVersionsResponse()}
	}
	readCorr := func() int32 {
		t.Helper()
		var hdr [8]byte
		if _, err := io.ReadFull(client, hdr[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, client, int64(binary.BigEndian.Uint32(hdr[:4]))-4); err != nil {
			t.Fatal(err)
		}
		return int32(binary.BigEndian.Uint32(hdr[4:]))
	}

	// A produce whose appends are not yet durable, then a response that
	// needs no waiting: it must not overtake the produce's.
	release := make(chan struct{})
	resp := kmsg.NewPtrProduceResponse()
	d := &deferredReply{Response: resp, finish: func() kmsg.Response { <-release; return resp }, ready: func() bool { return false }}
	deferred := &pending{corr: 1, key: kmsg.Produce.Int16(), version: 9, name: "Produce", start: time.Now(), resp: d}
	if c.writeInline(deferred) {
		t.Fatal("a deferred reply was written inline")
	}
	c.send(deferred)
	second := plain(2)
	if c.writeInline(second) {
		t.Fatal("a response was written inline while writeLoop owed an earlier one")
	}
	c.send(second)
	close(release)
	for want := int32(1); want <= 2; want++ {
		if got := readCorr(); got != want {
			t.Fatalf("response %d has correlation id %d", want, got)
		}
	}

	// writeLoop has written both (it flushes after counting them off):
	// the next response is written by the caller, at once.
	writes := cc.writes.Load()
	inline := make(chan bool, 1)
	go func() { inline <- c.writeInline(plain(3)) }()
	if got := readCorr(); got != 3 {
		t.Fatalf("third response has correlation id %d", got)
	}
	if !<-inline {
		t.Fatal("a ready response was not written inline with nothing owed")
	}
	if got := cc.writes.Load() - writes; got != 1 {
		t.Fatalf("the inline response took %d writes, want 1", got)
	}
	close(c.out)
	<-c.writerDone
}

// pipeConn returns a plaintext connection of a bare broker (an hour's
// idle timeout) over an in-memory pipe, the pipe's counted server end
// and its client end, closed when the test ends.
func pipeConn(t *testing.T) (*conn, *countingConn, net.Conn) {
	t.Helper()
	cfg := defaultCfg()
	cfg.idleTimeout = time.Hour
	b := &Broker{cfg: cfg, metrics: newMetrics(nil)}
	server, client := net.Pipe()
	t.Cleanup(func() { client.Close() })
	cc := &countingConn{Conn: server}
	return newConn(b, cc, &listener{Listener: Listener{Protocol: Plaintext}}), cc, client
}
