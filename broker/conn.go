package broker

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/auth"
	"github.com/sluicedb/sluice/internal/storage"
)

// conn is one client connection.
//
// Goroutines: serve (the read loop, owned by the Broker and counted in
// Broker.wg) reads and decodes requests in order and serves each one;
// writeLoop (owned by serve, which starts it and waits for it) writes the
// responses in request order. Requests are served on the read loop. A
// Produce there only validates its batches and queues every partition's
// append in its acceptor; its response is a deferredReply that
// writeLoop finishes by waiting for the appends, then writes. So the
// read loop reads the next request at once, a pipelining producer's next
// request joins the same group commit while its batches keep their order
// per partition, and an acknowledgement takes two goroutine hand-offs
// (read loop to acceptor, acceptor to writer). A response that needs no
// waiting (anything but a deferred reply or a Fetch's) is written by the
// read loop itself when writeLoop owes none (owed is zero): no hand-off to
// writeLoop, which stays parked. So is a Produce's, when the client is not
// pipelining (soloProduce) and its one acks=all append was written and
// fsynced on the read loop itself (partition.Append.SyncInline): a lone
// synchronous producer's request then wakes no other goroutine. At most
// maxInFlight responses are pending at once. The
// connection stops when the client closes it, sends something that
// cannot be answered, stays idle past the idle timeout, or the broker
// closes (which interrupts it only while it waits for a new request);
// serve then lets writeLoop answer every request already read.
type conn struct {
	b  *Broker
	nc net.Conn
	// rw reads and writes the connection's bytes: for TCP the socket
	// through raw system calls (newSockIO), for TLS the TLS connection
	// over them. nc stays the connection itself, for deadlines, Close
	// and fetch's sendfile.
	rw   io.ReadWriter
	host string
	log  *slog.Logger // the connection's logger, set by serve before it starts writeLoop
	// r is used only by the read loop (serve); nil until the
	// connection's first byte arrives (readFrame), so that a connection
	// that never speaks holds no read buffer.
	r *bufio.Reader

	// wmu guards w and the socket's writes: writeLoop holds it while it
	// writes a response or flushes, and the read loop while it writes a
	// response inline (writeInline). Never held while waiting for a
	// deferred reply.
	wmu     sync.Mutex
	w       *bufio.Writer // nil until the first response (writeResponse)
	writeDL time.Time     // the write deadline armed by armWrite
	wbuf    []byte        // scratch for encoding one response (writeResponse)

	out        chan *pending // requests in order, to writeLoop
	owed       atomic.Int32  // responses sent on out that writeLoop has not yet written (or dropped)
	writerDone chan struct{} // closed when writeLoop returns
	failed     atomic.Bool   // a write failed (or writeLoop met a request that cannot be answered) and nc is closed

	// mutedUntil: the read loop reads nothing from the socket before
	// this (a quota throttle, quotas.go). Read loop only.
	mutedUntil time.Time

	mu     sync.Mutex // guards idle and readDL
	idle   bool       // waiting for the first byte of a new request
	readDL time.Time  // the read deadline armed by setIdle (zero: none, or Close moved it)

	// Security state, used only by the read loop (serve and the
	// handlers it runs; requests copy the principal).
	lis       *listener
	principal string       // who the connection acts as (see security.go)
	internal  bool         // from InternalConn: ACLs do not apply
	authed    bool         // SASL listener: the SASL exchange succeeded
	sasl      auth.Session // the SASL exchange after SaslHandshake
	// tokenAuthed: the SASL login used a delegation token (set with
	// authed, before any request that reads it is read).
	tokenAuthed bool
	saslRaw     bool // SaslHandshake v0: the next frames are bare SASL tokens
	// The client's software name and version from ApiVersions v3+
	// (read loop only; client telemetry matches on them).
	softwareName, softwareVersion string
	// frameKept: dispatch handed the frame to a pending reply, which
	// returns its bytes to Broker.reqBytes (read loop only).
	frameKept bool
	// quiet counts the Produce requests in a row that found nothing else
	// of the connection in flight (soloProduce; read loop only).
	quiet int
	tls   bool // nc is a TLS connection (set by newConn)
}

// sockConn is a connection whose reads and writes go through rw (the
// socket's raw calls, newSockIO), under crypto/tls.
type sockConn struct {
	net.Conn
	rw io.ReadWriter
}

