package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/vfs"
)

// lazyFile is the first segment file of a log made by Create: the log's
// directory and the file are made by Log.Prepare (off the request path),
// or by the first sync or truncation, not while the topic is created.
// Until then it reads as the bytes written to it so far.
//
// When the log's appends are made durable elsewhere before they are
// acknowledged (Config.WriteBehind: the broker's shared write-ahead log,
// which replays them), writes before the file exists are kept in memory
// (up to pendMax bytes). Config.OnPending is called once, when they reach
// pendNotify bytes or the logs sharing Config.Pending keep more than its
// budget, so that the caller makes the file on a goroutine of its own: a
// fresh partition's first writes then cost no mkdir or file creation on
// the request path, a partition never written makes no file at all, and
// one written a little makes its file only when the write-ahead log asks
// for it (its checkpoint syncs the log: Sync makes the file) or the log
// is closed. Without a
// write-ahead log the first write makes the file, so that a written byte
// is in the page cache as with any other file. Its directory entries
// are not synced here: Log.Sync does that once, with the first bytes it
// makes durable, unless the caller synced them (Log.DirsSynced).
type lazyFile struct {
	fs        vfs.FS
	dir, path string
	// pendMax is the most bytes kept in memory before the file is made
	// (0: none); onPending is called once, when the file is wanted
	// (pendNotify bytes kept, or budget spent). budget, if set, counts
	// the bytes kept by every log sharing it.
	pendMax   int
	onPending func()
	budget    *PendingBudget

	f atomic.Pointer[vfs.File] // set once the file is made; read without mu

	notified atomic.Bool  // onPending was called
	kept     atomic.Int64 // pend.size, for the budget's reads without mu
	gone     atomic.Bool  // closed

	mu     sync.Mutex // guards the making of the directory and file, pend, shared, held and closed
	pend   chunks     // bytes [0, pend.size) written before the file was made
	shared []*Shared  // the buffers pend keeps slices of, each held once
	held   bool       // the file must not be made now (hold)
	closed bool
}

// ErrFilesHeld is returned by what would make a new log's files while
// Log.HoldFiles holds them (its topic's directory is being moved).
var ErrFilesHeld = errors.New("the log's files are held: its directory is being moved")

// pendMax is the most bytes a new log keeps in memory until its file is
// made (lazyFile); its file is wanted (Config.OnPending) once it keeps
// pendNotify, so that the maker makes it before a write must.
const (
	pendMax    = 1 << 20
	pendNotify = 256 << 10
)

// PendingBudget bounds the bytes that the logs sharing it (Config.Pending:
// the partitions of one broker) keep in memory before their files are
// made. Past the budget the logs that started keeping bytes first ask
// for their files (Config.OnPending), oldest first, until what is left
// would be half the budget: a partition written once and then left
// alone does not hold memory that a newer one could use. Past twice the
// budget a log makes its file on the write instead of keeping the bytes.
type PendingBudget struct {
	max    int64
	used   atomic.Int64
	shared atomic.Int64 // Shared buffers charged

	mu        sync.Mutex  // guards order and compactAt
	order     []*lazyFile // logs keeping bytes, in the order they started; some since made or closed
	compactAt int         // len(order) at which started drops those
}

// NewPendingBudget returns a budget of max bytes.
func NewPendingBudget(max int64) *PendingBudget { return &PendingBudget{max: max} }

// Used returns the bytes kept now.
func (b *PendingBudget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// SharedBuffers returns how many Shared buffers logs keep slices of now.
func (b *PendingBudget) SharedBuffers() int64 {
	if b == nil {
		return 0
	}
	return b.shared.Load()
}

// add counts n more bytes kept (n < 0: released) and returns the total.
func (b *PendingBudget) add(n int) int64 {
	if b == nil || n == 0 {
		return 0
	}
	return b.used.Add(int64(n))
}

// full reports whether n more bytes would take the total past twice the
// budget.
func (b *PendingBudget) full(n int) bool {
	return b != nil && b.used.Load()+int64(n) > 2*b.max
}

// started records z, which has just kept its first bytes. The logs
// since made or closed are dropped from the order whenever it has
// doubled, so that it follows the logs keeping bytes.
func (b *PendingBudget) started(z *lazyFile) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.order) >= b.compactAt {
		live := b.order[:0]
		for _, o := range b.order {
			if o.f.Load() == nil && !o.gone.Load() {
				live = append(live, o)
			}
		}
		clear(b.order[len(live):])
		b.order = live
		b.compactAt = max(64, 2*len(live))
	}
	b.order = append(b.order, z)
}

