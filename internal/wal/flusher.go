package wal

import (
	"errors"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"github.com/sluicedb/sluice/internal/vfs"
)

// flusher is the flusher goroutine: while SyncAsync calls wait, it
// leads rounds (or waits for the running one) and calls the functions
// of those a round covered, outside mu. It stops when stop is closed,
// after calling the functions still registered with ErrClosed.
func (w *WAL) flusher() {
	defer close(w.flushDone)
	var ready []asyncSync
	var errs []error
	for {
		w.mu.Lock()
		// The registrations up to done are ready (positions are
		// registered in order per caller, not across callers: scan all).
		ready, errs = ready[:0], errs[:0]
		n := 0
		for _, a := range w.async {
			if a.pos <= w.done || w.closed {
				ready = append(ready, a)
				err := w.failedLocked(a.pos)
				if w.closed && a.pos > w.done {
					err = ErrClosed
				}
				errs = append(errs, err)
				continue
			}
			w.async[n] = a
			n++
		}
		clear(w.async[n:])
		w.async = w.async[:n]
		if len(ready) > 0 {
			w.mu.Unlock()
			for i, a := range ready {
				a.done(errs[i])
			}
			clear(ready)
			continue
		}
		switch {
		case w.closed:
			w.mu.Unlock()
			return
		case len(w.async) == 0:
			w.mu.Unlock()
			select {
			case <-w.kick:
			case <-w.stop:
				w.mu.Lock()
				w.closed = true // Close sets it first; a stop without it is a test's
				w.mu.Unlock()
			}
		case w.running != nil:
			r := w.running
			w.mu.Unlock()
			<-r.done
		default:
			w.lead()
			w.mu.Unlock()
		}
	}
}

// failedLocked returns the error of the failed round covering pos, if
// any. The caller holds mu.
func (w *WAL) failedLocked(pos Pos) error {
	for _, f := range w.fails {
		if pos > f.from && pos <= f.to {
			return f.err
		}
	}
	return nil
}

// maxFails bounds the failed rounds remembered: a caller asks about a
// position soon after appending it.
const maxFails = 64

// lead runs one round: it takes the buffer, writes and syncs it without
// holding mu, then publishes the result. Called and returns with mu held.
func (w *WAL) lead() {
	r := &round{target: w.appended, done: make(chan struct{})}
	w.running = r
	buf, head, metas := w.buf, w.bufHead, w.metas
	n := len(buf) - head // the round's entry bytes
	w.bufHead = w.reserve(metas)
	w.buf, w.metas = reserved(w.spare, w.bufHead), w.spareMeta[:0]
	from := w.done
	w.mu.Unlock()

	began := time.Now()
	w.held, w.buffered, w.heldW, w.inPlace = false, false, 0, 0
	w.holdWrite = mayHold(n)
	err := w.flush(buf, head, metas)
	took := time.Since(began)

	w.mu.Lock()
	w.solo = len(metas) > 0
	for i := range metas {
		if metas[i].key != metas[0].key {
			w.solo = false
			break
		}
	}
	if w.solo {
		w.soloKey = metas[0].key
	}
	w.spare, w.spareMeta = buf[:0], metas[:0]
	if n > 0 {
		w.stats.Rounds++
		w.stats.Entries += int64(len(metas))
		w.stats.Bytes += int64(n)
		w.stats.RoundTime += took
		if w.held {
			w.stats.HeldRounds++
		}
		w.stats.HeldWrites += w.heldW
		w.stats.InPlace += w.inPlace
		if !w.buffered {
			w.stats.DirectRounds++
		}
	}
	if err != nil {
		w.stats.FailedRounds++
		w.fails = append(w.fails, failRange{from: from, to: r.target, err: err})
		if len(w.fails) > maxFails {
			w.fails = w.fails[1:]
		}
		for i := range metas {
			if i == 0 || metas[i].key != metas[i-1].key {
				w.failed[metas[i].key]++
			}
		}
	}
	w.done = r.target
	w.running = nil
	close(r.done)
}

