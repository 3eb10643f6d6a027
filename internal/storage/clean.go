package storage

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

// Log compaction (cleanup.policy=compact): Clean rewrites the sealed
// segments so that only the latest record of each key remains, keeping
// every remaining record's offset.
//
//   - The dirty section is the sealed segments from the first dirty
//     offset (where the previous pass stopped, kept in
//     cleaner-checkpoint) whose newest record is at least
//     MinCompactionLag old. The active segment is never touched.
//   - A pass maps each key of the dirty section to its latest offset,
//     then rewrites the sealed segments from the log start through the
//     dirty section in groups of about TargetSegmentBytes: a record is
//     kept if no later record of its key exists. Keyless records are
//     dropped (a compacted topic refuses them at produce). A tombstone (a
//     null value) is kept until DeleteRetention has passed since the pass
//     that first cleaned it, then dropped.
//   - Batches stay whole and in order: a batch whose records all stay is
//     copied byte for byte; one that loses some is re-encoded by package
//     batch with the same base offset, last offset delta, producer fields
//     and codec; one that loses all is kept empty if it is its producer's
//     last batch (so idempotent-producer state survives a restart), as
//     Kafka does, and otherwise dropped. Offsets then have gaps, within a
//     cleaned segment and between segments; readers are handed the next
//     batch after a gap, and recovery accepts gaps in sealed segments.
//     Control batches are kept.
//   - Each group is swapped in by the crash-safe protocol in cleanswap.go.
//     Readers that hold a slice of a replaced segment keep reading its
//     old bytes: the replaced segments stay open until the next pass
//     (or Close).
//
// Transactions: with CleanOptions.Aborted set (the broker wires it to
// the partition's aborted-transaction index), the records of aborted
// transactions are removed and never count as a key's latest value;
// CleanOptions.MaxOffset (the last stable offset) keeps an open
// transaction's records out of the pass. A transaction marker (COMMIT or
// ABORT) goes, as in Kafka, once no batch of its transaction is left in
// the log (the transaction's records were all compacted or aborted away)
// and delete.retention.ms has passed since the pass that first cleaned
// it, so a read_committed consumer that was part-way through the
// transaction has had that long to read past it. A marker that is its
// producer's last batch stays (it carries the producer's latest epoch),
// and so does every marker whose transaction still has a batch (even an
// emptied one): without its marker that batch would look like an open
// transaction when the log is recovered.

// CleanOptions are one compaction pass's settings, mirroring the topic
// configs of the same names.
type CleanOptions struct {
	Now                time.Time     // the pass's clock; zero: time.Now()
	MinCompactionLag   time.Duration // min.compaction.lag.ms
	DeleteRetention    time.Duration // delete.retention.ms
	TargetSegmentBytes int64         // size of cleaned segments; 0: DefaultSegmentBytes
	// MaxKeys bounds the key map of one pass; the dirty section is cut
	// after the segment that reaches it. 0: DefaultMaxCleanKeys.
	MaxKeys int
	// Throttle, when set, is called with the bytes read or written so
	// far since its previous call; it may wait (rate limiting) and an
	// error aborts the pass, leaving the log as it was.
	Throttle func(ctx context.Context, n int) error
	// Aborted, when set, reports whether a transactional data batch
	// belongs to an aborted transaction (from the partition's aborted-
	// transaction index). Its records are then neither mapped as a key's
	// latest value nor kept. Transaction markers are kept either way.
	Aborted func(h *batch.Header) bool
	// MaxOffset, when above 0, bounds the dirty section to segments that
	// end at or below it: the partition's last stable offset, so that the
	// records of a transaction still open are never taken for a key's
	// latest value (nor the high watermark passed).
	MaxOffset int64
}

// DefaultMaxCleanKeys bounds the keys one pass maps.
const DefaultMaxCleanKeys = 4 << 20

// CleanStats describes how much of the log a pass would clean.
type CleanStats struct {
	FirstDirty int64 // offset where the dirty section starts
	CleanBytes int64 // sealed bytes below FirstDirty
	DirtyBytes int64 // sealed bytes from FirstDirty that are old enough to clean
	// OldestDirty is the newest timestamp (ms) of the first dirty
	// segment, -1 when there is none; a cleaner compares it with
	// max.compaction.lag.ms.
	OldestDirty int64
	// TombstonesDue: a tombstone in the cleaned section has outlived
	// delete.retention.ms, so a pass has something to remove even when
	// nothing is dirty.
	TombstonesDue bool
}

