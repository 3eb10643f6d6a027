package storage

// API CONTRACT (the storage implementer replaces the bodies and may move
// these declarations into other files; signatures are relied on by
// internal/acceptor and broker, so change them only with care).

import (
	"io"
	"time"

	"sluice/internal/batch"
	"sluice/internal/vfs"
)

// Config sets a partition log's layout and retention. Zero values take
// the defaults noted on each field.
type Config struct {
	SegmentBytes   int64         // roll when the active segment reaches this size; default 1 GiB (segment.bytes)
	SegmentAge     time.Duration // roll when the active segment's first batch is older; default 7 days (segment.ms)
	RetentionBytes int64         // keep at most this many bytes; <0 or 0 = unlimited (retention.bytes, default -1)
	RetentionAge   time.Duration // delete segments whose newest batch is older; <0 = unlimited; 0 = default 7 days (retention.ms)
	IndexInterval  int           // bytes between sparse offset-index entries; default 4096
	Now            func() time.Time
}

// Log is one partition's log: a directory of segment files.
//
// One goroutine (the partition's acceptor) calls the writing methods
// (Append, Sync, Roll, ApplyRetention, Close); any number of goroutines may
// call the reading methods concurrently with it.
type Log struct{}

// Open opens or creates the log in dir, recovering it: after a clean
// Close it trusts the checkpoint; otherwise it validates the unverified
// tail, truncates a torn tail, rebuilds missing or corrupt indexes, and
// returns a *CorruptionError if invalid bytes are followed by valid data.
func Open(fs vfs.FS, dir string, cfg Config) (*Log, error) { panic("unimplemented") }

// Append writes buf, one or more whole RecordBatches whose base offsets
// are already assigned, contiguous from NextOffset(). Nothing is synced.
// It rolls the active segment first when buf would overflow it (syncing
// the old segment) or when it is too old.
func (l *Log) Append(buf []byte) error { panic("unimplemented") }

// Sync makes every appended byte durable.
func (l *Log) Sync() error { panic("unimplemented") }

// NextOffset is the log end offset: the offset the next batch gets.
func (l *Log) NextOffset() int64 { panic("unimplemented") }

// StartOffset is the log start offset: the first offset still stored.
func (l *Log) StartOffset() int64 { panic("unimplemented") }

// Read returns whole batches starting with the batch that holds offset,
// none at or past limit (exclusive; the caller passes the high
// watermark), at most maxBytes but always at least one whole batch if one
// exists below limit. An offset below StartOffset gives ErrOffsetOutOfRange.
func (l *Log) Read(offset, limit int64, maxBytes int) (Slice, error) { panic("unimplemented") }

// Slice is a region of one segment file holding whole batches.
type Slice struct{}

// Len is the number of bytes in the slice.
func (s Slice) Len() int { panic("unimplemented") }

// Bytes reads the slice into memory.
func (s Slice) Bytes() ([]byte, error) { panic("unimplemented") }

// WriteTo copies the slice to w, with sendfile when w is a TCP connection
// and the segment is an OS file.
func (s Slice) WriteTo(w io.Writer) (int64, error) { panic("unimplemented") }

// OffsetForTime returns the offset of the first batch whose max timestamp
// is >= ts, or NextOffset() if none.
func (l *Log) OffsetForTime(ts int64) (int64, error) { panic("unimplemented") }

// MaxTimestamp returns the largest timestamp in the log and the offset of
// the batch holding it (-1, -1 when empty).
func (l *Log) MaxTimestamp() (ts int64, offset int64) { panic("unimplemented") }

// ApplyRetention removes whole segments past the retention limits (never
// the active segment) and advances StartOffset.
func (l *Log) ApplyRetention() (removed int, err error) { panic("unimplemented") }

// ScanHeaders calls fn with the header of every stored batch whose last
// offset is >= from, in offset order, stopping at the first error.
func (l *Log) ScanHeaders(from int64, fn func(h batch.Header) error) error { panic("unimplemented") }

// Close syncs, writes the clean-shutdown checkpoint and closes files. It
// is idempotent.
func (l *Log) Close() error { panic("unimplemented") }
