package storage

import "sync/atomic"

// Shared is a buffer that holds appended bytes, such as a produce
// request's frame, and of which a new log may keep slices in memory
// (Log.AppendShared) instead of copying them, while its file is not made
// (see lazyFile). It counts its holders: the caller that made it, and
// each log that keeps a slice of it until that log's file is made or the
// log is closed. The last Release calls done, which may then reuse the
// buffer. The bytes a log keeps must not change while any holder is
// left: the buffer is the log's data until then.
//
// While a log keeps a slice, the whole buffer (size, its capacity) counts
// against the logs' PendingBudget, once however many logs keep slices of
// it: the memory held is the buffer's, not the slices'.
type Shared struct {
	size    int
	done    func()
	refs    atomic.Int32
	charged atomic.Pointer[PendingBudget] // the budget charged with size while a log kept a slice
}

// NewShared returns a Shared of a buffer of size bytes held by the
// caller, whose last Release calls done (which may be nil).
func NewShared(size int, done func()) *Shared {
	s := &Shared{size: size, done: done}
	s.refs.Store(1)
	return s
}

// Release drops one hold; the last one uncharges the budget and calls
// done.
func (s *Shared) Release() {
	switch n := s.refs.Add(-1); {
	case n > 0:
		return
	case n < 0:
		panic("storage: Shared released more often than held")
	}
	if b := s.charged.Load(); b != nil {
		b.add(-s.size)
		b.shared.Add(-1)
	}
	if s.done != nil {
		s.done()
	}
}

// hold takes a hold for a log that keeps a slice of the buffer; the first
// one charges b with the buffer's size. The caller holds s already (the
// append's), so it cannot reach zero meanwhile.
func (s *Shared) hold(b *PendingBudget) {
	s.refs.Add(1)
	if b != nil && s.charged.CompareAndSwap(nil, b) {
		b.add(s.size)
		b.shared.Add(1)
	}
}
