package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// OS returns the operating system's filesystem. Its Files implement
// OSFile. Sync is fdatasync on Linux (fsync elsewhere); SyncDir opens the
// directory and fsyncs it.
func OS() FS { return osFS{} }

type osFS struct{}

// osFile is an operating-system file. Write seeks to the end of the
// file first, so that it appends (the file is not opened with O_APPEND,
// under which Linux would ignore WriteAt's position); WriteAt and ReadAt
// use pwrite and pread. Only one goroutine writes a file.
type osFile struct {
	f *os.File
}

func (o osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }

func (o osFile) Write(p []byte) (int, error) {
	if _, err := o.f.Seek(0, io.SeekEnd); err != nil {
		return 0, err
	}
	return o.f.Write(p)
}

func (o osFile) Sync() error               { return datasync(o.f) }
func (o osFile) Truncate(size int64) error { return o.f.Truncate(size) }
func (o osFile) Close() error              { return o.f.Close() }
func (o osFile) OS() *os.File              { return o.f }

func (o osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenRW(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Chmod(name string, mode os.FileMode) error { return os.Chmod(name, mode) }
func (osFS) Remove(name string) error                  { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error      { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error                 { return os.MkdirAll(dir, 0o755) }
func (osFS) RemoveAll(dir string) error                { return os.RemoveAll(dir) }
func (osFS) Stat(name string) (os.FileInfo, error)     { return os.Stat(name) }

func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("vfs: fsync directory %s: %w", dir, serr)
	}
	if cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		return cerr
	}
	return nil
}

// SyncDirs makes the entries of every directory in dirs durable: a
// directory fsync each when they are few (syncDirsMin), else, on Linux,
// one syncfs(2) of the filesystem holding them (all must be on one).
func (fs osFS) SyncDirs(dirs []string) error {
	if len(dirs) < syncDirsMin {
		for _, d := range dirs {
			if err := fs.SyncDir(d); err != nil {
				return err
			}
		}
		return nil
	}
	return syncDirs(dirs)
}

// SyncBaseline opens dir, on Linux: the descriptor syncSince syncs the
// filesystem through, whose writeback errors it reports from now on.
// Elsewhere it fails, and a SyncSet syncs its entries one by one.
func (osFS) SyncBaseline(dir string) (io.Closer, error) { return syncBaseline(filepath.Clean(dir)) }

// SyncSince makes every write to the filesystem of h durable (see
// syncSince) and checks files, each on its own descriptor.
func (fs osFS) SyncSince(h io.Closer, files []File) error {
	osf := make([]*os.File, 0, len(files))
	for _, f := range files {
		o, ok := f.(OSFile)
		if !ok {
			if err := f.Sync(); err != nil {
				return err
			}
			continue
		}
		osf = append(osf, o.OS())
	}
	d, ok := h.(*os.File)
	if !ok {
		return fmt.Errorf("vfs: SyncSince on a handle %T not from SyncBaseline", h)
	}
	return syncSince(d, osf)
}

// syncDirsMin is the fewest directories SyncDirs syncs with syncfs. A
// syncfs writes back every dirty page of the filesystem, other files'
// and other processes' included, and holds up their fsyncs meanwhile
// (25 ms measured on a shared disk): worth it for the hundreds of
// directories of a new topic, not for a few.
const syncDirsMin = 32
