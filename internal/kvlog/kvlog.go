// Package kvlog is a durable, compacted key-value record log for a
// coordinator's state: records are written as RecordBatches to an
// internal partition log through an acceptor, fsynced before Append
// returns, replayed in order on open, and compacted to the live records
// when the log holds more than twice as many as are live.
//
// Layout of Config.Dir:
//
//	CURRENT       names the live log directory ("log-000003"), replaced
//	              with vfs.WriteFileAtomic (CURRENT.tmp, fsync, rename,
//	              directory fsync)
//	log-000003/   the internal log (package storage's layout)
//
// Compaction writes the live records to a fresh log-N+1, fsyncs it,
// switches CURRENT, then removes the old directory. Open removes any log
// directory CURRENT does not name (an interrupted compaction), so a crash
// at any point leaves either the old or the new log, never a mix.
//
// With the shared write-ahead log (Config.WAL, fsync policy always) the
// records are written without an acceptor, on the caller's goroutine, to
// the WAL (and, in bulk, to the internal log); they are durable once a WAL round (one
// fdatasync shared with the partitions' appends of that round) or the
// log's own fsync covers them (see walWriter). Their WAL key carries the
// log's generation (WALKey): a compaction starts a new key, so a crash
// after the switch never replays entries of the replaced log into the
// compacted one, and a crash before it replays them into the old one. The
// broker replays the WAL into the internal log at start (ReplayWAL)
// before the WAL's old segments go.
//
// The group coordinator (internal/groups) and the transaction coordinator
// (internal/txn) keep their state here.
package kvlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// Record is one key-value record. A nil Value is a tombstone.
type Record struct {
	Key   []byte
	Value []byte
}

// ErrClosed: the log is closed or not started.
var ErrClosed = errors.New("kvlog: closed")

// Config sets up a Log.
type Config struct {
	FS  vfs.FS
	Dir string
	// Fsync of the acceptor; default acceptor.FsyncAlways.
	Fsync acceptor.FsyncPolicy
	// CompactMinRecords: compact when the log holds more than this many
	// records and more than twice as many as are live. Default 10000.
	CompactMinRecords int
	Now               func() time.Time
	// Logger receives the log's warnings (a failed compaction) and those
	// of its storage and acceptor; default: discard. Callers name the log
	// with Logger.With.
	Logger *slog.Logger
	// OnCompact, if set, is called after each compaction (metrics).
	OnCompact func()
	// WAL, when set (Fsync acceptor.FsyncAlways only), is the shared
	// write-ahead log the records are made durable through, in the same
	// rounds as the partitions' appends; WALName names the log's entries
	// there (see WALKey) and must not change between runs.
	WAL     *wal.WAL
	WALName string
}

// storageConfig is the internal log's storage configuration.
func storageConfig(lg *slog.Logger) storage.Config {
	return storage.Config{RetentionAge: -1, RetentionBytes: -1, SegmentAge: -1, SegmentBytes: 64 << 20, Logger: lg}
}

// Log is the store. Goroutines: without a WAL, Start starts the acceptor
// goroutine that writes the internal log; Close stops it (a compaction
// stops and restarts it under the exclusive lock). With a WAL, Start
// starts the checkpoint goroutine (checkpointLoop); Close stops it
// (stopCk) and waits for it (ckDone).
type Log struct {
	fs         vfs.FS
	dir        string
	scfg       storage.Config
	acfg       acceptor.Config
	compactMin int64
	now        func() int64 // milliseconds
	warn       func(msg string, args ...any)
	onCompact  func()
	wal        *wal.WAL
	walName    string
	stopCk     chan struct{}
	ckDone     chan struct{}
	stopOnce   sync.Once

	// mu guards the fields below through broken and orders appends
	// against compaction: Append holds it shared from its write until its
	// apply has returned; compaction holds it exclusively while it swaps
	// logs. Callers must not hold a lock that snapshot takes.
	mu       sync.RWMutex
	seq      int
	posBase  int64
	log      *storage.Log
	acc      *acceptor.Acceptor // without a WAL
	w        *walWriter         // with a WAL
	snapshot func() []Record
	closed   bool
	broken   error

	records    atomic.Int64
	live       atomic.Int64
	compacting atomic.Bool
}