// reserve returns how many bytes the next round buffer keeps before its
// first entry, when the round now starting writes the entries of metas:
// the bytes of the block the active segment will end in after this
// round, below its end, which the next round's first direct write
// rewrites first (seg.part). With them in front, the next round writes
// its entries straight from its buffer instead of copying them into an
// aligned one (see write). It follows flush's placement of the entries,
// a segment rotated in where the next does not fit; a guess all the
// same: when it proves wrong (the round fails, or the segment is not
// written directly) the next round copies. Leader only.
func (w *WAL) reserve(metas []meta) int {
	var size int64 // the active segment's size after the round
	if a := w.active; a != nil {
		size = a.size
	}
	for i := range metas {
		if size+int64(metas[i].size) > w.segBytes {
			size = 0 // flush seals the segment; the entry starts the next
		}
		size += int64(metas[i].size)
	}
	if size == w.segBytes {
		return 0 // full and sealed: the next round starts a segment of its own
	}
	return int(size % vfs.DirectAlign)
}

// reserved returns b, emptied, holding head bytes to be overwritten, with
// room for a direct write's padding after them; b itself when it has the
// capacity.
func reserved(b []byte, head int) []byte {
	if need := head + vfs.DirectAlign; cap(b) < need {
		b = vfs.AlignedBuffer(max(need, minBufBytes))
	}
	return b[:head]
}

// flush writes the entries of buf after its first head bytes (described
// by metas) to the active segment, rotating to a prepared one whenever the
// next entry does not fit, and syncs. A failure abandons the active
// segment: the next round starts a fresh one, so that nothing follows a
// bad entry inside a segment.
func (w *WAL) flush(buf []byte, head int, metas []meta) error {
	if len(buf) == head {
		return nil
	}
	start := head // first byte of buf not yet written
	for i := 0; i < len(metas); {
		if w.active == nil {
			if err := w.rotate(); err != nil {
				return err
			}
		}
		a := w.active
		// The entries from i that fit in the active segment.
		n, j := 0, i
		for j < len(metas) && a.size+int64(n+metas[j].size) <= w.segBytes {
			sealEntry(buf[start+n:], a.seq)
			n += metas[j].size
			j++
		}
		if n > 0 {
			if err := w.write(a, buf, start, start+n); err != nil {
				return w.abandon(fmt.Errorf("wal: write %s: %w", a.path, err))
			}
			w.noteEntries(a, metas[i:j])
			start += n
			i = j
		}
		if i < len(metas) || a.size == w.segBytes {
			// Full: sync it before any later entry goes to the next
			// segment, so that no entry is durable after a lost one.
			if err := a.file.Sync(); err != nil {
				return w.abandon(fmt.Errorf("wal: sync %s: %w", a.path, err))
			}
			w.seal()
		}
	}
	if a := w.active; a != nil {
		if err := w.syncRound(a.file, len(buf)-head); err != nil {
			return w.abandon(fmt.Errorf("wal: sync %s: %w", a.path, err))
		}
	}
	return nil
}

// heldMaxBytes is the largest round whose direct write and fdatasync
// hold their processor (see syncRound).
const heldMaxBytes = vfs.HoldMaxBytes

// syncRound fdatasyncs the active segment after a round wrote n bytes
// into it. A small round (heldMaxBytes) syncs with vfs.SyncHeld: the
// leader keeps its processor while the disk syncs, instead of the
// runtime handing the processor to another thread and its monitor
// thread polling every 20 µs while the call lasts (with rounds back to
// back, the monitor then never backs off: a context switch per poll).
// vfs bounds the processors held at once and stops holding for a while
// after a slow call (a disk that stalls then stalls the writers only).
// Durability is the same either way: the round is released only when
// the fdatasync returns. Leader only.
func (w *WAL) syncRound(f vfs.File, n int) error {
	if !mayHold(n) {
		return f.Sync()
	}
	held, err := vfs.SyncHeld(f)
	w.held = held
	return err
}

// mayHold reports whether a round of n bytes asks to hold its processor
// through its direct write and fdatasync (see syncRound).
func mayHold(n int) bool { return n <= heldMaxBytes }

