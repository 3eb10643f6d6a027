package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/vfs"
)

// Errors.
var (
	// ErrClosed: the WAL was closed.
	ErrClosed = errors.New("wal: closed")
	// ErrTooLarge: an entry larger than a segment can hold.
	ErrTooLarge = errors.New("wal: entry larger than a segment")
)

// Options configure a WAL. Zero values take the defaults noted.
type Options struct {
	FS  vfs.FS
	Dir string // the WAL's directory, <data>/wal
	// SegmentBytes is the length of each segment file; default 32 MiB.
	SegmentBytes int64
	// Logger receives the WAL's log lines; default: discard.
	Logger *slog.Logger
	// MaxBytes bounds the sealed segments the WAL keeps before it asks
	// partitions to checkpoint (Behind), however many partitions write;
	// default 512 MiB. The WAL also keeps at most an eighth of the
	// filesystem's free space, and at least two sealed segments.
	MaxBytes int64
}

// DefaultSegmentBytes is the default Options.SegmentBytes.
const DefaultSegmentBytes = 32 << 20

// DefaultMaxBytes is the default Options.MaxBytes.
const DefaultMaxBytes = 512 << 20

// Pos is a position in the WAL: the number of bytes appended before and
// including an entry, over the WAL's life in this process.
type Pos uint64

// meta is what the WAL keeps of an entry between Append and its write.
type meta struct {
	key   Key
	end   int64 // data: the offset after its last batch; truncate: the new log end
	size  int   // encoded bytes
	trunc bool
}

// seg is a segment file the WAL wrote to (or writes to: the last one).
type seg struct {
	seq    uint64
	path   string
	file   vfs.File      // open while the segment is active; nil once sealed (leader only)
	size   int64         // bytes of entries written (leader only, while active)
	sealed bool          // guarded by WAL.mu: no more entries go here
	ends   map[Key]int64 // guarded by WAL.mu: per key, the end of its entries here not yet checkpointed
	keys   int           // guarded by WAL.mu: distinct keys with entries written here
}

// round is one write and fdatasync of everything appended before it
// started.
type round struct {
	target Pos
	done   chan struct{} // closed when the round finished
}

// failRange is a range of positions whose round failed: (from, to].
type failRange struct {
	from, to Pos
	err      error
}

// prepared is a segment file made ready by the preparer, or why it could
// not make one.
type prepared struct {
	seq  uint64
	path string
	file vfs.File
	err  error
}

// WAL is a write-ahead log shared by many partition logs.
//
// Goroutines: the first Append starts the preparer goroutine, owned by
// the WAL, which keeps one zeroed (or recycled) segment file ready, and
// the flusher goroutine, which leads rounds for asynchronous syncs
// (SyncAsync) and calls their functions; Close stops both and waits for
// them. Rounds also run on the goroutines calling Sync: one leads at a
// time, the others wait for its round.
//
// Lock order: docs/lockorder.md ("wal").
type WAL struct {
	fs       vfs.FS
	dir      string
	segBytes int64
	maxBytes int64
	log      *slog.Logger

	mu        sync.Mutex // guards the fields below
	buf       []byte     // entries appended since the running round took the buffer
	metas     []meta     // one per entry in buf
	spare     []byte     // the buffer the last round wrote, for reuse
	spareMeta []meta
	appended  Pos           // position of the last entry appended
	done      Pos           // every round up to here has finished (well or not)
	running   *round        // the round being written and synced; nil when none
	fails     []failRange   // recent failed rounds, oldest first
	ckpt      map[Key]int64 // per key, its log is fsynced below this offset
	segs      []*seg        // segments with entries that may be needed, oldest first; the last is active
	closed    bool
	stats     Stats          // rounds so far, for metrics
	failed    map[Key]uint64 // per key, the failed rounds that carried its entries
	keep      int            // sealed segments held before Behind asks for checkpoints (see keepFor)

	rmMu sync.Mutex // serializes the removal of segment files (taken before mu)

	// Round leader state: only the goroutine leading a round uses it.
	active    *seg      // segment being written; nil before the first round or after a failure
	heldAfter time.Time // syncRound syncs with a blocking system call until then (a recent slow fdatasync)
	held      bool      // the round's last fdatasync held its processor
	lastErr   error
	recycleMu sync.Mutex // guards recycle
	recycle   []string   // sealed segment files no longer needed, for the preparer to reuse (at most keep)

	prepC    chan prepared
	stop     chan struct{}
	prepDone chan struct{}
	stopOnce sync.Once
	firstSeq uint64 // the sequence number of this run's first segment
	// soloKey is the one key whose entries the last round wrote, when
	// it wrote only one key's (solo); guarded by mu.
	soloKey Key
	solo    bool
	// bufKey is the key of the first entry in buf, and bufMixed says
	// that buf also holds another key's entries (guarded by mu): a key
	// whose last round was solo is not Alone while another key's
	// entries wait for the next round, which will run anyway.
	bufKey   Key
	bufMixed bool
	prepping bool // guarded by mu: the preparer and the flusher were started (at the first entry)

	// Asynchronous syncs (SyncAsync): the flusher goroutine leads rounds
	// for them and calls their functions once a round covers them.
	async     []asyncSync   // guarded by mu: registered, not yet called, in position order
	kick      chan struct{} // (buffered 1) tells the flusher that async grew
	flushDone chan struct{} // closed when the flusher returns
}