// DirtyRatio is DirtyBytes over the sealed bytes a pass would read.
func (s CleanStats) DirtyRatio() float64 {
	if s.DirtyBytes == 0 {
		return 0
	}
	return float64(s.DirtyBytes) / float64(s.CleanBytes+s.DirtyBytes)
}

// CleanResult reports what a pass did.
type CleanResult struct {
	BytesRead, BytesWritten int64
	RecordsRemoved          int64
	SegmentsReplaced        int   // sealed segments swapped out
	SegmentsWritten         int   // cleaned segments swapped in
	CleanedTo               int64 // the new first dirty offset
}

// firstDirty is where the dirty section starts. The caller holds cleanMu.
func (l *Log) firstDirtyLocked() int64 {
	if len(l.marks) == 0 {
		return 0
	}
	return l.marks[len(l.marks)-1].upTo
}

// sealedView is a sealed segment and its size, referenced for a pass.
type sealedView struct {
	s    *segment
	size int64
	next int64
	ts   int64
}

// snapshotSealed takes a reference on every sealed segment.
func (l *Log) snapshotSealed() ([]sealedView, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	var vs []sealedView
	for _, s := range l.segs[:len(l.segs)-1] {
		s.acquire()
		vs = append(vs, sealedView{s: s, size: s.size, next: s.next, ts: s.maxTs})
	}
	return vs, nil
}

func releaseViews(vs []sealedView) {
	for _, v := range vs {
		v.s.release()
	}
}

// dirtyRange returns the index range [from, to) of vs that a pass may
// treat as dirty.
func dirtyRange(vs []sealedView, firstDirty int64, now time.Time, minLag time.Duration, maxOffset int64) (from, to int) {
	from = len(vs)
	for i, v := range vs {
		if v.next > firstDirty {
			from = i
			break
		}
	}
	cutoff := now.Add(-minLag).UnixMilli()
	to = from
	for to < len(vs) && (minLag <= 0 || vs[to].ts <= cutoff) && (maxOffset <= 0 || vs[to].next <= maxOffset) {
		to++
	}
	return from, to
}

// CleanStats reports the log's clean and dirty bytes for a pass at now
// with the given min.compaction.lag.ms and CleanOptions.MaxOffset.
func (l *Log) CleanStats(now time.Time, minLag time.Duration, maxOffset int64) (CleanStats, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	vs, err := l.snapshotSealed()
	if err != nil {
		return CleanStats{}, err
	}
	defer releaseViews(vs)
	st := CleanStats{FirstDirty: l.firstDirtyLocked(), OldestDirty: -1}
	from, to := dirtyRange(vs, st.FirstDirty, now, minLag, maxOffset)
	for i, v := range vs {
		switch {
		case i < from:
			st.CleanBytes += v.size
		case i < to:
			st.DirtyBytes += v.size
		}
	}
	if from < len(vs) && vs[from].ts != noTimestamp {
		st.OldestDirty = vs[from].ts
	}
	st.TombstonesDue = l.tombstonesDue > 0 && now.UnixMilli() >= l.tombstonesDue
	return st, nil
}

// eachBatch calls fn with every batch of the first size bytes of s. raw
// is valid only during the call.
func eachBatch(s *segment, size int64, fn func(h batch.Header, raw []byte) error) error {
	w := &window{f: s.file, size: size}
	for pos := int64(0); pos < size; {
		hb, err := w.bytes(pos, batch.HeaderSize)
		if err != nil {
			return err
		}
		h, err := batch.ParseHeader(hb)
		if err != nil {
			return fmt.Errorf("storage: %s at %d: %w", s.path, pos, err)
		}
		raw, err := w.bytes(pos, h.Size())
		if err != nil {
			return err
		}
		if err := fn(h, raw); err != nil {
			return err
		}
		pos += int64(h.Size())
	}
	return nil
}

// errCleanAborted: the pass was cancelled or the log is closing.
var errCleanAborted = errors.New("storage: compaction aborted")

