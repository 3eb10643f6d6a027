package groups

import (
	"errors"
	"fmt"

	"github.com/sluicedb/sluice/internal/kvlog"
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
// through an acceptor, durable (fsynced) before append returns, compacted
// to the live records (package kvlog, which draws the layout of
// Config.Dir).
type logStore struct{ *kvlog.Log }

func openLogStore(cfg Config, onCompact func()) (*logStore, error) {
	l, err := kvlog.Open(kvlog.Config{
		FS:                cfg.FS,
		Dir:               cfg.Dir,
		Fsync:             cfg.Fsync,
		WAL:               cfg.WAL,
		WALName:           WALName,
		CompactMinRecords: cfg.CompactMinRecords,
		Now:               cfg.Now,
		Logger:            cfg.Logger.With("log", "groups"),
		OnCompact:         onCompact,
	})
	if err != nil {
		return nil, fmt.Errorf("groups: %w", err)
	}
	return &logStore{l}, nil
}

func (s *logStore) replay(fn func(int64, kv) error) error { return s.Replay(fn) }

func (s *logStore) start(snapshot func() []kv) error { return s.Start(snapshot) }

func (s *logStore) append(recs []kv, apply func(int64)) error {
	err := s.Append(recs, apply)
	if errors.Is(err, kvlog.ErrClosed) {
		return errStoreClosed
	}
	return err
}

func (s *logStore) close() error { return s.Close() }