func (s sockConn) Read(p []byte) (int, error)  { return s.rw.Read(p) }
func (s sockConn) Write(p []byte) (int, error) { return s.rw.Write(p) }

// maxInFlight bounds the requests read but not yet answered on one
// connection (Kafka clients send at most 5 produce requests in flight).
const maxInFlight = 8

// pending is a served request whose response writeLoop writes (after
// finishing it, for a deferredReply).
type pending struct {
	corr    int32
	key     int16 // API key (-1: not decoded)
	version int16
	name    string
	start   time.Time
	resp    kmsg.Response   // nil: no response (acks=0)
	err     error           // close the connection instead of answering
	frame   []byte          // a Produce's request frame, reused once the reply is finished (putFrame)
	shared  *storage.Shared // the hold on frame its appends were given (nil: none), released instead of putFrame
	req     request         // the request as its handler sees it (one allocation with the pending)
}

// releaseFrame gives back a finished Produce's frame: its queued bytes,
// and the frame itself for reuse, once no new partition keeps its bytes
// in memory (storage.Shared), at once when none does.
func (c *conn) releaseFrame(p *pending) {
	if p.frame == nil {
		return
	}
	c.b.reqBytes.release(int64(len(p.frame)))
	if p.shared != nil {
		p.shared.Release() // putFrame, after the last log keeping its bytes let go
	} else {
		putFrame(p.frame) // every append returned: nothing uses its bytes
	}
	p.frame, p.shared = nil, nil
}

// deferredReply is a response that writeLoop finishes before writing it:
// finish waits for what the request queued (a Produce's appends) and
// returns the response, or nil for none (acks=0).
type deferredReply struct {
	kmsg.Response // the response being filled in (for its key and version)
	finish        func() kmsg.Response
	// ready, if set, reports (without waiting) whether finish would
	// return at once; writeLoop then keeps the responses before it
	// buffered, to write them together.
	ready func() bool
}

func newConn(b *Broker, nc net.Conn, l *listener) *conn {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		host = nc.RemoteAddr().String()
	}
	rw := newSockIO(nc)
	if l.tlsc != nil {
		// Record bytes then go through crypto/tls: sendfile does not
		// apply (storage.Slice.WriteTo copies through a buffer).
		nc = tls.Server(sockConn{Conn: nc, rw: rw}, l.tlsc)
		rw = nc
	}
	_, isTLS := nc.(*tls.Conn)
	return &conn{
		b: b, nc: nc, rw: rw, host: host, tls: isTLS,
		out: make(chan *pending, maxInFlight), writerDone: make(chan struct{}),
		idle:      true, // no request has started
		lis:       l,
		principal: auth.Anonymous,
	}
}

// handshake runs the TLS handshake of a TLS listener's connection and
// takes the principal from a verified client certificate. It is bounded
// by the idle timeout and interrupted by Close like an idle read.
func (c *conn) handshake() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	c.armWrite()
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.principal = certPrincipal(tc.ConnectionState())
	return nil
}

// interruptIfIdle ends the read of a connection waiting for a request.
// Called by Broker.Close after it set Broker.closing.
func (c *conn) interruptIfIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle {
		c.nc.SetReadDeadline(time.Now())
		c.readDL = time.Time{}
	}
}

// deadlineSlack is how far past the idle timeout a deadline is armed, so
// that it need not be moved at every request: setIdle and armWrite move
// it only once less than the idle timeout is left. A connection idle (or
// a write stalled) for the idle timeout is closed within another eighth
// of it.
func deadlineSlack(idle time.Duration) time.Duration { return idle / 8 }

// armWrite makes sure the socket's write deadline is at least the idle
// timeout away. c.wmu must be held (or, in handshake, no response can be
// written yet).
func (c *conn) armWrite() {
	now := time.Now()
	if idle := c.b.cfg.idleTimeout; c.writeDL.Before(now.Add(idle)) {
		c.writeDL = now.Add(idle + deadlineSlack(idle))
		c.nc.SetWriteDeadline(c.writeDL)
	}
}