// Clean runs one compaction pass (see the comment at the top of this
// file). It may run on its own goroutine, concurrently with the writer
// and readers; passes are serialized, retention skips its turn while one
// runs, and Close waits for it (aborting it at the next batch). ctx
// cancels the pass; an aborted or failed pass before a swap commits
// leaves the log as it was.
func (l *Log) Clean(ctx context.Context, o CleanOptions) (CleanResult, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	var res CleanResult
	if l.cleanBroken != nil {
		return res, l.cleanBroken
	}
	// Close cancels the pass through this context, so that a pass waiting
	// in Throttle does not hold Close up.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.passCancel.Store(&cancel)
	defer l.passCancel.Store(nil)
	if l.closing.Load() {
		return res, ErrClosed
	}
	l.releaseRetired(time.Now())
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.TargetSegmentBytes <= 0 {
		o.TargetSegmentBytes = DefaultSegmentBytes
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxCleanKeys
	}
	vs, err := l.snapshotSealed()
	if err != nil {
		return res, err
	}
	defer releaseViews(vs)
	firstDirty := l.firstDirtyLocked()
	from, to := dirtyRange(vs, firstDirty, o.Now, o.MinCompactionLag, o.MaxOffset)
	res.CleanedTo = firstDirty
	if from == to && (l.tombstonesDue == 0 || o.Now.UnixMilli() < l.tombstonesDue) {
		return res, nil // nothing dirty and no tombstone to drop
	}
	if to == 0 {
		return res, nil
	}
	p := &pass{l: l, ctx: ctx, o: o, res: &res, firstDirty: firstDirty, marks: l.marks}

	// The latest offset of every key in the dirty section.
	p.latest = map[string]int64{}
	for i := from; i < to; i++ {
		if err := p.mapKeys(vs[i]); err != nil {
			return res, err
		}
		if len(p.latest) >= o.MaxKeys {
			to = i + 1
			break
		}
	}
	// Each producer's last data batch, which must survive even if
	// emptied (its sequence numbers rebuild the producer's state).
	p.lastOfPID, p.lastAny, p.txnLeft = map[int64]int64{}, map[int64]int64{}, map[int64]bool{}
	if err := l.ScanHeaders(0, func(h batch.Header) error {
		if h.ProducerID >= 0 && !h.Control() {
			p.lastOfPID[h.ProducerID] = h.BaseOffset
		}
		if h.ProducerID >= 0 {
			p.lastAny[h.ProducerID] = h.BaseOffset
		}
		return nil
	}); err != nil {
		return res, fmt.Errorf("storage: compaction: scan producer batches: %w", err)
	}

	for _, g := range groupViews(vs[:to], o.TargetSegmentBytes) {
		if err := p.cleanGroup(g); err != nil {
			return res, err
		}
	}
	res.CleanedTo = max(firstDirty, vs[to-1].next)
	marks := addMark(l.marks, cleanMark{upTo: res.CleanedTo, at: o.Now.UnixMilli()})
	if err := l.writeCleanMarks(marks, p.due); err != nil {
		return res, fmt.Errorf("storage: compaction: %w", err)
	}
	l.marks, l.tombstonesDue = marks, p.due
	return res, nil
}

// groupViews splits consecutive segments into groups of at most target
// bytes (a larger segment is a group of its own).
func groupViews(vs []sealedView, target int64) [][]sealedView {
	var gs [][]sealedView
	var cur []sealedView
	var size int64
	for _, v := range vs {
		if len(cur) > 0 && (size+v.size > target || size+v.size > maxSegmentBytes) {
			gs = append(gs, cur)
			cur, size = nil, 0
		}
		cur = append(cur, v)
		size += v.size
	}
	if len(cur) > 0 {
		gs = append(gs, cur)
	}
	return gs
}

// pass is the state of one Clean call.
type pass struct {
	l          *Log
	ctx        context.Context
	o          CleanOptions
	res        *CleanResult
	firstDirty int64
	marks      []cleanMark
	latest     map[string]int64 // key -> latest offset in the dirty section
	lastOfPID  map[int64]int64  // producer id -> base offset of its last batch
	lastAny    map[int64]int64  // producer id -> base offset of its last batch, markers included
	// txnLeft holds the producers whose current transaction (since their
	// previous marker) still has a batch in the cleaned output.
	txnLeft map[int64]bool
	due     int64 // earliest time (unix ms) a kept tombstone may go; 0: none kept
}

func (p *pass) check(n int) error {
	if p.l.closing.Load() {
		return errCleanAborted
	}
	if err := p.ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", errCleanAborted, err)
	}
	if p.o.Throttle != nil && n > 0 {
		if err := p.o.Throttle(p.ctx, n); err != nil {
			return fmt.Errorf("%w: %w", errCleanAborted, err)
		}
	}
	return nil
}

func (p *pass) mapKeys(v sealedView) error {
	return eachBatch(v.s, v.size, func(h batch.Header, raw []byte) error {
		p.res.BytesRead += int64(len(raw))
		if err := p.check(len(raw)); err != nil {
			return err
		}
		if h.Control() || p.aborted(&h) {
			return nil
		}
		return batch.Records(&h, raw, func(r *batch.Record) error {
			if r.Key != nil {
				p.latest[string(r.Key)] = h.BaseOffset + int64(r.OffsetDelta)
			}
			return nil
		})
	})
}

