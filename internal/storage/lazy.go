package storage

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/vfs"
)

// lazyFile is the first segment file of a log made by Create: the log's
// directory and the file are made on the first write, sync or
// truncation, or by Log.Prepare (which the partition's acceptor calls on
// its own goroutine as it starts, off the request path), not while the
// topic is created. Until then it reads as an empty file. Its directory
// entries are not synced here: Log.Sync does that once, with the first
// bytes it makes durable.
type lazyFile struct {
	fs        vfs.FS
	dir, path string

	f atomic.Pointer[vfs.File] // set once the file is made; read without mu

	mu     sync.Mutex // guards the making of the directory and file, and closed
	closed bool
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
	if err := z.fs.MkdirAll(z.dir); err != nil {
		return nil, fmt.Errorf("create %s: %w", z.dir, err)
	}
	f, err := z.fs.Create(z.path)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", z.path, err)
	}
	z.f.Store(&f)
	return f, nil
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
	return 0, io.EOF
}

func (z *lazyFile) Size() (int64, error) {
	if f := z.made(); f != nil {
		return f.Size()
	}
	return 0, nil
}

func (z *lazyFile) Write(p []byte) (int, error) {
	f, err := z.file()
	if err != nil {
		return 0, err
	}
	return f.Write(p)
}

func (z *lazyFile) WriteAt(p []byte, off int64) (int, error) {
	f, err := z.file()
	if err != nil {
		return 0, err
	}
	return f.WriteAt(p, off)
}

func (z *lazyFile) Sync() error {
	f, err := z.file()
	if err != nil {
		return err
	}
	return f.Sync()
}

func (z *lazyFile) Truncate(size int64) error {
	f, err := z.file()
	if err != nil {
		return err
	}
	return f.Truncate(size)
}

// Close closes the file if it was made; no file is made afterwards.
func (z *lazyFile) Close() error {
	z.mu.Lock()
	z.closed = true
	z.mu.Unlock()
	if f := z.made(); f != nil {
		return f.Close()
	}
	return nil
}
