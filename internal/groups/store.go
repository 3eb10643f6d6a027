package groups

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"sluice/internal/acceptor"
	"sluice/internal/storage"
	"sluice/internal/vfs"
)

// store is where the coordinator's records live. The state machine knows
// only this interface; tests run it over an in-memory store.
type store interface {
	// replay calls fn for every stored record in order, once, before
	// start. A record's offset increases with its position.
	replay(fn func(offset int64, r kv) error) error
	// start makes the store writable. snapshot returns the live records;
	// the store calls it to compact itself (with no append in flight).
	start(snapshot func() []kv) error
	// append makes recs durable, in order, then calls apply with the
	// position of the first before returning nil. Positions increase with
	// the order of the writes and never repeat, even across compactions
	// (they are not necessarily the log's offsets). No compaction snapshot
	// is taken between the write and the end of apply.
	append(recs []kv, apply func(base int64)) error
	close() error
}

// logStore keeps the records in an internal partition log written
// through an acceptor, durable (fsynced) before append returns.
//
// Layout of Config.Dir:
//
//	CURRENT       names the live log directory ("log-000003"), replaced
//	              by writing CURRENT.tmp, fsync, rename, directory fsync
//	log-000003/   the internal log (package storage's layout)
//
// Compaction writes the live records to a fresh log-N+1, fsyncs it,
// switches CURRENT, then removes the old directory. Open removes any log
// directory CURRENT does not name (an interrupted compaction).
type logStore struct {
	fs         vfs.FS
	dir        string
	scfg       storage.Config
	acfg       acceptor.Config
	compactMin int64
	now        func() int64 // milliseconds
	logf       func(msg string, args ...any)
	compacted  func()

	// mu guards the fields below through broken (seq, posBase, log, acc,
	// snapshot, closed, broken) and orders appends against compaction:
	// append holds it shared from its write until its apply has returned;
	// compaction holds it exclusively while it swaps logs. Taken after
	// group.persistMu and before Coordinator.mu and group.mu.
	mu       sync.RWMutex
	seq      int                // number of the live log directory
	posBase  int64              // added to log offsets to make positions; grows at each compaction
	log      *storage.Log       // the live log
	acc      *acceptor.Acceptor // its writer; nil until start
	snapshot func() []kv
	closed   bool
	// broken is set when a compaction could not tell which log CURRENT
	// names; append then refuses, so that no commit is acknowledged in a
	// log the next Open might not read.
	broken error

	records    atomic.Int64 // records in the live log
	live       atomic.Int64 // live records after the last compaction (or replay)
	compacting atomic.Bool  // a compaction is running or queued
}

const currentFile = "CURRENT"

func logDirName(seq int) string { return fmt.Sprintf("log-%06d", seq) }

func openLogStore(cfg Config) (*logStore, error) {
	s := &logStore{
		fs:  cfg.FS,
		dir: cfg.Dir,
		// The internal log is never trimmed by retention: compaction keeps it small.
		scfg: storage.Config{RetentionAge: -1, RetentionBytes: -1, SegmentAge: -1, SegmentBytes: 64 << 20,
			Logger: cfg.Logger.With("log", "groups")},
		acfg: acceptor.Config{Policy: cfg.SyncPolicy, RetentionCheck: -1, QueueSize: 1024,
			Logger: cfg.Logger.With("log", "groups")},
		compactMin: int64(cfg.CompactMinRecords),
		now:        func() int64 { return cfg.Now().UnixMilli() },
		logf:       cfg.Logger.Warn,
	}
	if err := s.fs.MkdirAll(s.dir); err != nil {
		return nil, fmt.Errorf("groups: create %s: %w", s.dir, err)
	}
	seq, err := s.readCurrent()
	if err != nil {
		return nil, err
	}
	if seq == 0 {
		seq = 1
		if err := s.writeCurrent(seq); err != nil {
			return nil, err
		}
	}
	s.seq = seq
	names, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("groups: list %s: %w", s.dir, err)
	}
	for _, n := range names {
		if (strings.HasPrefix(n, "log-") && n != logDirName(seq)) || n == currentFile+".tmp" {
			if err := s.fs.RemoveAll(path.Join(s.dir, n)); err != nil {
				return nil, fmt.Errorf("groups: remove leftover %s: %w", n, err)
			}
		}
	}
	s.log, err = storage.Open(s.fs, path.Join(s.dir, logDirName(seq)), s.scfg)
	if err != nil {
		return nil, fmt.Errorf("groups: open internal log: %w", err)
	}
	return s, nil
}

// readCurrent returns the sequence number CURRENT names, 0 if absent.
func (s *logStore) readCurrent() (int, error) {
	name := path.Join(s.dir, currentFile)
	f, err := s.fs.Open(name)
	if err != nil {
		if _, serr := s.fs.Stat(name); serr != nil {
			return 0, nil // absent
		}
		return 0, fmt.Errorf("groups: open %s: %w", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, fmt.Errorf("groups: read %s: %w", name, err)
	}
	b := make([]byte, min(size, 64))
	if _, err := f.ReadAt(b, 0); err != nil {
		return 0, fmt.Errorf("groups: read %s: %w", name, err)
	}
	v := strings.TrimSpace(string(b))
	seq, err := strconv.Atoi(strings.TrimPrefix(v, "log-"))
	if err != nil || seq <= 0 || !strings.HasPrefix(v, "log-") {
		return 0, fmt.Errorf("groups: %s holds %q, not a log directory name", name, v)
	}
	return seq, nil
}

// writeCurrent durably points CURRENT at log directory seq.
func (s *logStore) writeCurrent(seq int) error {
	tmp, name := path.Join(s.dir, currentFile+".tmp"), path.Join(s.dir, currentFile)
	_ = s.fs.Remove(tmp)
	f, err := s.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("groups: create %s: %w", tmp, err)
	}
	_, err = f.Write([]byte(logDirName(seq) + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, name)
	}
	if err == nil {
		err = s.fs.SyncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("groups: switch %s to %s: %w", name, logDirName(seq), err)
	}
	return nil
}