// asyncSync is a SyncAsync waiting for its round.
type asyncSync struct {
	pos  Pos
	done func(error)
}

// Open opens (creating if needed) the WAL in o.Dir and reads the
// segments a previous run left. The caller replays them into the
// partition logs (Replay.Apply), then calls Replay.Done, before handing
// the WAL to appenders.
func Open(o Options) (*WAL, *Replay, error) {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if err := o.FS.MkdirAll(o.Dir); err != nil {
		return nil, nil, fmt.Errorf("wal: create %s: %w", o.Dir, err)
	}
	rp, err := readAll(o.FS, o.Dir, o.Logger)
	if err != nil {
		return nil, nil, err
	}
	w := &WAL{
		fs:        o.FS,
		dir:       o.Dir,
		segBytes:  o.SegmentBytes,
		maxBytes:  o.MaxBytes,
		log:       o.Logger,
		keep:      minKeepSealed,
		ckpt:      map[Key]int64{},
		failed:    map[Key]uint64{},
		prepC:     make(chan prepared),
		stop:      make(chan struct{}),
		prepDone:  make(chan struct{}),
		kick:      make(chan struct{}, 1),
		flushDone: make(chan struct{}),
	}
	w.firstSeq = rp.nextSeq
	rp.w, rp.keep = w, minKeepSealed
	return w, rp, nil
}

// segPath is the path of segment seq.
func (w *WAL) segPath(seq uint64) string {
	return filepath.Join(w.dir, fmt.Sprintf("%020d%s", seq, segSuffix))
}

// segSuffix is the file name suffix of a segment; a retired segment
// kept for reuse (a spare) has spareSuffix after it.
const (
	segSuffix   = ".wal"
	spareSuffix = ".spare"
)

// Append copies data, whole RecordBatches with their offsets assigned,
// from first up to end, into the WAL's buffer as an entry of key and
// returns its position. It does not wait: Sync(pos) makes it durable.
func (w *WAL) Append(k Key, first, end int64, data []byte) (Pos, error) {
	return w.add(kindData, k, first, end, data)
}

// Truncate appends an entry saying that k's log now ends at end: entries
// of k before it are stale past end. A partition writes one after it
// healed (its log cut back and refilled) and syncs it before it takes
// new appends.
func (w *WAL) Truncate(k Key, end int64) (Pos, error) {
	return w.add(kindTruncate, k, end, end, nil)
}

func (w *WAL) add(kind byte, k Key, off, end int64, data []byte) (Pos, error) {
	size := entryHead + len(data)
	if int64(size) > w.segBytes {
		return 0, fmt.Errorf("%w: %d bytes", ErrTooLarge, size)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, ErrClosed
	}
	if !w.prepping {
		// A WAL nobody writes to (a broker without produce) creates no
		// segment file.
		w.prepping = true
		go w.prepare(w.firstSeq)
		go w.flusher()
	}
	switch {
	case len(w.metas) == 0:
		w.bufKey, w.bufMixed = k, false
	case k != w.bufKey:
		w.bufMixed = true
	}
	w.buf = appendEntry(w.buf, kind, k, off, data)
	w.metas = append(w.metas, meta{key: k, end: end, size: size, trunc: kind == kindTruncate})
	w.appended += Pos(size)
	return w.appended, nil
}

