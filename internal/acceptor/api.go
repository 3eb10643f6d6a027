package acceptor

// API CONTRACT (the acceptor implementer replaces the bodies and may move
// these declarations into other files; signatures are relied on by the
// broker and internal/groups, so change them only with care).

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice/internal/storage"
)

// FsyncPolicy says when appended bytes are made durable.
type FsyncPolicy int

const (
	// FsyncAlways: an acks=all append is fsynced before it is released
	// (group commit). The default.
	FsyncAlways FsyncPolicy = iota
	// FsyncInterval: appends are released once written; fsync every
	// FlushInterval. The high watermark follows writes.
	FsyncInterval
	// FsyncNever: never fsync (tests and benchmarks only: unsafe, a crash
	// loses acknowledged data). The high watermark follows writes.
	FsyncNever
)

// Config tunes an acceptor. Zero values take the defaults noted.
type Config struct {
	QueueSize      int           // bounded queue of appends; default 4096
	BufferSize     int           // coalescing buffer; default 1 MiB
	FlushInterval  time.Duration // fsync at least this often under sustained load; default 1 s
	Policy         FsyncPolicy   // default FsyncAlways
	NoCoalesce     bool          // one write per append (benchmark baseline)
	RetentionCheck time.Duration // how often retention runs; default 1 min
	Metrics        *Metrics      // nil: no metrics
}

// Metrics are the acceptor's Prometheus collectors, shared by every
// partition of a broker.
type Metrics struct{}

// NewMetrics creates the collectors and registers them with reg (if not nil).
func NewMetrics(reg prometheus.Registerer) *Metrics { panic("unimplemented") }

// Request is one append: one or more RecordBatches from one produce
// request for this partition.
type Request struct {
	// Batches holds whole RecordBatches, already validated. The acceptor
	// overwrites their base offsets in place; the caller must not touch
	// the slice until Append returns.
	Batches []byte
	// Records is the total number of offsets the batches take (sum of
	// lastOffsetDelta+1).
	Records int64
	// Durable: release when fsynced (acks=all). Otherwise release once
	// written (acks=1).
	Durable bool
	// Check, if set, runs on the acceptor goroutine just before offsets
	// are assigned, serialized with every other append to this partition.
	// base is the offset the append would get. It may reject the append
	// (err) or say it duplicates an earlier append (dup true, dupBase its
	// base offset), in which case nothing is written and Append returns
	// dupBase.
	Check func(base int64) (dupBase int64, dup bool, err error)
}

// Result is what Append reports.
type Result struct {
	BaseOffset int64 // offset of the first record
	Duplicate  bool  // Check reported a duplicate; nothing was written
}

// Acceptor owns one partition's writes: one goroutine drains its queue.
type Acceptor struct{}

// Start starts the acceptor goroutine for log. The acceptor does not own
// the log: after Close the caller closes the log.
func Start(log *storage.Log, cfg Config) *Acceptor { panic("unimplemented") }

// Append queues req and waits until it is written or durable as
// req.Durable asks. A full queue blocks until ctx is done. If ctx ends
// after the append was queued, Append returns ctx.Err() and the append
// may still be written.
func (a *Acceptor) Append(ctx context.Context, req *Request) (Result, error) { panic("unimplemented") }

// HighWatermark is the durable offset: readers never read at or past it.
func (a *Acceptor) HighWatermark() int64 { panic("unimplemented") }

// HWChanged returns a channel closed at the next high-watermark advance.
func (a *Acceptor) HWChanged() <-chan struct{} { panic("unimplemented") }

// Err is the error that stopped the partition, if any.
func (a *Acceptor) Err() error { panic("unimplemented") }

// Close stops the goroutine after writing and fsyncing everything queued.
// Idempotent.
func (a *Acceptor) Close() error { panic("unimplemented") }
