package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
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
	seq  uint64
	path string
	file vfs.File // open while the segment is active; nil once sealed (leader only)
	// direct is the segment's descriptor for direct writes (vfs.DirectOpener),
	// open while it is active, when the file was made full length and the
	// filesystem allows them; nil otherwise (leader only). part holds the
	// segment's bytes from the start of the block holding size up to size
	// (size%vfs.DirectAlign of them), which the next direct write
	// rewrites first.
	direct vfs.File
	part   []byte
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
	seq    uint64
	path   string
	file   vfs.File
	direct vfs.File // for direct writes, when the file is full length and the filesystem allows them
	err    error
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
	buf       []byte     // entries appended since the running round took the buffer, after bufHead bytes kept for the round's first direct write (see reserve)
	bufHead   int        // bytes at the start of buf before its first entry
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
	notify    map[Key]func() // per key, its OnBehind function

	rmMu sync.Mutex // serializes the removal of segment files (taken before mu)

	// Round leader state: only the goroutine leading a round uses it.
	active    *seg  // segment being written; nil before the first round or after a failure
	held      bool  // the round's last fdatasync held its processor
	holdWrite bool  // the round's direct writes hold their processor (see writeDirect)
	heldW     int64 // direct writes of the round that held their processor
	inPlace   int64 // direct writes of the round made from its own buffer (writeInPlace)
	buffered  bool  // the round wrote entries through the page cache
	lastErr   error
	dbuf      []byte     // aligned buffer of direct writes (writeDirect)
	recycleMu sync.Mutex // guards recycle
	recycle   []string   // sealed segment files no longer needed, for the preparer to reuse (at most keep)

	prepC    chan prepared
	stop     chan struct{}
	prepDone chan struct{}
	// firstReady is closed by the preparer once its first attempt is
	// made (Start waits for it).
	firstReady chan struct{}
	stopOnce   sync.Once
	firstSeq   uint64 // the sequence number of this run's first segment
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
	prepping bool // guarded by mu: the preparer and the flusher were started (by Start or at the first entry)

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
	if err := vfs.MkdirAllDurable(o.FS, o.Dir); err != nil {
		return nil, nil, fmt.Errorf("wal: create %s: %w", o.Dir, err)
	}
	rp, err := readAll(o.FS, o.Dir, o.Logger)
	if err != nil {
		return nil, nil, err
	}
	w := &WAL{
		fs:         o.FS,
		dir:        o.Dir,
		segBytes:   o.SegmentBytes,
		maxBytes:   o.MaxBytes,
		log:        o.Logger,
		keep:       minKeepSealed,
		ckpt:       map[Key]int64{},
		notify:     map[Key]func(){},
		failed:     map[Key]uint64{},
		prepC:      make(chan prepared),
		stop:       make(chan struct{}),
		prepDone:   make(chan struct{}),
		firstReady: make(chan struct{}),
		kick:       make(chan struct{}, 1),
		flushDone:  make(chan struct{}),
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
// Each batch's CRC32C must match its bytes (the broker validates a
// produced batch; a batch it makes is encoded with its CRC): the entry's
// own CRC covers the batches' headers and relies on theirs for the rest,
// and replay takes a batch that does not match for a torn write.
func (w *WAL) Append(k Key, first, end int64, data []byte) (Pos, error) {
	kind := byte(kindData)
	if wholeBatches(data) {
		kind = kindBatches // checksummed by the batches' own CRCs
	}
	return w.add(kind, k, first, end, data)
}

// Truncate appends an entry saying that k's log now ends at end: entries
// of k before it are stale past end. A partition writes one after it
// healed (its log cut back and refilled) and syncs it before it takes
// new appends.
func (w *WAL) Truncate(k Key, end int64) (Pos, error) {
	return w.add(kindTruncate, k, end, end, nil)
}

// Start prepares the first segment file (zeroed and synced, on the
// preparer goroutine) now rather than at the first append, and waits
// until it is ready, so that the first write after a start does not wait
// for it. It also gives the WAL its two round buffers (startBufBytes
// each, their memory touched), so that the first rounds of a fresh
// process neither grow them by copying nor fault their pages in on the
// request path. Idempotent; a closed WAL does nothing.
func (w *WAL) Start() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	if !w.prepping {
		w.startLocked()
	}
	if w.running == nil && cap(w.buf) < startBufBytes && cap(w.spare) < startBufBytes {
		buf, spare := vfs.AlignedBuffer(startBufBytes), vfs.AlignedBuffer(startBufBytes)
		clear(buf) // touched: the pages are the process's from now on
		clear(spare)
		w.buf = append(buf[:0], w.buf...)
		w.spare = spare[:0]
	}
	w.mu.Unlock()
	select {
	case <-w.firstReady:
	case <-w.stop:
	}
}

// startLocked starts the preparer and flusher goroutines. The caller
// holds mu and has seen prepping false.
func (w *WAL) startLocked() {
	w.prepping = true
	go w.prepare(w.firstSeq)
	go w.flusher()
}

// startBufBytes is the size Start gives each round buffer: rounds of a
// throughput workload over many partitions carry a few MiB.
const startBufBytes = 4 << 20

// minBufBytes is the least a round buffer is given when it must grow.
const minBufBytes = 64 << 10

// growBuf returns b's bytes in a buffer of at least need bytes of
// capacity, aligned for direct writes (vfs.AlignedBuffer), at least twice
// as large as b so that a round buffer grows, and copies, only a few times
// in a process's life.
func growBuf(b []byte, need int) []byte {
	nb := vfs.AlignedBuffer(max(need, 2*cap(b), minBufBytes))
	return append(nb[:0], b...)
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
		// segment file, unless Start was called.
		w.startLocked()
	}
	switch {
	case len(w.metas) == 0:
		w.bufKey, w.bufMixed = k, false
	case k != w.bufKey:
		w.bufMixed = true
	}
	if need := len(w.buf) + size + vfs.DirectAlign; need > cap(w.buf) {
		w.buf = growBuf(w.buf, need)
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

// Idle reports whether no round is running: a Sync now leads one at
// once rather than waiting for the running one first.
func (w *WAL) Idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running == nil
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
		a.closeFiles()
	}
	return nil
}

// Stats counts the WAL's rounds: each writes the entries appended since
// the previous one and fdatasyncs them once, for every partition.
type Stats struct {
	Rounds       int64         // rounds that wrote something
	FailedRounds int64         // of those, rounds whose write or fsync failed
	HeldRounds   int64         // of those, rounds whose fdatasync held its processor (see syncRound)
	HeldWrites   int64         // direct writes of rounds that held their processor (see writeDirect)
	DirectRounds int64         // of those, rounds whose entries were all written directly, past the page cache (see WAL.write)
	InPlace      int64         // direct writes made from the round's own buffer, its entries not copied (see writeInPlace)
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