// Sync returns once an fdatasync covering pos finished: nil if pos is
// durable, the error of the round that failed to make it so. When no
// round is running the caller leads one, which writes and syncs every
// entry appended so far by anyone.
func (w *WAL) Sync(pos Pos) error {
	w.mu.Lock()
	for {
		if pos <= w.done {
			err := w.failedLocked(pos)
			w.mu.Unlock()
			return err
		}
		if r := w.running; r != nil {
			w.mu.Unlock()
			<-r.done
			w.mu.Lock()
			continue
		}
		if w.closed {
			w.mu.Unlock()
			return ErrClosed
		}
		w.lead()
	}
}

// SyncAsync registers done to be called, once, with what Sync(pos)
// would return, without waiting: the flusher goroutine leads rounds for
// registered positions and calls done on its own goroutine once a round
// covers pos (possibly before SyncAsync returns, on the flusher). done
// must not block, nor call Sync; it may call Append and SyncAsync.
// After Close, done is called at once with ErrClosed.
func (w *WAL) SyncAsync(pos Pos, done func(error)) {
	w.mu.Lock()
	if w.closed || !w.prepping {
		// Closed, or nothing was ever appended (pos is 0): no flusher.
		err := ErrClosed
		if !w.closed {
			err = nil
		}
		w.mu.Unlock()
		done(err)
		return
	}
	w.async = append(w.async, asyncSync{pos: pos, done: done})
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default: // already kicked
	}
}

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
	buf, metas := w.buf, w.metas
	w.buf, w.metas = w.spare[:0], w.spareMeta[:0]
	from := w.done
	w.mu.Unlock()

	began := time.Now()
	w.held = false
	err := w.flush(buf, metas)
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
	if len(buf) > 0 {
		w.stats.Rounds++
		w.stats.Entries += int64(len(metas))
		w.stats.Bytes += int64(len(buf))
		w.stats.RoundTime += took
		if w.held {
			w.stats.HeldRounds++
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

// flush writes buf (entries described by metas) to the active segment,
// rotating to a prepared one whenever the next entry does not fit, and
// syncs. A failure abandons the active segment: the next round starts a
// fresh one, so that nothing follows a bad entry inside a segment.
func (w *WAL) flush(buf []byte, metas []meta) error {
	if len(buf) == 0 {
		return nil
	}
	start := 0 // first byte of buf not yet written
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
			if _, err := a.file.WriteAt(buf[start:start+n], a.size); err != nil {
				return w.abandon(fmt.Errorf("wal: write %s: %w", a.path, err))
			}
			a.size += int64(n)
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
		if err := w.syncRound(a.file, len(buf)); err != nil {
			return w.abandon(fmt.Errorf("wal: sync %s: %w", a.path, err))
		}
	}
	return nil
}

// Small rounds hold their processor through the fdatasync (see syncRound).
const (
	// heldMaxBytes is the largest round whose fdatasync holds its
	// processor: larger rounds come from throughput workloads, whose
	// processors are worth more than the hand-off saves.
	heldMaxBytes = 16 << 10
	// heldMaxWait: a round's fdatasync slower than this (a disk
	// stalling) makes the next rounds' fdatasyncs blocking system calls
	// again for heldCooloff. It is well above what a busy machine makes
	// of a healthy disk's fdatasync (a few milliseconds; tens when other
	// processes keep both cores busy).
	heldMaxWait = 100 * time.Millisecond
	heldCooloff = 10 * time.Second
)

// syncRound fdatasyncs the active segment after a round wrote n bytes
// into it. With at least two processors (GOMAXPROCS), a small round
// (heldMaxBytes) syncs with vfs.SyncHeld: the leader keeps its processor
// while the disk syncs, instead of the runtime handing the processor to
// another thread and its monitor thread polling every 20 µs while the
// call lasts (with rounds back to back, the monitor then never backs off:
// a context switch per poll). Rounds are one at a time, so at most one
// processor is held; the others run everything else. The cost of holding
// it: a stop-the-world pause (the garbage collector's) waits for the
// fdatasync to return. So once an fdatasync takes longer than
// heldMaxWait, rounds sync with a blocking system call for heldCooloff,
// and a disk that stalls stalls the writers only. Durability is the
// same either way: the round is released only when the fdatasync
// returns. Leader only.
func (w *WAL) syncRound(f vfs.File, n int) error {
	began := time.Now()
	var err error
	if w.held = w.mayHold(n, began); w.held {
		err = vfs.SyncHeld(f)
	} else {
		err = f.Sync()
	}
	w.synced(began, time.Now())
	return err
}

// mayHold reports whether a round of n bytes syncing at now holds its
// processor (see syncRound). Leader only.
func (w *WAL) mayHold(n int, now time.Time) bool {
	return n <= heldMaxBytes && !now.Before(w.heldAfter) && runtime.GOMAXPROCS(0) >= 2
}

// synced notes how long a round's fdatasync took: a slow one stops
// mayHold for heldCooloff. Leader only.
func (w *WAL) synced(began, end time.Time) {
	if end.Sub(began) > heldMaxWait {
		w.heldAfter = end.Add(heldCooloff)
	}
}

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
		s := &seg{seq: p.seq, path: p.path, file: p.file, ends: map[Key]int64{}}
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
	_ = a.file.Close() // synced: nothing to lose
	a.file = nil
	w.mu.Lock()
	keys := a.keys
	w.mu.Unlock()
	keep := w.keepFor(keys)
	w.mu.Lock()
	a.sealed = true
	w.keep = keep
	w.mu.Unlock()
	w.collect()
}