// noteEntries records, under mu, which keys have entries in s, up to
// which offset, and removes segments a truncate entry made unneeded.
func (w *WAL) noteEntries(s *seg, metas []meta) {
	w.mu.Lock()
	free := false
	for _, m := range metas {
		c, ok := w.ckpt[m.key]
		if m.trunc {
			// Entries of the key before this one are stale past m.end:
			// no longer wait for a checkpoint beyond it.
			for _, o := range w.segs {
				if e, has := o.ends[m.key]; has && e > m.end {
					o.ends[m.key] = m.end
					if ok && c >= m.end {
						delete(o.ends, m.key)
						free = free || len(o.ends) == 0
					}
				}
			}
		}
		if ok && c >= m.end {
			continue // the log is already fsynced past it
		}
		e, has := s.ends[m.key]
		if !has {
			s.keys++
		}
		if !has || e < m.end || m.trunc {
			s.ends[m.key] = m.end
		}
	}
	w.mu.Unlock()
	if free {
		w.collect()
	}
}

// rotate makes a prepared segment the active one.
func (w *WAL) rotate() error {
	for try := 0; ; try++ {
		var p prepared
		select {
		case p = <-w.prepC:
		case <-w.stop:
			return ErrClosed
		}
		if p.err != nil {
			if try == 0 {
				continue // made before this round: ask for a fresh attempt
			}
			return fmt.Errorf("wal: prepare a segment: %w", p.err)
		}
		s := &seg{seq: p.seq, path: p.path, file: p.file, direct: p.direct, ends: map[Key]int64{}}
		w.mu.Lock()
		w.segs = append(w.segs, s)
		w.mu.Unlock()
		w.active = s
		return nil
	}
}

// seal closes the active segment's file; the segment stays listed until
// every key with entries in it checkpointed past them.
func (w *WAL) seal() {
	a := w.active
	w.active = nil
	a.closeFiles() // synced: nothing to lose
	w.mu.Lock()
	keys := a.keys
	w.mu.Unlock()
	keep := w.keepFor(keys)
	w.mu.Lock()
	a.sealed = true
	w.keep = keep
	w.mu.Unlock()
	w.collect()
	w.notifyBehind()
}

// abandon gives up the active segment after a failed write or sync and
// returns err. The next round writes to a fresh segment.
func (w *WAL) abandon(err error) error {
	w.log.Error("wal: write failed; the partitions of this group commit fail and heal; the WAL goes on in a fresh segment", "err", err)
	if a := w.active; a != nil {
		w.active = nil
		a.closeFiles()
		w.mu.Lock()
		a.sealed = true
		w.mu.Unlock()
	}
	w.collect()
	w.notifyBehind()
	return err
}

// closeFiles closes the active segment's descriptors. Leader only.
func (s *seg) closeFiles() {
	_ = s.file.Close()
	s.file = nil
	if s.direct != nil {
		_ = s.direct.Close()
		s.direct = nil
	}
}

// directMax is the most bytes one direct write of a round carries when
// the round is copied into the aligned buffer (a larger round is written
// in several), which bounds that buffer.
const directMax = 4 << 20

// write writes buf[from:to], whole sealed entries, at the end of the
// active segment a. A segment made full length is written directly
// (seg.direct): the device reads the round from an aligned buffer, so the
// round's bytes are not copied into the page cache a second time (each
// partition's segment holds them already), no cached page is allocated,
// dirtied and written back for them, and the round's fdatasync has only
// the device's cache to flush. The aligned buffer is the round's own when
// it can be (writeInPlace), else a copy. Otherwise, or when the filesystem
// refuses a direct write after all, the entries go through the page
// cache. Leader only.
func (w *WAL) write(a *seg, buf []byte, from, to int) error {
	if a.direct != nil && to == len(buf) {
		done, err := w.writeInPlace(a, buf, from)
		switch {
		case done:
			return nil
		case errors.Is(err, syscall.EINVAL):
			noDirect(a)
		case err != nil:
			return err
		}
		// Not done: the round's buffer has no room for the segment's
		// last bytes before the entries (reserve guessed wrong), or the
		// write was refused.
	}
	p := buf[from:to]
	for a.direct != nil && len(p) > 0 {
		n := min(len(p), directMax)
		err := w.writeDirect(a, p[:n])
		if errors.Is(err, syscall.EINVAL) {
			noDirect(a)
			break
		}
		if err != nil {
			return err
		}
		a.size += int64(n)
		p = p[n:]
	}
	if len(p) == 0 {
		return nil
	}
	w.buffered = true
	if _, err := a.file.WriteAt(p, a.size); err != nil {
		return err
	}
	a.size += int64(len(p))
	return nil
}

