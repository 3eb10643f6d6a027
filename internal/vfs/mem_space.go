package vfs

import (
	"os"
	"path"
	"sync"
	"syscall"
)

// SetCapacity makes the filesystem n bytes large: a Write that would take
// the bytes of all files past n fails with ENOSPC and writes nothing, and
// Usage reports what is left. 0 (the default) means unlimited. Removing
// or truncating files frees space at once.
func (m *MemFS) SetCapacity(n int64) {
	m.mu.Lock()
	m.capacity = n
	m.mu.Unlock()
}

// usedLocked is the bytes held by every file in the namespace.
func (m *MemFS) usedLocked() int64 {
	var used int64
	for _, n := range m.files {
		used += int64(len(n.data))
	}
	return used
}

// spaceLocked fails a write of n bytes that does not fit the capacity.
func (m *MemFS) spaceLocked(name string, n int) error {
	if m.capacity > 0 && m.usedLocked()+int64(n) > m.capacity {
		return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	return nil
}

// Usage reports the capacity left (SetCapacity); an unlimited MemFS
// reports 1 TiB free of 1 TiB.
func (m *MemFS) Usage(string) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.capacity <= 0 {
		return Usage{Free: 1 << 40, Total: 1 << 40}, nil
	}
	return Usage{Free: uint64(max(0, m.capacity-m.usedLocked())), Total: uint64(m.capacity)}, nil
}

// Lock takes an in-process lock on name: a second Lock of the same name
// on the same MemFS fails with ErrLocked until the first is unlocked.
func (m *MemFS) Lock(name string) (Unlocker, error) {
	name = path.Clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks == nil {
		m.locks = map[string]bool{}
	}
	if m.locks[name] {
		return nil, &LockedError{Name: name, PID: os.Getpid()}
	}
	m.locks[name] = true
	return &memLock{m: m, name: name}, nil
}

type memLock struct {
	once sync.Once
	m    *MemFS
	name string
}

func (l *memLock) Unlock() error {
	l.once.Do(func() {
		l.m.mu.Lock()
		delete(l.m.locks, l.name)
		l.m.mu.Unlock()
	})
	return nil
}