// abandon gives up the active segment after a failed write or sync and
// returns err. The next round writes to a fresh segment.
func (w *WAL) abandon(err error) error {
	w.log.Error("wal: write failed; the partitions of this group commit fail and heal; the WAL goes on in a fresh segment", "err", err)
	if a := w.active; a != nil {
		w.active = nil
		_ = a.file.Close()
		a.file = nil
		w.mu.Lock()
		a.sealed = true
		w.mu.Unlock()
	}
	w.collect()
	return err
}

// Checkpoint tells the WAL that k's log is fsynced below end: its entries
// below end are no longer needed. Segments every key of which
// checkpointed past its entries are removed (or kept for reuse).
func (w *WAL) Checkpoint(k Key, end int64) {
	w.mu.Lock()
	if c, ok := w.ckpt[k]; ok && c >= end {
		w.mu.Unlock()
		return
	}
	w.ckpt[k] = end
	free := false
	for _, s := range w.segs {
		if e, ok := s.ends[k]; ok && e <= end {
			delete(s.ends, k)
			free = free || len(s.ends) == 0
		}
	}
	w.mu.Unlock()
	if free {
		w.collect()
	}
}

// Checkpoints. A checkpoint costs every partition with entries in the
// sealed segments one fdatasync of its own segment file; the more
// partitions write, the more WAL the checkpoints should cover, so that
// their fsyncs stay a small share of the writes. The WAL lets sealed
// segments accumulate until they hold about ckptBytesPerKey of WAL per
// partition writing (at least minKeepSealed segments), within a budget:
// Options.MaxBytes and an eighth of the filesystem's free space.
const (
	minKeepSealed   = 2
	ckptBytesPerKey = 256 << 10
)

// keepFor returns how many sealed segments to hold before checkpoints
// when keys partitions write to each segment. It reads the filesystem's
// free space (once per sealed segment).
func (w *WAL) keepFor(keys int) int {
	budget := w.maxBytes
	if st, ok := w.fs.(vfs.Statter); ok {
		if u, err := st.Usage(w.dir); err == nil {
			budget = min(budget, int64(u.Free/8))
		}
	}
	want := (int64(keys)*ckptBytesPerKey + w.segBytes - 1) / w.segBytes
	return int(max(min(want, budget/w.segBytes), minKeepSealed))
}

// Behind reports whether k should checkpoint now: it has entries in a
// sealed segment and the WAL holds as many sealed segments as it keeps
// (keepFor).
func (w *WAL) Behind(k Key) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	sealed := 0
	has := false
	for _, s := range w.segs {
		if !s.sealed {
			break
		}
		sealed++
		if _, ok := s.ends[k]; ok {
			has = true
		}
	}
	return has && sealed >= w.keep
}

// Forget drops k (its log was deleted): none of its entries are needed.
func (w *WAL) Forget(k Key) {
	w.Checkpoint(k, math.MaxInt64)
	w.mu.Lock()
	delete(w.ckpt, k)
	w.mu.Unlock()
}

// collect removes the oldest sealed segments that no key needs any more,
// oldest first and each removal synced before the next, so that after a
// crash the segments left are always a suffix of the WAL (a stale entry
// never comes back without the truncate entry that follows it). Their
// files go to the preparer for reuse when it has none.
func (w *WAL) collect() {
	w.rmMu.Lock()
	defer w.rmMu.Unlock()
	for {
		w.mu.Lock()
		if len(w.segs) == 0 || !w.segs[0].sealed || len(w.segs[0].ends) > 0 {
			w.mu.Unlock()
			return
		}
		s := w.segs[0]
		w.mu.Unlock()
		if !w.retire(s.path) {
			return
		}
		w.mu.Lock()
		w.segs = w.segs[1:]
		w.mu.Unlock()
	}
}