func (s *logStore) replay(fn func(int64, kv) error) error {
	off, end := s.log.StartOffset(), s.log.NextOffset()
	var n int64
	for off < end {
		sl, err := s.log.Read(off, end, 1<<20)
		if err != nil {
			return err
		}
		b, err := sl.Bytes()
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return fmt.Errorf("groups: internal log read at offset %d returned nothing before %d", off, end)
		}
		next := off
		err = decodeBatches(b, func(o int64, r kv) error {
			n++
			next = o + 1
			return fn(o, r)
		})
		if err != nil {
			return err
		}
		if next <= off {
			return fmt.Errorf("groups: internal log does not advance at offset %d", off)
		}
		off = next
	}
	s.records.Store(n)
	return nil
}

func (s *logStore) start(snapshot func() []kv) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshot = snapshot
	if n := s.records.Load(); n > s.compactMin {
		live := snapshot()
		if n > 2*int64(len(live)) {
			if err := s.rewriteLocked(live); err != nil {
				return err
			}
		}
	}
	s.live.Store(int64(len(s.snapshot())))
	s.acc = acceptor.Start(s.log, s.acfg)
	return nil
}

func (s *logStore) append(recs []kv, apply func(int64)) error {
	buf := encodeBatch(nil, recs, s.now())
	s.mu.RLock()
	if s.closed || s.acc == nil {
		s.mu.RUnlock()
		return errStoreClosed
	}
	if s.broken != nil {
		s.mu.RUnlock()
		return s.broken
	}
	// Background context: once queued, the write completes and is applied,
	// so memory and log agree whatever happens to the caller.
	res, err := s.acc.Append(context.Background(), &acceptor.Request{Batches: buf, Records: int64(len(recs)), Durable: true})
	if err == nil {
		apply(s.posBase + res.BaseOffset)
	}
	n := s.records.Add(int64(len(recs)))
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("groups: write internal log: %w", err)
	}
	if n > s.compactMin && n > 2*s.live.Load() && s.compacting.CompareAndSwap(false, true) {
		defer s.compacting.Store(false)
		if err := s.compact(); err != nil {
			s.logf("groups: compacting the internal log failed", "err", err)
		}
	}
	return nil
}

// compact stops the acceptor, rewrites the log to its live records and
// restarts the acceptor on the result.
func (s *logStore) compact() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if err := s.acc.Close(); err != nil {
		s.logf("groups: internal log writer stopped with an error", "err", err)
	}
	err := s.rewriteLocked(s.snapshot())
	s.acc = acceptor.Start(s.log, s.acfg)
	return err
}

// rewriteLocked writes live to a fresh log directory, switches CURRENT to
// it and removes the old one. No writer may be running. On failure before
// the switch the old log stays live.
func (s *logStore) rewriteLocked(live []kv) error {
	seq := s.seq + 1
	dir := path.Join(s.dir, logDirName(seq))
	if err := s.fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("groups: clear %s: %w", dir, err)
	}
	nl, err := storage.Open(s.fs, dir, s.scfg)
	if err != nil {
		return fmt.Errorf("groups: create compacted log: %w", err)
	}
	fail := func(err error) error {
		_ = nl.Close()
		_ = s.fs.RemoveAll(dir)
		return fmt.Errorf("groups: write compacted log: %w", err)
	}
	var off int64
	ts := s.now()
	for len(live) > 0 {
		n := min(len(live), 1000)
		buf := encodeBatch(nil, live[:n], ts)
		setBaseOffset(buf, off)
		if err := nl.Append(buf, nil); err != nil {
			return fail(err)
		}
		off += int64(n)
		live = live[n:]
	}
	if err := nl.Sync(); err != nil {
		return fail(err)
	}
	if err := s.writeCurrent(seq); err != nil {
		// The rename may have happened with only the directory fsync
		// failing, so CURRENT may name the new log: point it back at the
		// live one before removing the new one. If that fails too, keep
		// both directories and stop accepting appends, since either may
		// be the one the next Open reads.
		if rerr := s.writeCurrent(s.seq); rerr != nil {
			_ = nl.Close()
			s.broken = fmt.Errorf("groups: internal log unusable after a failed compaction switch: %w", rerr)
			return fmt.Errorf("groups: write compacted log: %w (and restoring CURRENT: %w)", err, rerr)
		}
		return fail(err)
	}
	old := s.log
	s.posBase += old.NextOffset()
	s.log, s.seq = nl, seq
	s.records.Store(off)
	s.live.Store(off)
	if err := old.Close(); err != nil {
		s.logf("groups: closing the old internal log failed", "err", err)
	}
	if err := s.fs.RemoveAll(old.Dir()); err != nil {
		s.logf("groups: removing the old internal log failed", "dir", old.Dir(), "err", err)
	} else if err := s.fs.SyncDir(s.dir); err != nil {
		s.logf("groups: syncing the coordinator directory failed", "err", err)
	}
	if s.compacted != nil {
		s.compacted()
	}
	return nil
}

func (s *logStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.acc != nil {
		err = s.acc.Close()
	}
	if cerr := s.log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("groups: close internal log: %w", err)
	}
	return nil
}