// setIdle marks the connection idle or busy. Becoming idle makes sure the
// read deadline is at least the idle timeout away (moving it only when
// less is left: see deadlineSlack), under mu, so that an interruptIfIdle
// from a concurrent Close either sees the connection busy (and this call
// then sees closing) or overrides the deadline after it was armed; it
// fails once the broker is closing.
func (c *conn) setIdle(idle bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = idle
	if idle {
		now := time.Now()
		if t := c.b.cfg.idleTimeout; c.readDL.Before(now.Add(t)) {
			c.readDL = now.Add(t + deadlineSlack(t))
			c.nc.SetReadDeadline(c.readDL)
		}
	}
	return !(idle && c.b.closing.Load())
}

func (c *conn) serve() {
	defer c.b.wg.Done()
	// The connection slot is released before the socket is closed, so a
	// client that sees the close can connect again at once, even at
	// MaxConnections.
	defer c.nc.Close()
	defer c.b.dropConn(c)
	log := c.b.componentLogger("conn").With("remote", c.nc.RemoteAddr().String())
	c.log = log
	go c.writeLoop(log)
	defer func() {
		close(c.out)
		<-c.writerDone
	}()
	if !c.setIdle(true) {
		return
	}
	if err := c.handshake(); err != nil {
		switch {
		case c.b.closing.Load():
		case errors.Is(err, io.EOF):
			// Closed before a ClientHello: a TCP health probe or a
			// client's reachability check, not a failed login.
			log.Debug("connection closed before the TLS handshake")
		default:
			c.b.metrics.authFailures.Inc()
			log.Info("closing connection", "err", err)
		}
		return
	}
	for {
		if !c.waitMuted() || !c.setIdle(true) {
			return
		}
		frame, err := c.readFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !c.b.closing.Load() && !c.failed.Load() {
				log.Debug("client disconnected", "err", err)
			}
			return
		}
		err = c.dispatch(frame)
		if !c.frameKept {
			c.b.reqBytes.release(int64(len(frame))) // decoded and served: the handler holds none of its bytes
		}
		c.frameKept = false
		if err != nil {
			switch {
			case errors.Is(err, errAuthFailed):
				c.b.metrics.authFailures.Inc()
			case errors.Is(err, errDropped): // an Interceptor's Drop (intercept.go)
			default:
				c.b.metrics.badRequests.Inc()
			}
			log.Info("closing connection", "err", err)
			return
		}
		if c.failed.Load() {
			return
		}
	}
}

// writeLoop writes responses in request order until serve closes out,
// waiting for each request to finish. After an error it closes the
// connection and only drains.
//
// Responses go into the buffered writer and are flushed to the socket
// only when no further response is ready: when out is empty, or before
// waiting for a deferred reply whose appends are not yet released. The
// produce requests a pipelining client has in flight usually complete in
// one group commit, and their responses then leave in one write (one
// system call, one wake-up of the client) instead of one each.
func (c *conn) writeLoop(log *slog.Logger) {
	defer close(c.writerDone)
	for {
		var p *pending
		var ok bool
		select {
		case p, ok = <-c.out:
		default:
			c.lockedFlush(log)
			p, ok = <-c.out
		}
		if !ok {
			c.lockedFlush(log)
			return
		}
		if d, ok := p.resp.(*deferredReply); ok {
			if d.ready == nil || !d.ready() {
				c.lockedFlush(log)
			}
			p.resp = d.finish() // waits even after a failure: the appends use the request's bytes
			c.releaseFrame(p)
		}
		c.wmu.Lock()
		c.emit(p, log)
		c.owed.Add(-1) // after the write: a response written inline goes after it
		c.wmu.Unlock()
	}
}

// emit writes p's response into the buffered writer (or, for a request
// that cannot be answered, flushes the responses before it and closes the
// connection) and records the request's metrics. c.wmu must be held.
func (c *conn) emit(p *pending, log *slog.Logger) {
	if c.failed.Load() {
		return
	}
	err := p.err
	if err == nil && p.resp != nil {
		p.resp.SetVersion(p.version)
		err = c.writeResponse(p.corr, p.resp)
	}
	if err != nil {
		if p.err != nil {
			c.b.metrics.badRequests.Inc()
			c.flush(log) // the responses before the request that cannot be answered
		}
		switch {
		case c.b.closing.Load():
		case p.err != nil:
			log.Info("closing connection", "err", err)
		default: // the client went away before its response
			log.Debug("client disconnected", "err", err)
		}
		c.fail()
		return
	}
	took := time.Since(p.start)
	c.b.metrics.observe(p.key, p.name, took)
	if c.b.cfg.logRequests {
		log.Debug("request", "api", p.name, "version", p.version, "correlation", p.corr, "took", took)
	}
}