// retire removes a segment file no longer needed, or renames it for
// reuse; false if that failed (it is retried at the next collect).
func (w *WAL) retire(path string) bool {
	// As many spares as the WAL keeps sealed segments: the segments a
	// checkpoint retires at once are reused by the next ones instead of
	// being zeroed again, and the files stay within the WAL's budget.
	w.mu.Lock()
	limit := w.keep
	w.mu.Unlock()
	w.recycleMu.Lock()
	keep := len(w.recycle) < limit
	w.recycleMu.Unlock()
	if keep && w.fullSize(path) {
		// Renamed out of the sequence: replay ignores it, the preparer
		// renames it back in under a new number.
		spare := path + spareSuffix
		if err := w.fs.Rename(path, spare); err == nil {
			if err := w.fs.SyncDir(w.dir); err != nil {
				w.log.Warn("wal: sync directory after retiring a segment", "err", err)
				return false
			}
			w.recycleMu.Lock()
			w.recycle = append(w.recycle, spare)
			w.recycleMu.Unlock()
			return true
		}
	}
	// Gone already: an earlier attempt renamed it aside and then failed
	// to sync the directory; the sync below makes that rename durable.
	if err := w.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.log.Warn("wal: remove a segment no longer needed", "path", path, "err", err)
		return false
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		w.log.Warn("wal: sync directory after removing a segment", "err", err)
		return false
	}
	return true
}

// fullSize reports whether a segment file was zeroed to full length (a
// growing one is not worth reusing).
func (w *WAL) fullSize(path string) bool {
	fi, err := w.fs.Stat(path)
	return err == nil && fi.Size() == w.segBytes
}

// prepare is the preparer goroutine: it keeps one segment file ready,
// full length and zeroed (or a reused one, whose old entries fail their
// CRC under the new sequence number), synced with its directory entry.
// It stops when stop is closed.
func (w *WAL) prepare(seq uint64) {
	defer close(w.prepDone)
	for {
		// An attempt runs ahead of demand; a failed one is handed over
		// too, and the next attempt starts once it was taken (rotate
		// then asks again, so a stale failure fails no round).
		p := w.makeSegment(seq)
		if p.err != nil {
			w.log.Warn("wal: cannot prepare a segment", "seq", seq, "err", p.err)
		}
		select {
		case w.prepC <- p:
		case <-w.stop:
			if p.file != nil {
				_ = p.file.Close()
			}
			return
		}
		if p.err == nil {
			seq++
		}
	}
}

// zeros is what makeSegment writes (read only).
var zeros = make([]byte, 1<<20)

