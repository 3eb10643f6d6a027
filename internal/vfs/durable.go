package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// TmpSuffix names the temporary file WriteFileAtomic writes beside its
// target. A crash can leave one behind; it is never read as the target.
const TmpSuffix = ".tmp"

// ErrNotDurable is matched by a WriteFileAtomic error from after the
// rename: name may hold the new contents, or may after a crash hold the
// old ones, and the caller cannot tell which until a restart reads it.
var ErrNotDurable = errors.New("vfs: replaced, but the directory sync failed")

// MaxReadFile bounds what ReadFile reads: it is for metadata files.
const MaxReadFile = 1 << 30

// WriteFileAtomic replaces name with data atomically and durably: data
// is written to name+TmpSuffix, fsynced, renamed over name, and then the
// directory holding name is fsynced, so that after a crash at any point
// name holds either its old contents or data, never a mix, and once
// WriteFileAtomic returns nil the new contents survive power loss.
//
// It is the only atomic-replace in Sluice: every metadata file goes
// through it.
func WriteFileAtomic(fs FS, name string, data []byte) error {
	return writeFileAtomic(fs, name, data, false)
}

// WriteFilePrivate is WriteFileAtomic for a secret (credentials): on a
// filesystem that has permissions (Chmoder) the file is readable by its
// owner only, from before any byte is written.
func WriteFilePrivate(fs FS, name string, data []byte) error {
	return writeFileAtomic(fs, name, data, true)
}

// Chmoder is implemented by filesystems with permission bits.
type Chmoder interface {
	Chmod(name string, mode os.FileMode) error
}

// MkdirAllPrivate is MkdirAllDurable for a directory of secrets: on a
// filesystem with permissions, dir is made accessible by its owner only.
func MkdirAllPrivate(fs FS, dir string) error {
	if err := MkdirAllDurable(fs, dir); err != nil {
		return err
	}
	if c, ok := fs.(Chmoder); ok {
		if err := c.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("restrict %s: %w", dir, err)
		}
	}
	return nil
}

func writeFileAtomic(fs FS, name string, data []byte, private bool) error {
	tmp := name + TmpSuffix
	if err := fs.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	f, err := fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if c, ok := fs.(Chmoder); ok && private {
		if err := c.Chmod(tmp, 0o600); err != nil {
			f.Close()
			return fmt.Errorf("restrict %s: %w", tmp, err)
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fs.SyncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("sync directory of %s: %w: %w", name, ErrNotDurable, err)
	}
	return nil
}

// ReadFile reads the whole of name. A missing file gives an error
// matching os.ErrNotExist; one larger than MaxReadFile an error.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if size > MaxReadFile {
		return nil, fmt.Errorf("read %s: %d bytes is too large for a metadata file", name, size)
	}
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data[:n], nil
}

// MkdirAllDurable creates dir and any missing parents, and fsyncs the
// parent of every directory it created, so that the new entries survive
// power loss. A directory that already exists is left as it is.
func MkdirAllDurable(fs FS, dir string) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; d != "." && d != string(filepath.Separator); d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		missing = append(missing, d)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	// Sync from the deepest new directory up to the parent of the
	// shallowest: each new entry is durable once its parent is synced.
	for _, d := range missing {
		if err := fs.SyncDir(filepath.Dir(d)); err != nil {
			return fmt.Errorf("sync directory %s: %w", filepath.Dir(d), err)
		}
	}
	return nil
}

