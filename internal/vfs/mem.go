package vfs

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory FS that simulates a machine crash. It remembers,
// for every file, which bytes were made durable by Sync and, for every
// directory, which entries (creates, renames, removes) were made durable
// by SyncDir. CrashClone returns the filesystem a reboot would find:
// every unsynced byte and every unsynced directory change is gone (and,
// optionally, a random prefix of each file's unsynced bytes survives, as
// when the last write tears).
//
// Directories follow the same rule as files: a directory change
// (create, mkdir, rename, unlink, RemoveAll) survives a crash only if
// its parent directory was synced after it, and a rename across
// directories is whole only once both parents were synced. A directory
// whose own entry was not made durable vanishes with everything in it,
// synced files included. Each directory has an identity (an inode):
// removing and re-creating a directory gives a new, empty one; renaming
// it keeps its contents and their durable state.
//
// Inject sets a function consulted before every operation, which can fail
// it (see FailNth and Errno). Ops counts operations by kind, so a test can
// run a workload once, read the counts, then re-run it crashing at every
// write or sync boundary.
//
// A MemFS is safe for concurrent use.
type MemFS struct {
	mu sync.Mutex // guards every field below and every memNode's fields
	// files is the current namespace of files: cleaned path -> node.
	files map[string]*memNode
	// dirs is the current namespace of directories: cleaned path -> its
	// inode. The namespace a crash would leave hangs off the roots: each
	// memDir holds its entries as of its last SyncDir.
	dirs   map[string]*memDir
	inject func(Op) error
	counts [numOpKinds]int64
	seq    int64
	// capacity bounds the bytes of all files (SetCapacity); 0: unlimited.
	capacity int64
	locks    map[string]bool // names held by Lock
	// crashAt, when not 0, is the mutating operation before which
	// crashSnap takes a CrashClone (CrashBefore).
	crashAt   int64
	crashOpts CrashOptions
	crashSnap *MemFS
}

// memNode is one file's contents (an inode: renames move it, open handles
// keep it after a remove).
type memNode struct {
	data []byte
	// syncedLen is how much of data is durable while the file has only
	// grown since its last Sync.
	syncedLen int
	// durableCopy, when not nil, is the durable content after a Truncate
	// cut below syncedLen or a WriteAt over synced bytes; data no longer
	// holds it. dirtyFrom is then the first byte changed since the last
	// Sync: a torn crash keeps durableCopy with a prefix of data's bytes
	// from there written over it.
	durableCopy []byte
	dirtyFrom   int
	modTime     time.Time
}

// keepDurableLocked saves the durable content before bytes from off on
// change in place, and notes where the changes start.
func (n *memNode) keepDurableLocked(off int) {
	if n.durableCopy == nil {
		if off >= n.syncedLen {
			return // beyond the synced bytes: data[:syncedLen] stays the durable content
		}
		n.durableCopy = append([]byte(nil), n.data[:n.syncedLen]...)
		n.dirtyFrom = off
	}
	n.dirtyFrom = min(n.dirtyFrom, off)
}

func (n *memNode) durableBytes() []byte {
	if n.durableCopy != nil {
		return n.durableCopy
	}
	return n.data[:n.syncedLen]
}

// memDir is one directory (an inode). Its durable entries are those a
// crash would leave: what the directory held at its last SyncDir. A
// new directory has none.
type memDir struct {
	files map[string]*memNode // base name -> file
	dirs  map[string]*memDir  // base name -> directory
}

func newMemDir() *memDir {
	return &memDir{files: map[string]*memNode{}, dirs: map[string]*memDir{}}
}

// isRoot reports whether a cleaned path is a root, which always exists
// and is always durable.
func isRoot(p string) bool { return p == "/" || p == "." }

// OpKind names a kind of filesystem operation, for counting and injection.
type OpKind int

// Operation kinds seen by an injector.
const (
	OpCreate OpKind = iota
	OpOpen          // Open and OpenRW
	OpWrite
	OpSync
	OpTruncate
	OpRemove
	OpRename
	OpSyncDir
	numOpKinds
)

var opNames = [...]string{"create", "open", "write", "sync", "truncate", "remove", "rename", "syncdir"}

func (k OpKind) String() string {
	if k >= 0 && int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", int(k))
}

// Op describes an operation about to run, for an injector.
type Op struct {
	Kind OpKind
	Name string // the file or directory
	// N counts operations of this Kind, from 1, including this one.
	N int64
	// Seq counts every mutating operation (all kinds but OpOpen), from 1,
	// including this one; 0 for OpOpen.
	Seq int64
}

// NewMem returns an empty in-memory filesystem whose root directory exists.
func NewMem() *MemFS {
	return &MemFS{
		files: map[string]*memNode{},
		dirs:  map[string]*memDir{"/": newMemDir(), ".": newMemDir()},
	}
}