// spend asks the oldest logs keeping bytes for their files (their
// onPending, once each) until the bytes left would be half the budget.
// It is called with no log's mu held.
func (b *PendingBudget) spend() {
	if b == nil || b.used.Load() <= b.max {
		return
	}
	var ask []*lazyFile
	b.mu.Lock()
	left := b.used.Load()
	live := b.order[:0] // the logs still keeping bytes, in order
	for i, z := range b.order {
		if left <= b.max/2 {
			live = append(live, b.order[i:]...)
			break
		}
		if z.f.Load() != nil || z.gone.Load() {
			continue
		}
		live = append(live, z)
		// Asked before (its file on its way) or asked now: its bytes
		// will be released.
		left -= z.kept.Load()
		if !z.notified.Load() {
			ask = append(ask, z)
		}
	}
	clear(b.order[len(live):])
	b.order = live
	b.mu.Unlock()
	for _, z := range ask {
		z.notify()
	}
}

// file returns the file, making it (and its directory) first if needed.
func (z *lazyFile) file() (vfs.File, error) {
	if f := z.f.Load(); f != nil {
		return *f, nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if f := z.f.Load(); f != nil {
		return *f, nil
	}
	if z.closed {
		return nil, os.ErrClosed
	}
	if z.held {
		return nil, ErrFilesHeld
	}
	if err := z.fs.MkdirAll(z.dir); err != nil {
		return nil, fmt.Errorf("create %s: %w", z.dir, err)
	}
	f, err := z.fs.Create(z.path)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", z.path, err)
	}
	// The bytes written so far go into the file before anyone can see
	// it (readers read pend until f is set).
	var off int64
	for _, c := range z.pend.list {
		if n, err := f.WriteAt(c.b, off); err != nil || n != len(c.b) {
			f.Close()
			z.fs.Remove(z.path)
			if err == nil {
				err = io.ErrShortWrite
			}
			return nil, fmt.Errorf("write segment %s: %w", z.path, err)
		}
		off += int64(len(c.b))
	}
	z.f.Store(&f)
	z.dropPend()
	return f, nil
}

// dropPend forgets the bytes kept in memory: their budget, and the holds
// on the buffers they were slices of. z.mu is held.
func (z *lazyFile) dropPend() {
	z.budget.add(-z.pend.copied)
	for _, s := range z.shared {
		s.Release()
	}
	z.shared = nil
	z.pend = chunks{}
	z.kept.Store(0)
}

// notify calls onPending the first time the file is wanted.
func (z *lazyFile) notify() {
	if z.onPending != nil && !z.notified.Load() && z.notified.CompareAndSwap(false, true) {
		z.onPending()
	}
}

// keep writes p at off into pend when the file is not made yet, p
// appends to what pend holds and stays within pendMax, and the budget is
// not spent twice over. It reports whether it did, and whether the file
// is now wanted (pendNotify bytes kept, or the budget spent). With sh
// set, p lies in sh's buffer and pend keeps p itself, holding sh, instead
// of a copy.
func (z *lazyFile) keep(p []byte, off int64, sh *Shared) (kept, want bool, err error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.f.Load() != nil || z.pendMax == 0 || off != int64(z.pend.size) || z.pend.size+len(p) > z.pendMax || z.budget.full(len(p)) {
		return false, false, nil
	}
	if z.closed {
		return false, false, os.ErrClosed
	}
	if z.pend.size == 0 && z.budget != nil {
		z.budget.started(z)
	}
	if sh != nil {
		z.pend.writeShared(p)
		if n := len(z.shared); n == 0 || z.shared[n-1] != sh {
			sh.hold(z.budget)
			z.shared = append(z.shared, sh)
		}
	} else {
		z.pend.write(p)
		z.budget.add(len(p))
	}
	z.kept.Store(int64(z.pend.size))
	return true, z.pend.size >= pendNotify, nil
}

// write is WriteAt, keeping p in memory when it can: a copy, or with sh
// set p itself (see keep).
func (z *lazyFile) write(p []byte, off int64, sh *Shared) (int, error) {
	if z.f.Load() == nil && z.pendMax > 0 {
		kept, want, err := z.keep(p, off, sh)
		if err != nil {
			return 0, err
		}
		if kept {
			if want {
				z.notify()
			}
			z.budget.spend()
			return len(p), nil
		}
	}
	f, err := z.file()
	if err != nil {
		return 0, err
	}
	return f.WriteAt(p, off)
}

// hold stops the file from being made until release, and reports
// whether it was made already. Writes that fit in pend are still kept.
func (z *lazyFile) hold() (made bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.held = true
	return z.f.Load() != nil
}

// release undoes hold.
func (z *lazyFile) release() {
	z.mu.Lock()
	z.held = false
	z.mu.Unlock()
}

// made returns the file if it exists, else nil.
func (z *lazyFile) made() vfs.File {
	if f := z.f.Load(); f != nil {
		return *f
	}
	return nil
}