const currentFile = "CURRENT"

func logDirName(seq int) string { return fmt.Sprintf("log-%06d", seq) }

// Open opens (creating) the log in cfg.Dir. Call Replay, then Start.
func Open(cfg Config) (*Log, error) {
	if cfg.FS == nil || cfg.Dir == "" {
		return nil, errors.New("kvlog: Config.FS and Config.Dir are required")
	}
	if cfg.CompactMinRecords <= 0 {
		cfg.CompactMinRecords = 10000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Log{
		fs:   cfg.FS,
		dir:  cfg.Dir,
		scfg: storageConfig(cfg.Logger),
		acfg: acceptor.Config{Fsync: cfg.Fsync, RetentionCheck: -1, QueueSize: 1024,
			Logger: cfg.Logger},
		compactMin: int64(cfg.CompactMinRecords),
		now:        func() int64 { return cfg.Now().UnixMilli() },
		warn:       cfg.Logger.Warn,
		onCompact:  cfg.OnCompact,
		stopCk:     make(chan struct{}),
		ckDone:     make(chan struct{}),
	}
	if cfg.WAL != nil && cfg.Fsync == acceptor.FsyncAlways {
		if cfg.WALName == "" {
			return nil, errors.New("kvlog: Config.WALName is required with Config.WAL")
		}
		s.wal, s.walName = cfg.WAL, cfg.WALName
	}
	if err := vfs.MkdirAllDurable(s.fs, s.dir); err != nil {
		return nil, fmt.Errorf("kvlog: create %s: %w", s.dir, err)
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
		return nil, fmt.Errorf("kvlog: list %s: %w", s.dir, err)
	}
	removed := false
	for _, n := range names {
		if (strings.HasPrefix(n, "log-") && n != logDirName(seq)) || n == currentFile+vfs.TmpSuffix {
			if err := s.fs.RemoveAll(path.Join(s.dir, n)); err != nil {
				return nil, fmt.Errorf("kvlog: remove leftover %s: %w", n, err)
			}
			removed = true
		}
	}
	if removed {
		if err := s.fs.SyncDir(s.dir); err != nil {
			return nil, fmt.Errorf("kvlog: sync %s: %w", s.dir, err)
		}
	}
	s.log, err = storage.Open(s.fs, path.Join(s.dir, logDirName(seq)), s.scfg)
	if err != nil {
		return nil, fmt.Errorf("kvlog: open internal log: %w", err)
	}
	return s, nil
}

func (s *Log) readCurrent() (int, error) {
	name := path.Join(s.dir, currentFile)
	b, err := vfs.ReadFile(s.fs, name)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // absent
	}
	if err != nil {
		return 0, fmt.Errorf("kvlog: read %s: %w", name, err)
	}
	v := strings.TrimSpace(string(b))
	seq, err := strconv.Atoi(strings.TrimPrefix(v, "log-"))
	if err != nil || seq <= 0 || !strings.HasPrefix(v, "log-") {
		return 0, fmt.Errorf("kvlog: %s holds %q, not a log directory name", name, v)
	}
	return seq, nil
}

func (s *Log) writeCurrent(seq int) error {
	name := path.Join(s.dir, currentFile)
	if err := vfs.WriteFileAtomic(s.fs, name, []byte(logDirName(seq)+"\n")); err != nil {
		return fmt.Errorf("kvlog: switch %s to %s: %w", name, logDirName(seq), err)
	}
	return nil
}

// Replay calls fn for every stored record in order, once, before Start,
// with the record's position (see Append).
func (s *Log) Replay(fn func(pos int64, r Record) error) error {
	off, end := s.log.StartOffset(), s.log.NextOffset()
	var n int64
	for off < end {
		sl, err := s.log.Read(off, end, 1<<20)
		if err != nil {
			return fmt.Errorf("kvlog: replay: %w", err)
		}
		b, err := sl.Bytes()
		if err != nil {
			return fmt.Errorf("kvlog: replay: %w", err)
		}
		if len(b) == 0 {
			return fmt.Errorf("kvlog: internal log read at offset %d returned nothing before %d", off, end)
		}
		next := off
		err = decodeBatches(b, func(o int64, r Record) error {
			n++
			next = o + 1
			return fn(o, r)
		})
		if err != nil {
			return err
		}
		if next <= off {
			return fmt.Errorf("kvlog: internal log does not advance at offset %d", off)
		}
		off = next
	}
	s.records.Store(n)
	return nil
}

