package acceptor

import (
	"log/slog"

	"github.com/sluicedb/sluice/internal/wal"
	"strconv"
	"time"
)

// FsyncPolicy says when appended bytes are made durable.
type FsyncPolicy int

const (
	// FsyncAlways: an acks=all append is fsynced before it is released
	// (group commit), and the high watermark advances only after fsync.
	// The default.
	FsyncAlways FsyncPolicy = iota
	// FsyncInterval: every append is released once written and the high
	// watermark follows writes; fsync runs every FlushInterval. It trades
	// durability for latency: a machine crash loses up to FlushInterval of
	// acknowledged appends (a process crash loses nothing the OS holds).
	FsyncInterval
	// FsyncNever: never fsync while running (only Close syncs). Tests and
	// benchmarks only: unsafe, a machine crash loses acknowledged data.
	// The high watermark follows writes.
	FsyncNever
)

func (p FsyncPolicy) String() string {
	switch p {
	case FsyncAlways:
		return "always"
	case FsyncInterval:
		return "interval"
	case FsyncNever:
		return "never"
	}
	return "FsyncPolicy(" + strconv.Itoa(int(p)) + ")"
}

// Config tunes an acceptor. Zero values take the defaults noted.
type Config struct {
	QueueSize      int           // most appends queued (the queue starts at 16 slots and grows when full); default 4096
	BufferSize     int           // coalescing buffer; default 1 MiB
	FlushInterval  time.Duration // fsync at least this often under sustained load; default 1 s
	Fsync          FsyncPolicy   // default FsyncAlways
	NoCoalesce     bool          // one write per append (benchmark baseline)
	RetentionCheck time.Duration // how often retention runs; default 1 min; <0 never
	Metrics        *Metrics      // nil: no metrics
	// Syncs, when set, is a semaphore shared by many acceptors: at most
	// cap(Syncs) of their fsyncs run at once (each holds a slot while it
	// syncs). Many partitions syncing at the same moment then wait as
	// goroutines instead of each blocking an OS thread in fdatasync; the
	// disk completes as many flushes with a few dozen in flight as with
	// thousands. nil: no limit.
	Syncs chan struct{}

	// WAL, when set (FsyncPolicy FsyncAlways only), is the write-ahead
	// log shared with other partitions: a cycle that wrote fewer than
	// WALMaxCycle bytes since the last fsync is made durable by syncing
	// the WAL (one fdatasync for every partition's cycle) instead of
	// this partition's segment file, which is fsynced in the background
	// on the flush tick and checkpointed. nil: every cycle fsyncs the
	// segment.
	WAL WAL
	// WALMaxCycle is the most bytes written since the last fsync that a
	// cycle hands to the WAL; larger cycles fsync the segment directly
	// (the WAL would double their I/O), except a new log's whose file
	// is not made yet (storage.Log.Pending). Default 256 KiB.
	WALMaxCycle int

	// Logger receives the acceptor's log lines (a failed partition, a
	// healed one, a failed retention run); default: discard. Callers
	// attach topic and partition with Logger.With.
	Logger *slog.Logger

	// HealBackoff is the first wait before a failed partition tries to
	// recover its log (storage.Log.Recover); it doubles after each
	// failed attempt up to HealBackoffMax. Defaults 100 ms and 30 s.
	HealBackoff, HealBackoffMax time.Duration

	// Recovered, if set, runs on the acceptor goroutine after the log
	// recovered and before any new append is taken: the caller rebuilds
	// state derived from the log (the broker's idempotent-producer
	// table). An error keeps the partition failed; recovery is retried.
	Recovered func() error

	// HWAdvanced, if set, is called after each advance of the high
	// watermark, by whoever advanced it (the acceptor goroutine or an
	// inline append); it must not block (the partition's fetch waiters
	// are signalled).
	HWAdvanced func()

	// NewTicker makes the flush and retention tickers: it returns a
	// channel that ticks every d and a function that stops it. nil uses
	// time.NewTicker. Tests pass channels they tick by hand.
	NewTicker func(d time.Duration) (c <-chan time.Time, stop func())
}

// WAL is the shared write-ahead log as a partition sees it;
// *wal.Handle implements it.
type WAL interface {
	// Append copies data (whole batches, offsets first up to end) into
	// the WAL and returns its position.
	Append(first, end int64, data []byte) (uint64, error)
	// Truncate appends an entry saying that the log now ends at end.
	Truncate(end int64) (uint64, error)
	// Sync returns once pos is durable (or the fsync covering it failed).
	Sync(pos uint64) error
	// SyncAsync calls done, on another goroutine or at once, with what
	// Sync(pos) would return, without waiting for it.
	SyncAsync(pos uint64, done func(error))
	// Checkpoint says the partition's log is fsynced below end.
	Checkpoint(end int64)
	// Alone reports whether this partition was the only one in the
	// WAL's last group commit and no other partition's (or internal
	// log's) entries wait for the next one: its cycles then fsync the
	// segment directly (always safe), until others write again.
	Alone() bool
	// Idle reports whether no WAL round is running: a round led now
	// starts at once instead of behind the running one.
	Idle() bool
	// Behind reports whether the WAL wants this partition to
	// checkpoint now (it holds old segments with its entries).
	Behind() bool
	// Refill appends to the log, from its end up to offset to, the
	// batches the WAL holds durably.
	Refill(t wal.Target, to int64) error
}

// Defaults for zero Config fields.
const (
	DefaultQueueSize      = 4096
	DefaultBufferSize     = 1 << 20
	DefaultFlushInterval  = time.Second
	DefaultRetentionCheck = time.Minute
	DefaultHealBackoff    = 100 * time.Millisecond
	DefaultHealBackoffMax = 30 * time.Second
	DefaultWALMaxCycle    = 256 << 10
)

// withDefaults fills zero (and meaningless negative) fields.
func (c Config) withDefaults() Config {
	if c.QueueSize <= 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.BufferSize <= 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.RetentionCheck == 0 {
		c.RetentionCheck = DefaultRetentionCheck
	}
	if c.Fsync < FsyncAlways || c.Fsync > FsyncNever {
		c.Fsync = FsyncAlways // an unknown policy gets the safe one
	}
	if c.NewTicker == nil {
		c.NewTicker = realTicker
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.WALMaxCycle <= 0 {
		c.WALMaxCycle = DefaultWALMaxCycle
	}
	if c.Fsync != FsyncAlways {
		c.WAL = nil // the WAL only replaces fsyncs that acks=all waits for
	}
	if c.HealBackoff <= 0 {
		c.HealBackoff = DefaultHealBackoff
	}
	if c.HealBackoffMax < c.HealBackoff {
		c.HealBackoffMax = max(c.HealBackoff, DefaultHealBackoffMax)
	}
	return c
}

func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}