func (z *lazyFile) ReadAt(p []byte, off int64) (int, error) {
	if f := z.made(); f != nil {
		return f.ReadAt(p, off)
	}
	z.mu.Lock()
	if f := z.made(); f != nil {
		z.mu.Unlock()
		return f.ReadAt(p, off)
	}
	defer z.mu.Unlock()
	if off >= int64(z.pend.size) {
		return 0, io.EOF
	}
	n := z.pend.readAt(p, off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (z *lazyFile) Size() (int64, error) {
	if f := z.made(); f != nil {
		return f.Size()
	}
	z.mu.Lock()
	if f := z.made(); f != nil {
		z.mu.Unlock()
		return f.Size()
	}
	defer z.mu.Unlock()
	return int64(z.pend.size), nil
}

// Write appends p at the end of the bytes written so far (the file's
// size once it is made).
func (z *lazyFile) Write(p []byte) (int, error) {
	if z.made() == nil {
		size, _ := z.Size() // of pend while the file is not made: cannot fail
		return z.write(p, size, nil)
	}
	f, err := z.file()
	if err != nil {
		return 0, err
	}
	return f.Write(p)
}

func (z *lazyFile) WriteAt(p []byte, off int64) (int, error) { return z.write(p, off, nil) }

func (z *lazyFile) Sync() error {
	f, err := z.file()
	if err != nil {
		return err
	}
	return f.Sync()
}

// SyncHeld is Sync made the held way (vfs.SyncHeld) once the file is
// made; making it is ordinary system calls.
func (z *lazyFile) SyncHeld() (bool, error) {
	if f := z.f.Load(); f != nil {
		return vfs.SyncHeld(*f)
	}
	return false, z.Sync()
}

// WriteAtHeld is WriteAt made the held way (vfs.WriteAtHeld) once the
// file is made; before, the bytes are kept or the file made as WriteAt
// does.
func (z *lazyFile) WriteAtHeld(p []byte, off int64) (int, bool, error) {
	if f := z.f.Load(); f != nil {
		return vfs.WriteAtHeld(*f, p, off)
	}
	n, err := z.WriteAt(p, off)
	return n, false, err
}

func (z *lazyFile) Truncate(size int64) error {
	if z.f.Load() == nil {
		z.mu.Lock()
		if z.f.Load() == nil && size <= int64(z.pend.size) {
			copied := z.pend.copied
			z.pend.truncate(int(size))
			z.budget.add(z.pend.copied - copied)
			z.kept.Store(int64(z.pend.size))
			z.mu.Unlock()
			return nil
		}
		z.mu.Unlock()
	}
	f, err := z.file()
	if err != nil {
		return err
	}
	return f.Truncate(size)
}

// Close closes the file if it was made; no file is made afterwards, and
// bytes kept in memory are dropped (the write-ahead log that made them
// durable replays them).
func (z *lazyFile) Close() error {
	z.mu.Lock()
	z.closed = true
	z.gone.Store(true)
	z.dropPend()
	z.mu.Unlock()
	if f := z.made(); f != nil {
		return f.Close()
	}
	return nil
}

// chunks holds a new log's bytes in memory in pieces: copies of at most
// chunkSize, so that growing it copies nothing (each write is a
// write-behind tail's flush, a few KiB to a few tens of KiB), and slices
// of Shared buffers, kept as they are.
type chunks struct {
	list   []piece // every copied piece full (cap) but the last
	size   int
	copied int // bytes in copied pieces: those the log's budget counts
}

// piece is one piece of chunks: a copy, or a slice of a Shared buffer,
// whose capacity is cut to its length so that nothing is appended to it.
type piece struct {
	b      []byte
	shared bool
}

const chunkSize = 16 << 10

// write appends a copy of p.
func (c *chunks) write(p []byte) {
	c.size += len(p)
	c.copied += len(p)
	for len(p) > 0 {
		if n := len(c.list); n == 0 || len(c.list[n-1].b) == cap(c.list[n-1].b) {
			c.list = append(c.list, piece{b: make([]byte, 0, chunkSize)})
		}
		last := &c.list[len(c.list)-1].b
		k := min(len(p), cap(*last)-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
}

// writeShared appends p itself, a slice of a Shared buffer.
func (c *chunks) writeShared(p []byte) {
	c.size += len(p)
	c.list = append(c.list, piece{b: p[:len(p):len(p)], shared: true})
}

// readAt copies the bytes from off into p and returns how many.
func (c *chunks) readAt(p []byte, off int64) int {
	n := 0
	for _, pc := range c.list {
		b := pc.b
		if off >= int64(len(b)) {
			off -= int64(len(b))
			continue
		}
		k := copy(p[n:], b[off:])
		n += k
		off = 0
		if n == len(p) {
			break
		}
	}
	return n
}

// truncate cuts the bytes to size (<= c.size).
func (c *chunks) truncate(size int) {
	c.size = size
	c.copied = 0
	for i := range c.list {
		pc := &c.list[i]
		if size <= len(pc.b) {
			if pc.shared {
				pc.b = pc.b[:size:size]
			} else {
				pc.b = pc.b[:size]
				c.copied += size
			}
			clear(c.list[i+1:])
			c.list = c.list[:i+1]
			if size == 0 {
				c.list = c.list[:i]
			}
			return
		}
		size -= len(pc.b)
		if !pc.shared {
			c.copied += len(pc.b)
		}
	}
}
