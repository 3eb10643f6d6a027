package acceptor

import (
	"errors"
	"fmt"
	"sync/atomic"

	"sluice/internal/batch"
)

var (
	// ErrClosed: the acceptor was closed; the append was not queued.
	ErrClosed = errors.New("acceptor: closed")
	// ErrBadRequest: the request does not hold whole, valid RecordBatches
	// (or Records disagrees with them). Nothing was written.
	ErrBadRequest = errors.New("acceptor: invalid append request")
	// ErrFailed: a write or fsync of the partition failed; the append may
	// or may not be on disk, and the partition refuses appends until it
	// is reopened. Errors wrap ErrFailed and the cause (for example
	// syscall.ENOSPC).
	ErrFailed = errors.New("acceptor: partition failed; reopen to recover")
)

// failure wraps the error that stopped a partition so that it matches
// both ErrFailed and its cause.
type failure struct{ cause error }

func (f *failure) Error() string   { return "acceptor: partition failed: " + f.cause.Error() }
func (f *failure) Unwrap() []error { return []error{ErrFailed, f.cause} }

// Request is one append: one or more RecordBatches from one produce
// request for this partition.
type Request struct {
	// Batches holds whole RecordBatches, already validated. The acceptor
	// overwrites their base offsets in place; the caller must not touch
	// the slice until Append returns.
	Batches []byte
	// Records is the total number of offsets the batches take (sum of
	// lastOffsetDelta+1). 0 lets the acceptor count them; any other value
	// must agree with the batches.
	Records int64
	// Durable: release when fsynced (acks=all). Otherwise release once
	// written (acks=1).
	Durable bool
	// Validated says the caller has already checked every batch's CRC32C
	// (the broker does, while validating a produce request), so the
	// acceptor checks only the framing (header, magic, length within the
	// request, lastOffsetDelta). The bytes must not change between that
	// check and Append's return. A Validated request whose CRC is in fact
	// bad is rejected by storage.Log.Append, which fails the write that
	// holds it and so the partition: only set Validated for bytes whose
	// CRC was checked.
	Validated bool
	// Check, if set, runs on the acceptor goroutine just before offsets
	// are assigned, serialized with every other append to this partition.
	// base is the offset the append would get. It may reject the append
	// (err) or say it duplicates an earlier append (dup true, dupBase its
	// base offset), in which case nothing is written and Append returns
	// dupBase. A duplicate is released under the same durability rule as
	// a new append, once everything appended before it is written (or
	// durable), so that acks=all never reports an unsynced original.
	Check func(base int64) (dupBase int64, dup bool, err error)
}

// Result is what Append reports.
type Result struct {
	BaseOffset int64 // offset of the first record
	Duplicate  bool  // Check reported a duplicate; nothing was written
}

// countRecords validates req's batches (header, magic 2, length within
// the request, lastOffsetDelta not negative, and CRC32C unless
// req.Validated) and returns the number of offsets they take. Unless the
// caller vouches for the CRC, it is checked here, although
// storage.Log.Append checks it again, so that one bad request fails
// alone: a bad batch that reached a coalesced write would stop the whole
// partition.
func countRecords(req *Request) (int64, error) {
	b := req.Batches
	if len(b) == 0 {
		return 0, fmt.Errorf("%w: no batches", ErrBadRequest)
	}
	var n int64
	for pos := 0; pos < len(b); {
		h, err := checkFraming(b[pos:], !req.Validated)
		if err == nil && h.LastOffsetDelta < 0 {
			err = fmt.Errorf("lastOffsetDelta %d is negative", h.LastOffsetDelta)
		}
		if err != nil {
			return 0, fmt.Errorf("%w: batch at byte %d: %w", ErrBadRequest, pos, err)
		}
		n += int64(h.LastOffsetDelta) + 1
		pos += h.Size()
	}
	if req.Records != 0 && req.Records != n {
		return 0, fmt.Errorf("%w: Records is %d but the batches take %d offsets", ErrBadRequest, req.Records, n)
	}
	return n, nil
}

// checkFraming parses the batch at the front of b and checks its magic
// and that it lies within b; with crc it also checks the CRC32C
// (batch.Validate).
func checkFraming(b []byte, crc bool) (batch.Header, error) {
	if crc {
		return batch.Validate(b)
	}
	h, err := batch.ParseHeader(b)
	switch {
	case err != nil:
	case h.Magic != 2:
		err = fmt.Errorf("%w: magic %d", batch.ErrBadMagic, h.Magic)
	case h.Size() > len(b):
		err = batch.ErrShort
	}
	return h, err
}

// assignOffsets writes contiguous base offsets from base into the batches
// of b, which countRecords accepted.
func assignOffsets(b []byte, base int64) {
	for pos := 0; pos < len(b); {
		h, _ := batch.ParseHeader(b[pos:]) // validated by countRecords
		batch.SetBaseOffset(b[pos:], base)
		base += int64(h.LastOffsetDelta) + 1
		pos += h.Size()
	}
}

// A waiter carries one Append through the acceptor. Waiters are pooled;
// state says who owns one at each moment, and exactly one party (the
// caller or the acceptor goroutine) recycles it.
//
//	queued ──acceptor takes──> taken ──bytes copied/written──> written ──released──> done
//	  │                          │                                │
//	  caller gives up            caller gives up                  caller gives up
//	  ▼                          ▼                                ▼
//	cancelled (never written)  abandonTaken ─bytes free─> abandoned (acceptor recycles)
//
// The acceptor sends on done at most once: sigFinal when it releases the
// waiter (res and err are set), or sigFreed when the caller is waiting in
// abandonTaken for its bytes to be out of use.
type waiter struct {
	state atomic.Int32
	done  chan uint8 // capacity 1

	// Set by Append before queueing; read by the acceptor goroutine.
	req     *Request // nil once the acceptor no longer needs Batches
	durable bool

	// Set by the acceptor goroutine; read by the caller after sigFinal.
	res Result
	err error
	end int64 // offset after the append (the release point)
}

const (
	wQueued int32 = iota
	wCancelled
	wTaken
	wAbandonTaken
	wWritten
	wAbandoned
	wDone
)

const (
	sigFinal uint8 = iota + 1
	sigFreed
)