// Inject installs f, called before every operation with the operation's
// description; a non-nil result fails the operation with that error and
// leaves the filesystem unchanged. nil removes the injector.
func (m *MemFS) Inject(f func(Op) error) {
	m.mu.Lock()
	m.inject = f
	m.mu.Unlock()
}

// Ops reports how many operations of kind k were attempted.
func (m *MemFS) Ops(k OpKind) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[k]
}

// Seq reports how many mutating operations were attempted.
func (m *MemFS) Seq() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq
}

// Errno returns the error an injected failure of op gives: a
// *os.PathError wrapping errno, so errors.Is(err, syscall.ENOSPC) works.
func Errno(op Op, errno error) error {
	return &os.PathError{Op: op.Kind.String(), Path: op.Name, Err: errno}
}

// FailNth returns an injector failing the nth operation of kind k (from 1)
// with errno, and every later one of that kind when sticky is true.
func FailNth(k OpKind, n int64, errno error, sticky bool) func(Op) error {
	return func(op Op) error {
		if op.Kind == k && (op.N == n || (sticky && op.N > n)) {
			return Errno(op, errno)
		}
		return nil
	}
}

// FailFromSeq returns an injector failing every mutating operation from
// sequence number seq on with errno: the machine "stops" there, and a
// CrashClone taken afterwards shows the state of a crash at that boundary.
func FailFromSeq(seq int64, errno error) func(Op) error {
	return func(op Op) error {
		if op.Seq >= seq {
			return Errno(op, errno)
		}
		return nil
	}
}

// beginLocked counts an operation and asks the injector about it.
func (m *MemFS) beginLocked(k OpKind, name string) error {
	m.counts[k]++
	op := Op{Kind: k, Name: name, N: m.counts[k]}
	if k != OpOpen {
		m.seq++
		op.Seq = m.seq
		if m.seq == m.crashAt {
			m.crashSnap = m.crashCloneLocked(m.crashOpts)
		}
	}
	if m.inject != nil {
		return m.inject(op)
	}
	return nil
}

func clean(name string) string { return path.Clean(name) }

func (m *MemFS) parentExistsLocked(name string) error {
	if dir := path.Dir(name); m.dirs[dir] == nil {
		return &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	return nil
}

// Create makes a new empty file; it fails if name exists.
func (m *MemFS) Create(name string) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.beginLocked(OpCreate, name); err != nil {
		return nil, err
	}
	if err := m.parentExistsLocked(name); err != nil {
		return nil, err
	}
	if _, ok := m.files[name]; ok || m.dirs[name] != nil {
		return nil, &os.PathError{Op: "create", Path: name, Err: os.ErrExist}
	}
	n := &memNode{modTime: time.Now()}
	m.files[name] = n
	return &memFile{fs: m, name: name, n: n, writable: true}, nil
}

// OpenRW opens an existing file for reading and appending.
func (m *MemFS) OpenRW(name string) (File, error) { return m.open(name, true) }

// Open opens an existing file read-only.
func (m *MemFS) Open(name string) (File, error) { return m.open(name, false) }

func (m *MemFS) open(name string, writable bool) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.beginLocked(OpOpen, name); err != nil {
		return nil, err
	}
	n, ok := m.files[name]
	if !ok {
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	return &memFile{fs: m, name: name, n: n, writable: writable}, nil
}

// Remove deletes a file from the namespace; open handles keep working.
func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.beginLocked(OpRemove, name); err != nil {
		return err
	}
	if _, ok := m.files[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

// Rename moves oldname to newname, replacing newname.
func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.beginLocked(OpRename, oldname); err != nil {
		return err
	}
	if m.dirs[oldname] != nil {
		return m.renameDirLocked(oldname, newname)
	}
	if m.dirs[newname] != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrExist}
	}
	n, ok := m.files[oldname]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	if err := m.parentExistsLocked(newname); err != nil {
		return err
	}
	delete(m.files, oldname)
	m.files[newname] = n
	return nil
}

// renameDirLocked moves a directory tree. The directory keeps its
// identity, so the files under it keep their durable state; the move
// itself is durable in each parent once that parent is synced.
func (m *MemFS) renameDirLocked(oldname, newname string) error {
	if isRoot(oldname) {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrInvalid}
	}
	if err := m.parentExistsLocked(newname); err != nil {
		return err
	}
	if _, ok := m.files[newname]; ok || m.dirs[newname] != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrExist}
	}
	if strings.HasPrefix(newname, oldname+"/") {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrInvalid}
	}
	move := func(p string) (string, bool) {
		if p == oldname {
			return newname, true
		}
		if rest, ok := strings.CutPrefix(p, oldname+"/"); ok {
			return newname + "/" + rest, true
		}
		return "", false
	}
	for p, n := range m.files {
		if q, ok := move(p); ok {
			delete(m.files, p)
			m.files[q] = n
		}
	}
	moved := map[string]*memDir{}
	for p, d := range m.dirs {
		if q, ok := move(p); ok {
			delete(m.dirs, p)
			moved[q] = d
		}
	}
	for q, d := range moved {
		m.dirs[q] = d
	}
	return nil
}

