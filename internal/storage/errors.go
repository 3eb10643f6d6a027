package storage

import (
	"errors"
	"fmt"
)

var (
	// ErrOffsetOutOfRange: a read below the log start offset or past the
	// log end offset, or from a slice whose segment retention has removed
	// since (Kafka's OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("storage: log closed")
	// ErrBadAppend: Append was given bytes that are not whole, valid
	// batches with contiguous offsets from NextOffset. Nothing was written.
	ErrBadAppend = errors.New("storage: invalid append")
	// ErrFailed: an earlier write, fsync or roll failed, so the bytes on
	// disk are unknown; the log refuses writes until Recover (or a reopen)
	// cuts it back to its durable bytes (a failed fsync cannot be retried
	// safely). Errors wrap both ErrFailed and the original cause.
	ErrFailed = errors.New("storage: log failed; it refuses writes until recovered")
)

// errSliceGone is returned by Slice methods once retention or Close has
// removed the slice's segment.
var errSliceGone = fmt.Errorf("%w: the slice's segment was removed", ErrOffsetOutOfRange)

// CorruptionError reports invalid bytes followed by valid data in a
// segment: a hole in the log that recovery refuses to paper over. The
// segment file is left in place, untouched; a copy is kept at Broken.
type CorruptionError struct {
	Segment  string // path of the segment file
	Offset   int64  // the offset recovery expected at Position
	Position int64  // byte position of the first invalid batch in the segment
	Broken   string // path of the copy kept aside ("" if copying failed)
	Err      error  // why the bytes at Position are invalid
}

func (e *CorruptionError) Error() string {
	kept := "no copy kept"
	if e.Broken != "" {
		kept = "copy kept at " + e.Broken
	}
	return fmt.Sprintf("storage: corrupt segment %s at byte %d (expected offset %d), valid data follows: %v (%s)",
		e.Segment, e.Position, e.Offset, e.Err, kept)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// failure wraps a write-path error so that it matches ErrFailed and cause.
type failure struct {
	what  string
	cause error
}

func (f *failure) Error() string {
	return fmt.Sprintf("storage: %s: %v (log failed; it refuses writes until recovered)", f.what, f.cause)
}
func (f *failure) Unwrap() []error { return []error{ErrFailed, f.cause} }
