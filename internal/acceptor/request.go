package acceptor

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
)

var (
	// ErrClosed: the acceptor was closed; the append was not queued.
	ErrClosed = errors.New("acceptor: closed")
	// ErrBadRequest: the request does not hold whole, valid RecordBatches
	// (or Records disagrees with them). Nothing was written.
	ErrBadRequest = errors.New("acceptor: invalid append request")
	// ErrFailed: a write or fsync of the partition failed; the append may
	// or may not be on disk, and the partition refuses appends until it
	// heals (Config.HealBackoff). Errors wrap ErrFailed and the cause (for
	// example syscall.ENOSPC).
	ErrFailed = errors.New("acceptor: partition failed; it refuses appends until it heals")
)

// failure wraps the error that stopped a partition so that it matches
// both ErrFailed and its cause.
type failure struct{ cause error }

func (f *failure) Error() string   { return "acceptor: partition failed: " + f.cause.Error() }
func (f *failure) Unwrap() []error { return []error{ErrFailed, f.cause} }

// Request is one append: one or more RecordBatches from one produce
// request for this partition.
type Request struct {
	// Batches holds whole RecordBatches. The acceptor overwrites their
	// base offsets in place; the caller must not touch the slice until
	// Append returns.
	Batches []byte
	// Headers, when not nil, are the batches' headers as batch.Split or
	// batch.Validate returned them for exactly these bytes (the broker
	// parses each produce batch once, CRC32C included, and passes them
	// on): the acceptor and storage then check only that their sizes add
	// up to Batches, without reading the bytes again. The acceptor sets
	// their BaseOffset as it does in Batches. With Headers nil the
	// acceptor parses and validates the batches itself, CRC32C included,
	// so that one bad request fails alone rather than the coalesced write
	// that holds it.
	Headers []batch.Header
	// Records is the total number of offsets the batches take (sum of
	// lastOffsetDelta+1). 0 lets the acceptor count them; any other value
	// must agree with the batches.
	Records int64
	// Durable: release when fsynced (acks=all). Otherwise release once
	// written (acks=1).
	Durable bool
	// Check, if set, runs on the acceptor goroutine just before offsets
	// are assigned, serialized with every other append to this partition.
	// base is the offset the append would get. It may reject the append
	// (err) or say it duplicates an earlier append (dup true, dupBase its
	// base offset), in which case nothing is written and Append returns
	// dupBase. A duplicate is released under the same durability rule as
	// a new append, once everything appended before it is written (or
	// durable), so that acks=all never reports an unsynced original.
	Check func(base int64) (dupBase int64, dup bool, err error)
	// NoInline makes the append go through the partition's run
	// goroutine even when its caller could handle it inline (see
	// Acceptor.tryInline): for a Check that may block on locks its
	// callers hold elsewhere.
	NoInline bool
	// SyncInline lets the caller's goroutine write and fsync a durable
	// append itself when the partition's goroutine is idle and the
	// partition fsyncs its own segment (it writes alone, or has no WAL):
	// see Acceptor.appendSyncInline. Enqueue then returns only after the
	// fsync, so a caller sets it only when it has nothing else to do
	// meanwhile (the broker: a connection with no other request in
	// flight), else the appends it would have queued during the fsync
	// miss it.
	SyncInline bool
	// LeadWAL extends SyncInline to a partition whose small appends go
	// to the shared WAL (it does not write alone): the caller's goroutine
	// writes the append and leads, or waits for, the WAL round that
	// covers it, as the idle run goroutine would have, instead of handing
	// the sync to the WAL's flusher and waiting to be woken. For a caller
	// that waits for this one append before anything else (EndTxn's lone
	// marker): Enqueue returns after the round.
	LeadWAL bool
	// Shared, when set, is the buffer Batches lie in (a produce request's
	// frame), held by the caller until Append returns: a new log may keep
	// the bytes by reference, holding Shared, instead of copying them
	// (storage.Log.AppendShared). The caller must not change them while
	// Shared is held; it releases its own hold when done.
	Shared *storage.Shared
}

// Result is what Append reports.
type Result struct {
	BaseOffset int64 // offset of the first record
	Duplicate  bool  // Check reported a duplicate; nothing was written
}

// headers returns req's batch headers and the number of offsets they
// take. Headers the caller parsed are checked only for adding up to
// Batches; otherwise the batches are validated (batch.Split: header,
// magic 2, length, CRC32C) into scratch, which the result may reuse.
func headers(req *Request, scratch []batch.Header) ([]batch.Header, int64, error) {
	b := req.Batches
	if len(b) == 0 {
		return nil, 0, fmt.Errorf("%w: no batches", ErrBadRequest)
	}
	hs := req.Headers
	if hs == nil {
		hs = scratch[:0]
		if pos, err := batch.Split(b, func(h batch.Header, _ []byte) error {
			hs = append(hs, h)
			return nil
		}); err != nil {
			return hs, 0, fmt.Errorf("%w: batch at byte %d: %w", ErrBadRequest, pos, err)
		}
	}
	var n, size int64
	for i := range hs {
		h := &hs[i]
		if h.LastOffsetDelta < 0 || h.Size() < batch.HeaderSize {
			return hs, 0, fmt.Errorf("%w: batch %d: lastOffsetDelta %d, %d bytes", ErrBadRequest, i, h.LastOffsetDelta, h.Size())
		}
		n += int64(h.LastOffsetDelta) + 1
		size += int64(h.Size())
	}
	if size != int64(len(b)) {
		return hs, 0, fmt.Errorf("%w: headers cover %d of %d bytes", ErrBadRequest, size, len(b))
	}
	if req.Records != 0 && req.Records != n {
		return hs, 0, fmt.Errorf("%w: Records is %d but the batches take %d offsets", ErrBadRequest, req.Records, n)
	}
	return hs, n, nil
}

// assignOffsets writes contiguous base offsets from base into the batches
// of b and their headers hs, which headers accepted.
func assignOffsets(b []byte, hs []batch.Header, base int64) {
	pos := 0
	for i := range hs {
		batch.SetBaseOffset(b[pos:], base)
		hs[i].BaseOffset = base
		base += int64(hs[i].LastOffsetDelta) + 1
		pos += hs[i].Size()
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