// makeSegment makes segment seq ready.
func (w *WAL) makeSegment(seq uint64) prepared {
	path := w.segPath(seq)
	w.recycleMu.Lock()
	var spare string
	if n := len(w.recycle); n > 0 {
		spare = w.recycle[n-1]
		w.recycle = w.recycle[:n-1]
	}
	w.recycleMu.Unlock()
	if spare != "" {
		if err := w.fs.Rename(spare, path); err == nil {
			if f, err := w.fs.OpenRW(path); err == nil {
				if size, err := f.Size(); err == nil && size == w.segBytes {
					if err := w.fs.SyncDir(w.dir); err == nil {
						w.mu.Lock()
						w.stats.SegmentsReused++
						w.mu.Unlock()
						return prepared{seq: seq, path: path, file: f}
					}
				}
				_ = f.Close()
			}
		}
		_ = w.fs.Remove(path)
		_ = w.fs.Remove(spare)
	}
	_ = w.fs.Remove(path) // left by an earlier failed attempt
	f, err := w.fs.Create(path)
	if err != nil {
		return prepared{err: err}
	}
	fail := func(err error) prepared {
		_ = f.Close()
		_ = w.fs.Remove(path)
		return prepared{err: err}
	}
	zeroed := false
	if w.roomToZero() {
		var err error
		if zeroed, err = w.zero(f, path); err != nil {
			return fail(err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		return fail(err)
	}
	if zeroed {
		w.mu.Lock()
		w.stats.SegmentsZeroed++
		w.mu.Unlock()
	}
	return prepared{seq: seq, path: path, file: f}
}

// zero fills the new segment f (at path) with zeros to full length:
// directly when the filesystem can, else through the page cache. If the
// zeros do not fit after all, it leaves the file empty, a segment that
// grows as it is written (its fsyncs commit its size too), and reports
// false; err is a failure to empty it.
func (w *WAL) zero(f vfs.File, path string) (bool, error) {
	err := w.zeroDirect(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, vfs.ErrNoDirect) {
		for off := int64(0); off < w.segBytes; {
			n := min(w.segBytes-off, int64(len(zeros)))
			if _, err = f.WriteAt(zeros[:n], off); err != nil {
				break
			}
			off += n
		}
		if err == nil {
			return true, nil
		}
	}
	if err := f.Truncate(0); err != nil {
		return false, err
	}
	return false, nil
}

// zeroDirect writes the zeros of the new segment at path bypassing the
// page cache, when the filesystem can (vfs.DirectZeroer): the preparer
// then spends no CPU copying 32 MiB of zeros into cached pages, and its
// fsync has no dirty pages to write back. vfs.ErrNoDirect when it
// cannot; the caller writes the zeros through the page cache.
func (w *WAL) zeroDirect(path string) error {
	dz, ok := w.fs.(vfs.DirectZeroer)
	if !ok {
		return vfs.ErrNoDirect
	}
	return dz.ZeroDirect(path, w.segBytes)
}

// roomToZero reports whether the filesystem has room for a zeroed
// segment with plenty to spare. On a nearly full disk a segment is not
// zeroed ahead: it grows as it is written, like a partition's, and the
// disk guard sees the WAL's bytes as it sees the logs'.
func (w *WAL) roomToZero() bool {
	st, ok := w.fs.(vfs.Statter)
	if !ok {
		return true
	}
	u, err := st.Usage(w.dir)
	return err != nil || u.Free >= uint64(4*w.segBytes)
}

// Close stops the preparer and closes the active segment. Appended
// entries not yet synced are dropped: callers sync (or fsync their own
// logs) before. Idempotent.
func (w *WAL) Close() error {
	w.mu.Lock()
	w.closed = true
	for w.running != nil {
		r := w.running
		w.mu.Unlock()
		<-r.done
		w.mu.Lock()
	}
	w.mu.Unlock()
	w.stopOnce.Do(func() { close(w.stop) })
	w.mu.Lock()
	prepping := w.prepping
	w.mu.Unlock()
	if prepping {
		<-w.prepDone
		<-w.flushDone
	}
	if a := w.active; a != nil {
		w.active = nil
		_ = a.file.Close()
		a.file = nil
	}
	return nil
}

// Retire closes the WAL and retires its segments, oldest first, each
// change synced before the next (see collect): a few become spares that
// the next start reuses (Replay.Done), the rest are removed. The caller
// has fsynced every log that appended to it (a clean shutdown), so
// nothing in them is needed: the next start has nothing to replay, and a
// log repaired offline (sluice repair) is not refilled from entries of
// before.
func (w *WAL) Retire() error {
	if err := w.Close(); err != nil {
		return err
	}
	rp, err := listSegments(w.fs, w.dir)
	if err != nil {
		return err
	}
	// As many as a start keeps (not the budget many partitions grew
	// keep to): a stopped broker holds little disk for them.
	rp.w, rp.keep = w, minKeepSealed
	err = rp.Done()
	w.recycleMu.Lock()
	w.recycle = nil // closed: the next start finds the spares on disk
	w.recycleMu.Unlock()
	return err
}

// Stats counts the WAL's rounds: each writes the entries appended since
// the previous one and fdatasyncs them once, for every partition.
type Stats struct {
	Rounds       int64         // rounds that wrote something
	FailedRounds int64         // of those, rounds whose write or fsync failed
	HeldRounds   int64         // of those, rounds whose fdatasync held its processor (see syncRound)
	Entries      int64         // entries written (appends and truncates)
	Bytes        int64         // entry bytes written, headers included
	RoundTime    time.Duration // total time spent writing and syncing rounds

	// Segment files the preparer made ready: reused (a retired segment
	// renamed in, nothing written) or created and zeroed to full length.
	SegmentsReused int64
	SegmentsZeroed int64
}

// Stats returns the counts so far.
func (w *WAL) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Size is the bytes of segment files the WAL holds (for metrics and tests).
func (w *WAL) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int64(len(w.segs)) * w.segBytes
}

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

// Behind reports whether the key should checkpoint now (see WAL.Behind).
func (h *Handle) Behind() bool { return h.w.Behind(h.k) }

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
