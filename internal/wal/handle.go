package wal

import (
	"fmt"
)

// Handle is a WAL bound to one key: what a partition's acceptor uses.
type Handle struct {
	w *WAL
	k Key
}

// For returns the handle of key k.
func (w *WAL) For(k Key) *Handle { return &Handle{w: w, k: k} }

// Append appends data (offsets first up to end) as an entry of the key.
func (h *Handle) Append(first, end int64, data []byte) (uint64, error) {
	p, err := h.w.Append(h.k, first, end, data)
	return uint64(p), err
}

// Truncate appends a truncate entry: the key's log now ends at end.
func (h *Handle) Truncate(end int64) (uint64, error) {
	p, err := h.w.Truncate(h.k, end)
	return uint64(p), err
}

// Sync waits until pos is durable.
func (h *Handle) Sync(pos uint64) error { return h.w.Sync(Pos(pos)) }

// SyncAsync calls done once pos is durable or failed (see WAL.SyncAsync).
func (h *Handle) SyncAsync(pos uint64, done func(error)) { h.w.SyncAsync(Pos(pos), done) }

// Checkpoint says the key's log is fsynced below end.
func (h *Handle) Checkpoint(end int64) { h.w.Checkpoint(h.k, end) }

// Alone reports whether the WAL's last round carried this key's entries
// and no other's, and no other key's entries wait for the next round:
// the partition is the only one writing, and its own segment's fsync
// costs it less than the WAL's write and fsync on top of its segment
// write. While another key's entries are buffered (a transaction
// coordinator's decision queued just before its marker, an implicit add
// before its batch) the next round runs anyway, and joining it costs the
// partition a copy where a segment fsync of its own would be a second
// fsync beside that round.
func (h *Handle) Alone() bool {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if len(h.w.metas) > 0 && (h.w.bufMixed || h.w.bufKey != h.k) {
		return false
	}
	return h.w.solo && h.w.soloKey == h.k
}

// Idle reports whether no round is running (see WAL.Idle).
func (h *Handle) Idle() bool { return h.w.Idle() }

// Behind reports whether the key should checkpoint now (see WAL.Behind).
func (h *Handle) Behind() bool { return h.w.Behind(h.k) }

// OnBehind registers f, called whenever Behind may have turned true (see
// WAL.OnBehind); nil removes it.
func (h *Handle) OnBehind(f func()) { h.w.OnBehind(h.k, f) }

// Failures counts the failed rounds that carried entries of the key. A
// writer whose waits run concurrently (not one after another, as a
// partition's acceptor's do) compares it before and after: a Sync that
// succeeded while the count moved may cover an entry that follows a lost
// one of the same key, durable in the WAL after a hole that replay would
// stop at; the writer then fsyncs its own log before it acknowledges.
func (h *Handle) Failures() uint64 {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	return h.w.failed[h.k]
}

// Forget says the key's log is gone (replaced): none of its entries are
// needed any more.
func (h *Handle) Forget() {
	h.w.Forget(h.k)
	h.w.mu.Lock()
	delete(h.w.failed, h.k)
	h.w.mu.Unlock()
}

// Refill appends to t the key's durable batches from t's end up to (not
// including) offset to, reading them from the WAL's files: what a healing
// partition lost when its log was cut back to its own last fsync.
func (h *Handle) Refill(t Target, to int64) error {
	if err := h.w.refill(h.k, t, to); err != nil {
		return err
	}
	if end := t.NextOffset(); end < to {
		return fmt.Errorf("wal: refill found the log's data up to offset %d only, %d acknowledged", end, to)
	}
	return nil
}

// RefillAvailable appends to t the key's batches found in the WAL's files
// from t's end up to (not including) offset to, as far as they continue
// t without a hole, and returns t's end afterwards: for a writer that
// does not know which of its appends were acknowledged, only that every
// acknowledged one is either in its log's fsynced bytes or contiguous
// after them in the WAL.
func (h *Handle) RefillAvailable(t Target, to int64) (int64, error) {
	if err := h.w.refill(h.k, t, to); err != nil {
		return t.NextOffset(), err
	}
	return t.NextOffset(), nil
}