// MkdirAll creates dir and its parents. Each new directory is durable
// once its parent is synced (MkdirAllDurable does that).
func (m *MemFS) MkdirAll(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for d := dir; m.dirs[d] == nil; d = path.Dir(d) {
		if _, ok := m.files[d]; ok {
			return &os.PathError{Op: "mkdir", Path: d, Err: os.ErrExist}
		}
		missing = append(missing, d)
	}
	for _, d := range missing {
		m.dirs[d] = newMemDir()
	}
	return nil
}

// ReadDir lists the sorted names of dir's entries (files and directories).
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[dir] == nil {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: os.ErrNotExist}
	}
	var names []string
	for p := range m.files {
		if path.Dir(p) == dir {
			names = append(names, path.Base(p))
		}
	}
	for d := range m.dirs {
		if !isRoot(d) && path.Dir(d) == dir {
			names = append(names, path.Base(d))
		}
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir makes dir's current entries durable: the files and
// directories it holds now are what a crash leaves in it.
func (m *MemFS) SyncDir(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.beginLocked(OpSyncDir, dir); err != nil {
		return err
	}
	d := m.dirs[dir]
	if d == nil {
		return &os.PathError{Op: "syncdir", Path: dir, Err: os.ErrNotExist}
	}
	d.files = map[string]*memNode{}
	d.dirs = map[string]*memDir{}
	for p, n := range m.files {
		if path.Dir(p) == dir {
			d.files[path.Base(p)] = n
		}
	}
	for p, c := range m.dirs {
		if !isRoot(p) && path.Dir(p) == dir {
			d.dirs[path.Base(p)] = c
		}
	}
	return nil
}

// RemoveAll deletes dir and everything under it. Like a remove, it is
// durable once dir's parent is synced; until then a crash brings the
// tree back as it was last made durable.
func (m *MemFS) RemoveAll(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	under := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for p := range m.files {
		if under(p) {
			delete(m.files, p)
		}
	}
	for d := range m.dirs {
		if under(d) && !isRoot(d) {
			delete(m.dirs, d)
		}
	}
	return nil
}

// Stat reports a file's or directory's size.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[name] != nil {
		return memInfo{name: path.Base(name), dir: true}, nil
	}
	n, ok := m.files[name]
	if !ok {
		return nil, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
	}
	return memInfo{name: path.Base(name), size: int64(len(n.data)), mod: n.modTime}, nil
}

// CrashOptions choose how CrashClone treats unsynced bytes.
type CrashOptions struct {
	// Tear keeps a random prefix of each file's unsynced bytes instead of
	// dropping them all, as when the machine dies in the middle of the
	// last write. Rand must be set with it.
	Tear bool
	// Rand draws the torn lengths; seed it for reproducible tests.
	Rand *rand.Rand
}

// CrashClone returns a new MemFS holding what a reboot after a crash at
// this instant would find: the durable entries of each durable
// directory, reached from the roots, and in each file only its synced
// bytes (plus, with opts.Tear, a random prefix of the unsynced ones).
// m itself is unchanged and keeps working.
func (m *MemFS) CrashClone(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashCloneLocked(opts)
}

// CrashBefore arranges for a CrashClone to be taken just before the
// mutating operation numbered seq (see Op.Seq) runs, while m keeps
// working: a power cut at that instant, for a test that runs a workload
// on, unaware of the cut, and checks afterwards that whatever the
// workload had acknowledged before operation seq survived. The returned
// function gives the clone, or nil while operation seq has not run.
func (m *MemFS) CrashBefore(seq int64, opts CrashOptions) func() *MemFS {
	m.mu.Lock()
	m.crashAt, m.crashOpts, m.crashSnap = seq, opts, nil
	m.mu.Unlock()
	return func() *MemFS {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.crashSnap
	}
}