// Start makes the log writable. snapshot returns the live records; the
// log calls it to compact itself, with no Append in flight.
func (s *Log) Start(snapshot func() []Record) error {
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
	if s.wal != nil {
		s.w = s.newWriter()
		go s.checkpointLoop(s.stopCk, s.ckDone)
		return nil
	}
	s.acc = acceptor.Start(s.log, s.acfg)
	return nil
}

// newWriter returns the WAL writer of the current log. s.mu is held
// exclusively (or the log not started).
func (s *Log) newWriter() *walWriter {
	return newWalWriter(s.wal.For(WALKey(s.walName, s.seq)), s.log, s.warn)
}

// started reports whether the log takes writes (s.mu is held).
func (s *Log) started() bool { return s.acc != nil || s.w != nil }

// Append makes recs durable, in order, then calls apply (if not nil)
// with the position of the first before returning nil. Positions
// increase with the order of the writes and never repeat, even across
// compactions (they are not necessarily the log's offsets). No compaction
// snapshot is taken between the write and the end of apply. On error
// nothing is applied; the records may or may not be on disk (the next
// Replay tells).
func (s *Log) Append(recs []Record, apply func(pos int64)) error { return s.append(recs, apply, true) }

// Write is Append without waiting for the fsync: it returns once recs
// are written (the next Append's fsync, or the acceptor's periodic one,
// or with a WAL the next WAL round or the checkpoint goroutine's tick,
// makes them durable, in order: a durable record implies that every
// earlier one is). For records whose loss in a crash recovery tolerates.
func (s *Log) Write(recs []Record, apply func(pos int64)) error { return s.append(recs, apply, false) }

// Enqueue queues recs, durable, and returns without waiting for them:
// wait returns nil once they are durable, or the write's error. Records
// queued (by Enqueue, Append or Write) one after another by one goroutine
// are written in that order. There is no apply: the caller publishes the
// state the records hold before queuing them, so that a compaction
// snapshot taken while they wait includes it. wait must be called once.
func (s *Log) Enqueue(recs []Record) (wait func() error, err error) {
	buf := encodeBatch(nil, recs, s.now())
	s.mu.RLock()
	if s.closed || !s.started() {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	if s.broken != nil {
		s.mu.RUnlock()
		return nil, s.broken
	}
	// The records go to the shared WAL (s.w) or to the log's acceptor;
	// either way durable returns once they are durable.
	var durable func() error
	if s.w != nil {
		_, durable, err = s.w.write(buf, len(recs))
	} else {
		var pend acceptor.Pending
		pend, err = s.acc.Enqueue(context.Background(), &acceptor.Request{Batches: buf, Records: int64(len(recs)), Durable: true})
		durable = func() error {
			_, err := pend.Wait(context.Background())
			return err
		}
	}
	if err == nil {
		s.records.Add(int64(len(recs)))
	}
	s.mu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("kvlog: write internal log: %w", err)
	}
	return func() error {
		if err := durable(); err != nil {
			return fmt.Errorf("kvlog: write internal log: %w", err)
		}
		s.maybeCompact(s.records.Load())
		return nil
	}, nil
}

func (s *Log) append(recs []Record, apply func(int64), durable bool) error {
	buf := encodeBatch(nil, recs, s.now())
	s.mu.RLock()
	if s.closed || !s.started() {
		s.mu.RUnlock()
		return ErrClosed
	}
	if s.broken != nil {
		s.mu.RUnlock()
		return s.broken
	}
	if s.w != nil {
		return s.appendWAL(buf, len(recs), apply, durable)
	}
	// Background context: once queued, the write completes and is applied,
	// so memory and log agree whatever happens to the caller.
	res, err := s.acc.Append(context.Background(), &acceptor.Request{Batches: buf, Records: int64(len(recs)), Durable: durable})
	if err == nil && apply != nil {
		apply(s.posBase + res.BaseOffset)
	}
	n := s.records.Add(int64(len(recs)))
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("kvlog: write internal log: %w", err)
	}
	s.maybeCompact(n)
	return nil
}