// writeInline writes p's response on the read loop and flushes it, when
// writeLoop owes no response (every earlier one is written or buffered,
// so the order holds) and the response needs no waiting: it then reaches
// the client without waking writeLoop. It reports whether it did.
func (c *conn) writeInline(p *pending) bool {
	if p.err != nil || c.owed.Load() != 0 {
		return false
	}
	switch r := p.resp.(type) {
	case nil, *fetchReply, *rawReply:
		return false
	case *deferredReply:
		// A Produce whose appends are all durable already (written and
		// fsynced on this goroutine: soloProduce) is answered here too,
		// without waking writeLoop.
		if r.ready == nil || !r.ready() {
			return false
		}
		p.resp = r.finish() // returns at once: ready
		c.releaseFrame(p)
	}
	c.wmu.Lock()
	c.emit(p, c.log)
	c.flush(c.log)
	c.wmu.Unlock()
	return true
}

// quietProduces is how many Produce requests in a row must find nothing
// else of their connection in flight before the next one may be
// written and fsynced on the read loop (soloProduce).
const quietProduces = 4

// soloProduce is asked by every Produce request, on the read loop,
// before it queues its appends: it reports whether the client is not
// pipelining, so that the request's appends may be written, fsynced and
// answered on this goroutine (partition.Append.SyncInline) instead of
// being handed to the partition's goroutine and the reply to writeLoop.
// While the read loop fsyncs it reads nothing, so a client with other
// requests in flight would have each of them wait for an fsync of its
// own instead of sharing one group commit. So the answer is yes only if
// writeLoop owes no response (every earlier request is answered) and
// nothing of a next request is buffered unread, and only after
// quietProduces Produce requests in a row found the same. A request
// found behind another turns the path off until the connection is quiet
// again; so do requests that came in during an inline fsync, two or
// more of them: the first is read with the next one's bytes buffered
// behind it. A single one is served inline in turn, as it would have
// waited for that fsync anyway.
//
// Over TLS, crypto/tls keeps records it read ahead in buffers of its
// own, where a pipelined request would go unseen by c.r.Buffered: the
// connection also asks crypto/tls for what it holds (tlsBuffered).
func (c *conn) soloProduce() bool {
	if c.owed.Load() != 0 || c.r == nil || c.r.Buffered() != 0 || c.tls && c.tlsBuffered() {
		c.quiet = 0
		return false
	}
	if c.quiet < quietProduces {
		c.quiet++
		return false
	}
	return true
}

// tlsBuffered reports whether crypto/tls holds bytes of a next request
// already read from the socket: a read with a deadline already past
// returns what it holds (decrypted into c.r, where the next read finds
// it) without waiting for the socket, and a deadline's timeout leaves a
// crypto/tls connection usable (it keeps a partial record for the next
// read). The read deadline the connection had is put back. Only while
// the connection is busy (reading or handling a request), when
// interruptIfIdle does not move the deadline.
func (c *conn) tlsBuffered() bool {
	c.nc.SetReadDeadline(longAgo)
	_, err := c.r.Peek(1)
	c.mu.Lock()
	c.nc.SetReadDeadline(c.readDL)
	c.mu.Unlock()
	return err == nil
}

// longAgo is a read deadline already past.
var longAgo = time.Unix(1, 0)

// send hands p to writeLoop; it blocks while maxInFlight responses are
// pending.
func (c *conn) send(p *pending) {
	c.owed.Add(1)
	c.out <- p
}

// lockedFlush is flush under c.wmu.
func (c *conn) lockedFlush(log *slog.Logger) {
	c.wmu.Lock()
	c.flush(log)
	c.wmu.Unlock()
}

// flush writes the buffered responses to the socket; a failure closes
// the connection. c.wmu must be held.
func (c *conn) flush(log *slog.Logger) {
	if c.failed.Load() || c.w == nil || c.w.Buffered() == 0 {
		return
	}
	c.armWrite()
	if err := c.w.Flush(); err != nil {
		if !c.b.closing.Load() {
			log.Debug("client disconnected", "err", err)
		}
		c.fail()
	}
}