func (m *MemFS) crashCloneLocked(opts CrashOptions) *MemFS {
	c := NewMem()
	durable := map[string]*memNode{}
	// walk collects the durable tree under d at p. onPath guards against
	// a cycle that unsynced renames could leave in the durable entries.
	onPath := map[*memDir]bool{}
	var walk func(p string, d *memDir)
	walk = func(p string, d *memDir) {
		onPath[d] = true
		defer delete(onPath, d)
		for base, n := range d.files {
			durable[path.Join(p, base)] = n
		}
		for base, cd := range d.dirs {
			if onPath[cd] {
				continue
			}
			q := path.Join(p, base)
			c.dirs[q] = newMemDir()
			walk(q, cd)
		}
	}
	walk("/", m.dirs["/"])
	walk(".", m.dirs["."])
	// Durable names are sorted so that torn lengths are drawn in a fixed
	// order and a seeded Rand reproduces the same crash.
	names := make([]string, 0, len(durable))
	for p := range durable {
		names = append(names, p)
	}
	sort.Strings(names)
	seen := map[*memNode]*memNode{} // hard links after renames share a node
	for _, p := range names {
		n := durable[p]
		if cn, ok := seen[n]; ok {
			c.files[p] = cn
			continue
		}
		data := append([]byte(nil), n.durableBytes()...)
		switch {
		case !opts.Tear || opts.Rand == nil:
		case n.durableCopy == nil && len(n.data) > n.syncedLen:
			keep := opts.Rand.IntN(len(n.data) - n.syncedLen + 1)
			data = append(data, n.data[n.syncedLen:n.syncedLen+keep]...)
		case n.durableCopy != nil && len(n.data) > n.dirtyFrom:
			// Changes in place: a prefix of them, in file order, reached
			// the disk over the durable content.
			keep := opts.Rand.IntN(len(n.data) - n.dirtyFrom + 1)
			if end := n.dirtyFrom + keep; end > len(data) {
				data = append(data, make([]byte, end-len(data))...)
			}
			copy(data[n.dirtyFrom:], n.data[n.dirtyFrom:n.dirtyFrom+keep])
		}
		cn := &memNode{data: data, syncedLen: len(data), modTime: n.modTime}
		seen[n] = cn
		c.files[p] = cn
	}
	// Everything in the clone is durable: a second crash keeps it.
	for p, n := range c.files {
		c.dirs[path.Dir(p)].files[path.Base(p)] = n
	}
	for p, d := range c.dirs {
		if !isRoot(p) {
			c.dirs[path.Dir(p)].dirs[path.Base(p)] = d
		}
	}
	return c
}

// memFile is an open handle on a memNode.
type memFile struct {
	fs       *MemFS
	name     string
	n        *memNode
	writable bool
	closed   bool // guarded by fs.mu
}

func (f *memFile) checkLocked(op string, write bool) error {
	if f.closed {
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	if write && !f.writable {
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrPermission}
	}
	return nil
}

// beginLocked checks that f may do op (write: one that needs f open for
// writing), then begins operation k on the filesystem, where faults and
// crashes are injected. Callers hold fs.mu.
func (f *memFile) beginLocked(op string, write bool, k OpKind) error {
	if err := f.checkLocked(op, write); err != nil {
		return err
	}
	return f.fs.beginLocked(k, f.name)
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: os.ErrInvalid}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	k := copy(p, f.n.data[off:])
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("write", true, OpWrite); err != nil {
		return 0, err
	}
	if err := f.fs.spaceLocked(f.name, len(p)); err != nil {
		return 0, err
	}
	f.n.data = append(f.n.data, p...)
	f.n.modTime = time.Now()
	return len(p), nil
}

// WriteAt writes p at off; a gap past the end reads as zeros.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("write", true, OpWrite); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: os.ErrInvalid}
	}
	n := f.n
	if grow := int(off) + len(p) - len(n.data); grow > 0 {
		if err := f.fs.spaceLocked(f.name, grow); err != nil {
			return 0, err
		}
	}
	n.keepDurableLocked(int(min(off, int64(len(n.data)))))
	if end := int(off) + len(p); end > len(n.data) {
		n.data = append(n.data, make([]byte, end-len(n.data))...)
	}
	copy(n.data[off:], p)
	n.modTime = time.Now()
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("sync", false, OpSync); err != nil {
		return err
	}
	f.n.syncedLen = len(f.n.data)
	f.n.durableCopy = nil
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.beginLocked("truncate", true, OpTruncate); err != nil {
		return err
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: os.ErrInvalid}
	}
	n := f.n
	// The durable content stays as it was until the next Sync; keep a
	// copy, since appends after the cut overwrite data's backing array.
	n.keepDurableLocked(int(min(size, int64(len(n.data)))))
	if size <= int64(len(n.data)) {
		n.data = n.data[:size:size]
	} else {
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	if n.syncedLen > len(n.data) {
		n.syncedLen = len(n.data)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.checkLocked("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &os.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	f.closed = true
	return nil
}

type memInfo struct {
	name string
	size int64
	mod  time.Time
	dir  bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