// noDirect stops a's direct writes after the filesystem refused one (an
// alignment the device wants larger): the rest of the segment is written
// through the page cache, which reads back what the direct writes left.
func noDirect(a *seg) {
	_ = a.direct.Close()
	a.direct = nil
}

// writeInPlace writes buf[from:], the last entries of a round, at a.size
// through a.direct straight from the round's buffer, when the buffer
// holds room for a.part just before them (the bytes reserve kept) at an
// aligned address, and room after them for the padding to the end of their
// last block: a.part is copied in front, zeros after, and one direct write
// covers it all, whatever the round's size. It reports whether it wrote
// (false, nil: the buffer is not laid out for it, nothing was done); a
// refusal (EINVAL) leaves a.direct for write to close. Leader only.
func (w *WAL) writeInPlace(a *seg, buf []byte, from int) (bool, error) {
	const al = vfs.DirectAlign
	head := len(a.part)
	lo := from - head
	end := len(buf) - lo // bytes from the block's start to the last entry's end
	n := (end + al - 1) &^ (al - 1)
	if lo < 0 || lo+n > cap(buf) || uintptr(unsafe.Pointer(unsafe.SliceData(buf[lo:])))%al != 0 {
		return false, nil
	}
	if err := w.writeBlocks(a, buf[lo:lo+n], end); err != nil {
		return false, err
	}
	w.inPlace++
	a.size += int64(len(buf) - from)
	return true, nil
}

// writeDirect writes p at a.size through a.direct: from the start of the
// block holding a.size (the segment's bytes below a.size in that block,
// kept in a.part, go first, rewritten as they were) to the end of p's last
// block, padded with zeros as the segment was zeroed. It does not move
// a.size. Leader only.
func (w *WAL) writeDirect(a *seg, p []byte) error {
	const al = vfs.DirectAlign
	head := len(a.part)
	end := head + len(p)
	n := (end + al - 1) &^ (al - 1)
	if cap(w.dbuf) < n {
		// Small rounds keep a small buffer; the first large one makes it
		// as large as a direct write gets, so that it is not grown again.
		size := 64 << 10
		if n > size {
			size = max(n, directMax+al)
		}
		w.dbuf = vfs.AlignedBuffer(size)
	}
	d := w.dbuf[:n]
	copy(d[head:], p)
	return w.writeBlocks(a, d, end)
}

// writeBlocks writes d, whole aligned blocks starting with the block
// holding a.size, through a.direct: a.part is put at its start and zeros
// after its first end bytes (the entries are in between), and a.part
// then holds the bytes of the last block below end. It does not move
// a.size. Leader only.
func (w *WAL) writeBlocks(a *seg, d []byte, end int) error {
	copy(d, a.part)
	clear(d[end:])
	if err := w.directWrite(a, d); err != nil {
		return err
	}
	a.part = append(a.part[:0], d[end&^(vfs.DirectAlign-1):end]...)
	return nil
}

// directWrite writes d, whole aligned blocks starting with the block
// holding a.size, through a.direct. Leader only.
func (w *WAL) directWrite(a *seg, d []byte) error {
	base := a.size - int64(len(a.part))
	if w.holdWrite {
		// A direct write blocks until the device has the bytes, as the
		// round's fdatasync does: a small round holds its processor
		// through both (see syncRound), or the runtime would hand the
		// processor to another thread and keep its monitor polling for
		// the write alone.
		_, held, err := vfs.WriteAtHeld(a.direct, d, base)
		if held {
			w.heldW++
		}
		return err
	}
	_, err := a.direct.WriteAt(d, base)
	return err
}
