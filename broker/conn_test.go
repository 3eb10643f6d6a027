package broker

import (
	"net"
	"testing"
	"time"
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