// SyncParent fsyncs the directory holding name, making name's entry (a
// create, rename or remove there) durable.
func SyncParent(fs FS, name string) error {
	dir := filepath.Dir(name)
	if err := fs.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// RenameDurable renames oldname to newname and fsyncs the directories
// that hold them, the new one first: once it returns nil the rename
// survives power loss. A crash between the two syncs can leave the entry
// under both names; never under neither.
func RenameDurable(fs FS, oldname, newname string) error {
	if err := fs.Rename(oldname, newname); err != nil {
		return err
	}
	if err := SyncParent(fs, newname); err != nil {
		return err
	}
	if filepath.Dir(oldname) != filepath.Dir(newname) {
		return SyncParent(fs, oldname)
	}
	return nil
}

// RemoveDurable removes name and fsyncs its directory. A name already
// absent is not an error (the directory is still synced, since an
// earlier attempt may have removed it without the sync).
func RemoveDurable(fs FS, name string) error {
	if err := fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return SyncParent(fs, name)
}

// RemoveAllDurable removes the tree at dir and fsyncs dir's parent.
func RemoveAllDurable(fs FS, dir string) error {
	if err := fs.RemoveAll(dir); err != nil {
		return err
	}
	return SyncParent(fs, dir)
}

// DirsSyncer is implemented by filesystems that make the entries of many
// directories durable in one call (the operating system's on Linux).
type DirsSyncer interface {
	SyncDirs(dirs []string) error
}

// SyncDirs makes the entries of every directory in dirs durable, as a
// SyncDir of each would: in one call when fs is a DirsSyncer, else one
// SyncDir each. The directories must be on one filesystem. It bounds the
// syncs of a batch of new directories (the partitions of a new topic) to
// one.
func SyncDirs(fs FS, dirs []string) error {
	if ds, ok := fs.(DirsSyncer); ok {
		return ds.SyncDirs(dirs)
	}
	for _, d := range dirs {
		if err := fs.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// FilesSyncer is implemented by filesystems that make every write made
// to them since a point durable in one call (the operating system's on
// Linux: syncfs), for SyncSet.
type FilesSyncer interface {
	// SyncBaseline opens a handle on the filesystem holding dir: the
	// point from which SyncSince reports writeback errors.
	SyncBaseline(dir string) (io.Closer, error)
	// SyncSince makes every write made to the filesystem durable (data,
	// files' sizes, directory entries) and reports an error if a
	// writeback met one since SyncBaseline returned h, or, for each of
	// files (open from before), since it was last synced.
	SyncSince(h io.Closer, files []File) error
}

// SyncSet collects what a batch of writes must make durable, to make it
// all durable at once: the clean shutdown of many partitions syncs their
// files this way, in a number of filesystem syncs that does not grow
// with the partitions, and without holding the files it wrote open.
// Start it (NewSyncSet) before the writes it covers. Files written before
// it started are added open (AddFile, their owner closes them); files
// written after it started are added by name (AddName), closed.
//
// On a FilesSyncer, when the set holds at least syncDirsMin entries,
// Sync is one SyncSince; otherwise every file is synced (those added by
// name opened again for it: a writeback error not reported yet is
// reported to a new descriptor) and then every directory. Not safe for
// concurrent use.
type SyncSet struct {
	fs    FS
	base  io.Closer // from SyncBaseline; nil: sync one by one
	files []File
	names []string
	dirs  []string
}

// NewSyncSet starts a set on fs, whose writes from now on it covers; dir
// is a directory of the filesystem (the batch's files must all be on
// it), or one to be made there. Close the set after its last Sync.
func NewSyncSet(fs FS, dir string) *SyncSet {
	s := &SyncSet{fs: fs}
	fsy, ok := fs.(FilesSyncer)
	// A directory not made yet (a new partition's): its parent will do.
	for d := filepath.Clean(dir); ok; d = filepath.Dir(d) {
		h, err := fsy.SyncBaseline(d)
		if err == nil {
			s.base = h
		}
		if !errors.Is(err, os.ErrNotExist) || d == filepath.Dir(d) {
			break
		}
	}
	return s
}

// AddFile adds files written before the set started, open.
func (s *SyncSet) AddFile(files ...File) { s.files = append(s.files, files...) }

// AddName adds files written since the set started, by name.
func (s *SyncSet) AddName(names ...string) { s.names = append(s.names, names...) }

// AddDir adds directories whose entries changed (each synced once).
func (s *SyncSet) AddDir(dirs ...string) { s.dirs = append(s.dirs, dirs...) }

// Sync makes everything added durable, as a sync of each file and
// directory would. An error says that some of them may not be durable,
// not which.
func (s *SyncSet) Sync() error {
	if s.base != nil && len(s.files)+len(s.names)+len(s.dirs) >= syncDirsMin {
		return s.fs.(FilesSyncer).SyncSince(s.base, s.files)
	}
	for _, f := range s.files {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	for _, n := range s.names {
		f, err := s.fs.Open(n)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	seen := make(map[string]bool, len(s.dirs))
	for _, d := range s.dirs {
		if d = filepath.Clean(d); seen[d] {
			continue
		}
		seen[d] = true
		if err := s.fs.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the set's handle on the filesystem.
func (s *SyncSet) Close() error {
	if s.base != nil {
		return s.base.Close()
	}
	return nil
}

// WriteInPlace makes name hold exactly data, without a sync: it writes
// over the existing file, reusing its inode, and cuts what is left past
// data, or creates the file (created). Until the caller syncs the
// returned file a crash may leave any mix of the old and new bytes, so
// it is for files whose reader detects a torn one (a checksum) and has
// something to fall back on. The caller syncs the file and closes it,
// and syncs the directory when created is set.
func WriteInPlace(fs FS, name string, data []byte) (_ File, created bool, err error) {
	f, err := fs.OpenRW(name)
	if errors.Is(err, os.ErrNotExist) {
		f, err = fs.Create(name)
		created = true
	}
	if err != nil {
		return nil, created, err
	}
	size := int64(0)
	if !created {
		if size, err = f.Size(); err != nil {
			f.Close()
			return nil, created, fmt.Errorf("stat %s: %w", name, err)
		}
	}
	if n, err := f.WriteAt(data, 0); err != nil || n != len(data) {
		f.Close()
		if err == nil {
			err = io.ErrShortWrite
		}
		return nil, created, fmt.Errorf("write %s: %w", name, err)
	}
	if size > int64(len(data)) {
		if err := f.Truncate(int64(len(data))); err != nil {
			f.Close()
			return nil, created, fmt.Errorf("truncate %s: %w", name, err)
		}
	}
	return f, created, nil
}