// aborted reports a data batch of an aborted transaction.
func (p *pass) aborted(h *batch.Header) bool {
	return p.o.Aborted != nil && h.Transactional() && !h.Control() && p.o.Aborted(h)
}

// keep decides whether the record at off stays.
func (p *pass) keep(r *batch.Record, off int64) bool {
	if r.Key == nil {
		return false
	}
	if latest, ok := p.latest[string(r.Key)]; ok && off < latest {
		return false
	}
	if r.Value == nil {
		return !p.expired(off)
	}
	return true
}

// expired reports whether a tombstone or an empty transaction's marker at
// off has outlived delete.retention.ms since the pass that first cleaned
// it. When it has not, the time it will is noted in p.due, so that a
// later pass comes back for it.
func (p *pass) expired(off int64) bool {
	at, cleaned := firstCleanedAt(p.marks, off)
	if !cleaned || off >= p.firstDirty {
		at = p.o.Now.UnixMilli() // cleaned for the first time by this pass
	}
	due := at + p.o.DeleteRetention.Milliseconds()
	if cleaned && off < p.firstDirty && p.o.Now.UnixMilli() >= due {
		return true
	}
	if p.due == 0 || due < p.due {
		p.due = max(due, 1)
	}
	return false
}

// dropMarker decides whether the transaction marker h goes (see the
// package comment on transactions) and starts its producer's next
// transaction.
func (p *pass) dropMarker(h *batch.Header) bool {
	pid := h.ProducerID
	left := p.txnLeft[pid]
	delete(p.txnLeft, pid)
	if pid < 0 || left || p.lastAny[pid] == h.BaseOffset {
		return false
	}
	return p.expired(h.BaseOffset)
}