// appendWAL is append with the WAL. s.mu is held shared; appendWAL
// releases it.
func (s *Log) appendWAL(buf []byte, n int, apply func(int64), durable bool) error {
	base, wait, err := s.w.write(buf, n)
	if err == nil && durable {
		err = wait()
	}
	if err == nil && apply != nil {
		apply(s.posBase + base)
	}
	total := s.records.Add(int64(n))
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("kvlog: write internal log: %w", err)
	}
	s.maybeCompact(total)
	return nil
}

// maybeCompact compacts the log when it holds n records, more than the
// minimum and twice as many as are live, and no compaction is running.
func (s *Log) maybeCompact(n int64) {
	if n > s.compactMin && n > 2*s.live.Load() && s.compacting.CompareAndSwap(false, true) {
		defer s.compacting.Store(false)
		if err := s.compact(); err != nil {
			s.warn("kvlog: compacting the internal log failed", "dir", s.dir, "err", err)
		}
	}
}

func (s *Log) compact() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.w != nil {
		// Appends hold s.mu shared through their write: none is half
		// written. Records written and not yet durable are in the
		// snapshot (their state was published first).
		return s.rewriteLocked(s.snapshot())
	}
	if err := s.acc.Close(); err != nil {
		s.warn("kvlog: internal log writer stopped with an error", "err", err)
	}
	err := s.rewriteLocked(s.snapshot())
	s.acc = acceptor.Start(s.log, s.acfg)
	return err
}

// rewriteLocked writes live to a fresh log directory, switches CURRENT to
// it and removes the old one. No writer may be running.
func (s *Log) rewriteLocked(live []Record) error {
	seq := s.seq + 1
	dir := path.Join(s.dir, logDirName(seq))
	if err := s.fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("kvlog: clear %s: %w", dir, err)
	}
	nl, err := storage.Open(s.fs, dir, s.scfg)
	if err != nil {
		return fmt.Errorf("kvlog: create compacted log: %w", err)
	}
	fail := func(err error) error {
		_ = nl.Close()
		_ = s.fs.RemoveAll(dir)
		return fmt.Errorf("kvlog: write compacted log: %w", err)
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
		if rerr := s.writeCurrent(s.seq); rerr != nil {
			_ = nl.Close()
			s.broken = fmt.Errorf("kvlog: internal log unusable after a failed compaction switch: %w", rerr)
			return fmt.Errorf("kvlog: write compacted log: %w (and restoring CURRENT: %w)", err, rerr)
		}
		return fail(err)
	}
	old := s.log
	oldEnd := old.NextOffset()
	if s.w != nil {
		oldEnd = s.w.end() // its batches not yet written to the log count too
	}
	s.posBase += oldEnd
	s.log, s.seq = nl, seq
	if s.w != nil {
		// Before the old log closes: a writer's wait may still fsync it.
		s.w.retire()
		s.w = s.newWriter()
	}
	s.records.Store(off)
	s.live.Store(off)
	if err := old.Close(); err != nil {
		s.warn("kvlog: closing the old internal log failed", "err", err)
	}
	if err := s.fs.RemoveAll(old.Dir()); err != nil {
		s.warn("kvlog: removing the old internal log failed", "dir", old.Dir(), "err", err)
	} else if err := s.fs.SyncDir(s.dir); err != nil {
		s.warn("kvlog: syncing the log directory failed", "err", err)
	}
	if s.onCompact != nil {
		s.onCompact()
	}
	return nil
}

// Generation is the number of the live log directory: 1, plus one per
// compaction.
func (s *Log) Generation() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.seq
}

// Records is the number of records in the live log.
func (s *Log) Records() int64 { return s.records.Load() }

// Close stops the writer and closes the log. It is idempotent.
func (s *Log) Close() error {
	s.mu.RLock()
	ck := s.w != nil
	s.mu.RUnlock()
	if ck {
		// Before taking s.mu: the loop takes it shared.
		s.stopOnce.Do(func() { close(s.stopCk) })
		<-s.ckDone
	}
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
	if s.w != nil {
		err = s.w.close()
	}
	if cerr := s.log.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("kvlog: close internal log: %w", err)
	}
	return nil
}
