package broker

import (
	"fmt"
	"time"
)

// Bounds on what a connection may hold while it reads a request: the
// request-read timeout (a client sending one byte at a time, or a
// header and then nothing) and the broker-wide request-byte budget.

// setBusy marks the connection busy on a request's first byte and arms
// the request-read timeout: the request must be read by then (or by the
// idle deadline, if sooner). A deadline Close moved (readDL zero) is left.
func (c *conn) setBusy() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = false
	if c.readDL.IsZero() {
		return
	}
	if dl := time.Now().Add(c.b.cfg.requestReadTimeout); dl.Before(c.readDL) {
		c.readDL = dl
		c.nc.SetReadDeadline(dl)
	}
}

// acquireBytes takes n bytes of the broker's request-byte budget before
// a request's body is read, waiting (reading nothing from the socket)
// while it is spent. A wait restarts the request-read timeout: the time
// was the broker's, not the client's.
func (c *conn) acquireBytes(n int64) error {
	waited, err := c.b.reqBytes.acquire(c.b.stopCtx, n)
	if err != nil {
		return fmt.Errorf("broker closing while %d request bytes waited for memory: %w", n, err)
	}
	if waited {
		c.mu.Lock()
		if !c.readDL.IsZero() {
			c.readDL = time.Now().Add(c.b.cfg.requestReadTimeout)
			c.nc.SetReadDeadline(c.readDL)
		}
		c.mu.Unlock()
	}
	return nil
}