// cleanGroup rewrites one group of segments into one and swaps it in.
func (p *pass) cleanGroup(g []sealedView) error {
	l := p.l
	base := g[0].s.base
	final, _, _ := segPaths(l.dir, base)
	tmp := final + cleanedSuffix
	if err := removeIfPresent(l.fs, tmp); err != nil {
		return fmt.Errorf("storage: compaction: remove %s: %w", tmp, err)
	}
	f, err := l.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("storage: compaction: create %s: %w", tmp, err)
	}
	ns := newSegment(l.dir, base, f)
	committed := false
	defer func() {
		if !committed {
			ns.release()
			_ = removeIfPresent(l.fs, tmp)
		}
	}()
	w := &segWriter{p: p, ns: ns, interval: int64(l.cfg.IndexInterval)}
	changed := len(g) > 1
	for _, v := range g {
		err := eachBatch(v.s, v.size, func(h batch.Header, raw []byte) error {
			p.res.BytesRead += int64(len(raw))
			if err := p.check(len(raw)); err != nil {
				return err
			}
			c, err := w.batch(h, raw)
			changed = changed || c
			return err
		})
		if err != nil {
			return err
		}
	}
	if !changed {
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	if ns.next > g[len(g)-1].next {
		return fmt.Errorf("storage: compaction of %s ends at offset %d, past %d", final, ns.next, g[len(g)-1].next)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("storage: compaction: sync %s: %w", tmp, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("storage: compaction: sync directory: %w", err)
	}
	bases := make([]int64, len(g))
	for i, v := range g {
		bases[i] = v.s.base
	}
	manifest := filepath.Join(l.dir, cleanSwapName)
	if err := vfs.WriteFileAtomic(l.fs, manifest, encodeSwap(bases)); err != nil {
		if errors.Is(err, vfs.ErrNotDurable) {
			// The manifest may or may not be durable: Open will tell.
			// This log must not start another swap before then.
			l.cleanBroken = fmt.Errorf("storage: compaction swap of %s left for recovery: %w", final, err)
			return l.cleanBroken
		}
		return fmt.Errorf("storage: compaction: %w", err)
	}
	// Committed: publish the cleaned segment in place of the group.
	committed = true
	if err := l.replaceSegments(g, ns); err != nil {
		l.cleanBroken = err
		return err
	}
	p.res.SegmentsReplaced += len(g)
	p.res.SegmentsWritten++
	if err := finishSwap(l.fs, l.dir, bases, ns); err != nil {
		l.cleanBroken = fmt.Errorf("storage: compaction swap of %s left for recovery: %w", final, err)
		return l.cleanBroken
	}
	return nil
}

// replaceSegments swaps the group's segments for ns in the list. The
// replaced segments keep the log's reference until the next pass.
func (l *Log) replaceSegments(g []sealedView, ns *segment) error {
	l.mu.Lock()
	i := slices.Index(l.segs, g[0].s)
	ok := i >= 0 && i+len(g) < len(l.segs)
	for j := 0; ok && j < len(g); j++ {
		ok = l.segs[i+j] == g[j].s
	}
	if ok {
		l.segs = slices.Concat(l.segs[:i:i], []*segment{ns}, l.segs[i+len(g):])
	}
	l.mu.Unlock()
	if !ok {
		return fmt.Errorf("storage: compaction: segments of %s changed during the pass", ns.path)
	}
	for _, v := range g {
		l.retired = append(l.retired, retiredSegment{s: v.s, at: time.Now()})
	}
	return nil
}

// RetireDelay is how long a segment replaced by compaction stays open
// for readers that took a Slice of it before the swap (a fetch between
// Read and WriteTo). The caller holds cleanMu.
const RetireDelay = time.Minute

// retiredSegment is a replaced segment kept open for earlier readers.
type retiredSegment struct {
	s  *segment
	at time.Time
}

// releaseRetired drops the log's reference to segments replaced at least
// RetireDelay before now. The caller holds cleanMu.
func (l *Log) releaseRetired(now time.Time) {
	keep := l.retired[:0]
	for _, r := range l.retired {
		if now.Sub(r.at) >= RetireDelay {
			r.s.release()
		} else {
			keep = append(keep, r)
		}
	}
	l.retired = keep
}

// segWriter builds a cleaned segment.
type segWriter struct {
	p        *pass
	ns       *segment
	interval int64
	out      []byte // bytes not yet written to the file
	pos      int64  // file position of out[0]
	dropped  bool   // the last data batch went whole
}

// batch handles one batch of an old segment; changed reports that its
// bytes differ from the original.
func (w *segWriter) batch(h batch.Header, raw []byte) (changed bool, err error) {
	if h.Control() {
		if w.p.dropMarker(&h) {
			return true, nil // its offset becomes a gap
		}
		return false, w.emit(raw)
	}
	changed, err = w.dataBatch(h, raw)
	if err == nil && !w.dropped && h.Transactional() {
		// Whatever stays of this batch (records, or the emptied batch
		// kept for its producer's sake) keeps its transaction's marker.
		w.p.txnLeft[h.ProducerID] = true
	}
	return changed, err
}

// dataBatch handles a data batch; it sets w.dropped when the batch went
// whole.
func (w *segWriter) dataBatch(h batch.Header, raw []byte) (changed bool, err error) {
	w.dropped = false
	aborted := w.p.aborted(&h)
	total, kept := 0, 0
	if err := batch.Records(&h, raw, func(r *batch.Record) error {
		total++
		if !aborted && w.p.keep(r, h.BaseOffset+int64(r.OffsetDelta)) {
			kept++
		}
		return nil
	}); err != nil {
		return false, fmt.Errorf("storage: compaction: batch at offset %d: %w", h.BaseOffset, err)
	}
	w.p.res.RecordsRemoved += int64(total - kept)
	switch {
	case kept == total:
		return false, w.emit(raw)
	case kept == 0 && !(h.ProducerID >= 0 && w.p.lastOfPID[h.ProducerID] == h.BaseOffset):
		w.dropped = true
		return true, nil // dropped whole: its offsets become a gap
	}
	nb, err := batch.Rewrite(nil, &h, raw, func(r *batch.Record) bool {
		return !aborted && w.p.keep(r, h.BaseOffset+int64(r.OffsetDelta))
	})
	if err != nil {
		return true, fmt.Errorf("storage: compaction: rewrite batch at offset %d: %w", h.BaseOffset, err)
	}
	return true, w.emit(nb)
}

func (w *segWriter) emit(b []byte) error {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return err
	}
	if h.BaseOffset < w.ns.next {
		return fmt.Errorf("storage: compaction: batch at offset %d where %d was expected", h.BaseOffset, w.ns.next)
	}
	w.ns.observe(&h, w.pos+int64(len(w.out)), w.interval)
	w.out = append(w.out, b...)
	if len(w.out) >= 1<<20 {
		return w.flush()
	}
	return nil
}

func (w *segWriter) flush() error {
	if len(w.out) == 0 {
		return nil
	}
	if err := w.p.check(len(w.out)); err != nil {
		return err
	}
	if n, err := w.ns.file.Write(w.out); err != nil || n != len(w.out) {
		if err == nil {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(w.out))
		}
		return fmt.Errorf("storage: compaction: write %s: %w", w.ns.path+cleanedSuffix, err)
	}
	w.p.res.BytesWritten += int64(len(w.out))
	w.pos += int64(len(w.out))
	w.out = w.out[:0]
	return nil
}
