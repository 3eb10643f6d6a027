package groups

import "github.com/sluicedb/sluice/internal/kvlog"

// A read-only view of the coordinator's records for the broker's
// __consumer_offsets topic: OpenWatched calls a watcher with every record
// the coordinator replays at open and, after each append is durable,
// with the records it appended, in order. The records are in Kafka's
// __consumer_offsets key and value formats (see records.go); a nil Value
// is a tombstone.
//
// The watcher is called on the coordinator's goroutines, possibly under
// its locks: it must not block or call into the coordinator (the broker's
// queues the records and returns).

// Watcher receives the coordinator's records. replayed is true for the
// records of the log replayed at open.
type Watcher func(recs []kvlog.Record, replayed bool)

// OpenWatched is Open with a watcher of the coordinator's records.
func OpenWatched(cfg Config, w Watcher) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := newMetrics(cfg.Registerer)
	ls, err := openLogStore(cfg, m.compactions.Inc)
	if err != nil {
		return nil, err
	}
	st := &watchedStore{store: ls, w: w}
	c, err := open(cfg, st, m)
	if err != nil {
		_ = st.close()
		return nil, err
	}
	return c, nil
}

// watchedStore tells its watcher what its store replays and makes durable.
type watchedStore struct {
	store
	w Watcher
}

func (s *watchedStore) replay(fn func(int64, kv) error) error {
	return s.store.replay(func(off int64, r kv) error {
		s.w([]kv{r}, true)
		return fn(off, r)
	})
}

func (s *watchedStore) append(recs []kv, apply func(int64)) error {
	return s.store.append(recs, func(base int64) {
		s.w(recs, false)
		apply(base)
	})
}
