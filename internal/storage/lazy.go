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
// (up to pendMax bytes) and Config.OnPending is called once, so that the
// caller makes the file on a goroutine of its own: a fresh partition's
// first writes then cost no mkdir or file creation on the request path,
// and a partition never written makes no file at all. Without a
// write-ahead log the first write makes the file, so that a written byte
// is in the page cache as with any other file. Its directory entries
// are not synced here: Log.Sync does that once, with the first bytes it
// makes durable, unless the caller synced them (Log.DirsSynced).
type lazyFile struct {
	fs        vfs.FS
	dir, path string
	// pendMax is the most bytes kept in memory before the file is made
	// (0: none); onPending is called once, on the first write kept.
	pendMax   int
	onPending func()

	f atomic.Pointer[vfs.File] // set once the file is made; read without mu

	notified atomic.Bool // onPending was called

	mu     sync.Mutex // guards the making of the directory and file, pend, held and closed
	pend   []byte     // bytes [0, len(pend)) written before the file was made
	held   bool       // the file must not be made now (hold)
	closed bool
}

// ErrFilesHeld is returned by what would make a new log's files while
// Log.HoldFiles holds them (its topic's directory is being moved).
var ErrFilesHeld = errors.New("the log's files are held: its directory is being moved")

// pendMax is the most bytes a new log keeps in memory until its file is
// made (lazyFile).
const pendMax = 256 << 10

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
	if len(z.pend) > 0 {
		// The bytes written so far go into the file before anyone can
		// see it (readers read pend until f is set).
		if n, err := f.WriteAt(z.pend, 0); err != nil || n != len(z.pend) {
			f.Close()
			z.fs.Remove(z.path)
			if err == nil {
				err = io.ErrShortWrite
			}
			return nil, fmt.Errorf("write segment %s: %w", z.path, err)
		}
	}
	z.f.Store(&f)
	z.pend = nil
	return f, nil
}

// notify calls onPending the first time (the log's first append, or
// the first write kept).
func (z *lazyFile) notify() {
	if z.onPending != nil && !z.notified.Load() && z.notified.CompareAndSwap(false, true) {
		z.onPending()
	}
}

// keep writes p at off into pend when the file is not made yet, p
// appends to what pend holds and stays within pendMax, and reports
// whether it did.
func (z *lazyFile) keep(p []byte, off int64) (bool, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.f.Load() != nil || z.pendMax == 0 || off != int64(len(z.pend)) || len(z.pend)+len(p) > z.pendMax {
		return false, nil
	}
	if z.closed {
		return false, os.ErrClosed
	}
	if z.pend == nil {
		z.pend = make([]byte, 0, min(z.pendMax, max(len(p), 16<<10)))
	}
	z.pend = append(z.pend, p...)
	return true, nil
}

// write is WriteAt, keeping p in memory when it can.
func (z *lazyFile) write(p []byte, off int64) (int, error) {
	if z.f.Load() == nil && z.pendMax > 0 {
		kept, err := z.keep(p, off)
		if err != nil {
			return 0, err
		}
		if kept {
			z.notify()
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
	if off >= int64(len(z.pend)) {
		return 0, io.EOF
	}
	n := copy(p, z.pend[off:])
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
	return int64(len(z.pend)), nil
}

// Write appends p at the end of the bytes written so far (the file's
// size once it is made).
func (z *lazyFile) Write(p []byte) (int, error) {
	if z.made() == nil {
		size, _ := z.Size() // of pend while the file is not made: cannot fail
		return z.write(p, size)
	}
	f, err := z.file()
	if err != nil {
		return 0, err
	}
	return f.Write(p)
}

func (z *lazyFile) WriteAt(p []byte, off int64) (int, error) { return z.write(p, off) }

func (z *lazyFile) Sync() error {
	f, err := z.file()
	if err != nil {
		return err
	}
	return f.Sync()
}

func (z *lazyFile) Truncate(size int64) error {
	if z.f.Load() == nil {
		z.mu.Lock()
		if z.f.Load() == nil && size <= int64(len(z.pend)) {
			z.pend = z.pend[:size]
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
	z.pend = nil
	z.mu.Unlock()
	if f := z.made(); f != nil {
		return f.Close()
	}
	return nil
}