// fail marks the connection failed and closes it, which ends serve's
// read; writeLoop then only drains.
func (c *conn) fail() {
	c.failed.Store(true)
	c.nc.Close()
}

// connBufSize is the size of a connection's read and write buffers.
const connBufSize = 64 << 10

// readFrame reads one size-prefixed request. The first byte is awaited
// until the read deadline that setIdle(true) armed (the idle timeout).
// The connection's first byte is read straight from the socket, and its
// read buffer made only then.
func (c *conn) readFrame() ([]byte, error) {
	var size [4]byte
	src := io.Reader(c.r)
	if c.r == nil {
		src = c.rw
	}
	if _, err := io.ReadFull(src, size[:1]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !c.b.closing.Load() {
			return nil, fmt.Errorf("idle for %v", c.b.cfg.idleTimeout)
		}
		return nil, err
	}
	c.setBusy()
	if c.r == nil {
		c.r = bufio.NewReaderSize(c.rw, connBufSize)
	}
	if _, err := io.ReadFull(c.r, size[1:]); err != nil {
		return nil, fmt.Errorf("read request size: %w", err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 && !(c.saslRaw && n >= 0) {
		return nil, fmt.Errorf("request size %d is too small for a request header", n)
	}
	if n > c.b.cfg.maxRequestBytes {
		c.b.metrics.oversized.Inc()
		return nil, fmt.Errorf("request of %d bytes exceeds the maximum of %d", n, c.b.cfg.maxRequestBytes)
	}
	if err := c.acquireBytes(int64(n)); err != nil {
		return nil, err
	}
	frame, err := c.readBody(n)
	if err != nil {
		c.b.reqBytes.release(int64(n))
	}
	return frame, err
}

// readBody reads a request's n bytes after its size.
func (c *conn) readBody(n int32) ([]byte, error) {
	if frame := getFrame(int(n)); frame != nil {
		if _, err := io.ReadFull(c.r, frame); err != nil {
			return nil, fmt.Errorf("read request body (%d bytes): %w", n, err)
		}
		return frame, nil
	}
	if n <= 1<<20 {
		frame := newFrame(int(n))
		if _, err := io.ReadFull(c.r, frame); err != nil {
			return nil, fmt.Errorf("read request body (%d bytes): %w", n, err)
		}
		return frame, nil
	}
	// Past 1 MiB the frame is made only once the first MiB has arrived,
	// so that a size field alone cannot make the broker allocate
	// MaxRequestBytes (the queued-bytes budget, taken before, bounds the
	// rest); then in one allocation that putFrame can pool, rather than
	// by doubling a buffer as bytes arrive.
	head := getFrame(1 << 20)
	if head == nil {
		head = newFrame(1 << 20)
	}
	if _, err := io.ReadFull(c.r, head); err != nil {
		putFrame(head)
		return nil, fmt.Errorf("read request body (%d bytes): %w", n, err)
	}
	frame := newFrame(int(n))
	copy(frame, head)
	putFrame(head)
	if _, err := io.ReadFull(c.r, frame[1<<20:]); err != nil {
		return nil, fmt.Errorf("read request body (%d bytes): %w", n, err)
	}
	return frame, nil
}

// reqHeader is the request header (v1 or v2).
type reqHeader struct {
	key, version int16
	corr         int32
	clientID     string
}

// parseHeader decodes the fixed part of a request header; rest starts at
// the tagged fields (flexible versions) or the body.
func parseHeader(frame []byte) (h reqHeader, rest []byte, err error) {
	if len(frame) < 10 {
		return h, nil, fmt.Errorf("request header truncated (%d bytes)", len(frame))
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.corr = int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int16(binary.BigEndian.Uint16(frame[8:]))
	rest = frame[10:]
	if idLen >= 0 {
		if int(idLen) > len(rest) {
			return h, nil, fmt.Errorf("client id of %d bytes runs past the request", idLen)
		}
		h.clientID, rest = string(rest[:idLen]), rest[idLen:]
	} else if idLen != -1 {
		return h, nil, fmt.Errorf("client id length %d is invalid", idLen)
	}
	return h, rest, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("bad tagged-field count in request header")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag in request header")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, errors.New("bad tag size in request header")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// decodeRequest turns a frame into its header and kmsg request. An error
// means the connection must be closed (Kafka's answer to a request it
// cannot parse), except for errTooNewApiVersions.
func decodeRequest(frame []byte) (reqHeader, kmsg.Request, error) {
	h, rest, err := parseHeader(frame)
	if err != nil {
		return h, nil, err
	}
	e, ok := apis[h.key]
	if !ok {
		return h, nil, fmt.Errorf("unsupported API key %d (%s)", h.key, kmsg.NameForKey(h.key))
	}
	if h.version < e.min || h.version > e.max {
		if h.key == kmsg.ApiVersions.Int16() && h.version > e.max {
			return h, nil, errTooNewApiVersions
		}
		return h, nil, fmt.Errorf("%s v%d is outside the supported range v%d-v%d", kmsg.NameForKey(h.key), h.version, e.min, e.max)
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			return h, nil, err
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return h, nil, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return h, req, nil
}

var errTooNewApiVersions = errors.New("ApiVersions version too new")

// dispatch decodes a request and serves it, queueing its response for
// writeLoop. An error means the request cannot be answered: the
// connection is closed once the responses before it are written.
func (c *conn) dispatch(frame []byte) error {
	p := &pending{key: -1, start: time.Now()}
	if c.saslRaw {
		return c.rawSASL(p, frame)
	}
	h, req, err := decodeRequest(frame)
	if errors.Is(err, errTooNewApiVersions) {
		// Answer in v0 so that any client can read the supported range
		// and downgrade.
		p.corr, p.key, p.name = h.corr, h.key, "ApiVersions"
		p.resp = &kmsg.ApiVersionsResponse{Version: 0, ErrorCode: kerr.UnsupportedVersion.Code, ApiKeys: apiKeys()}
		c.softwareFrom(frame)
		c.send(p)
		return nil
	}
	if err != nil {
		return err
	}
	p.corr, p.key, p.version, p.name = h.corr, h.key, h.version, kmsg.NameForKey(h.key)
	if err := c.admit(h.key); err != nil {
		return err
	}
	p.req = request{ctx: c.b.stopCtx, b: c.b, c: c, clientID: h.clientID, host: c.host, principal: c.principal, internal: c.internal, kreq: req}
	r := &p.req
	if h.key == kmsg.Produce.Int16() {
		r.frame = frame
	}
	if resp, err := c.intercept(h, req); err != nil { // fault injection (intercept.go)
		return err
	} else if resp != nil {
		p.resp = resp
		if !c.writeInline(p) {
			c.send(p)
		}
		return nil
	}
	p.resp, p.err = apis[h.key].h(r)
	if _, ok := p.resp.(*deferredReply); ok && h.key == kmsg.Produce.Int16() {
		p.frame, p.shared = frame, r.shared
		c.frameKept = true
	}
	if p.err == nil {
		if d := c.throttleRequest(r, h.key, len(frame), p.resp, time.Since(p.start)); d > 0 {
			c.muteFor(d)
		}
	}
	if p.err != nil {
		p.err = fmt.Errorf("%s: %w", p.name, p.err)
	}
	if !c.writeInline(p) {
		c.send(p)
	}
	return r.closeAfter
}

// writeResponse writes one response frame into the buffered writer
// (writeLoop flushes it). c.wmu must be held. Fetch responses stream their record bytes from
// the segment files (see fetchReply) and flush as they go.
func (c *conn) writeResponse(corr int32, resp kmsg.Response) error {
	c.armWrite() // a full buffer writes to the socket
	if c.w == nil {
		c.w = bufio.NewWriterSize(c.rw, connBufSize) // the first response
	}
	if fr, ok := resp.(*fetchReply); ok {
		return fr.write(c, corr)
	}
	if rr, ok := resp.(*rawReply); ok {
		return rr.write(c)
	}
	buf := append(c.wbuf[:0], 0, 0, 0, 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(buf[4:], uint32(corr))
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		buf = append(buf, 0) // response header v1: no tagged fields
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if cap(buf) <= connBufSize {
		c.wbuf = buf // kept for the next response; a large one is let go
	}
	// Buffered: writeLoop flushes once no further response is ready.
	if _, err := c.w.Write(buf); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}
