package storage

import (
	"errors"
	"fmt"
	"os"
)

// ApplyRetention removes whole segments past the retention limits (never
// the active segment) and advances StartOffset. A segment goes when its
// newest batch is older than RetentionAge, or while the log without it
// would still hold at least RetentionBytes; removal stops at the first
// segment that must stay (Config.RetainFrom included). Readers holding a Slice of a removed segment
// finish their current read; later reads of it fail with
// ErrOffsetOutOfRange.
func (l *Log) ApplyRetention() (removed int, err error) {
	if err := l.checkWritable(); err != nil {
		return 0, err
	}
	l.adoptConfig()
	if !l.cleanMu.TryLock() {
		return 0, nil // a compaction pass is rewriting segments; retention runs next time
	}
	defer l.cleanMu.Unlock()
	l.mu.RLock()
	start := min(l.start, l.active().next)
	l.mu.RUnlock()
	cutoff := int64(0)
	byAge := l.cfg.RetentionAge > 0
	if byAge {
		cutoff = l.cfg.Now().Add(-l.cfg.RetentionAge).UnixMilli()
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	for len(l.segs) > 1 {
		s := l.segs[0]
		old := byAge && s.maxTs != noTimestamp && s.maxTs < cutoff
		big := l.cfg.RetentionBytes > 0 && total-s.size >= l.cfg.RetentionBytes
		deleted := s.next <= start // below the start DeleteRecordsBefore set
		if !old && !big && !deleted {
			break
		}
		if l.cfg.RetainFrom != nil && l.segs[1].base > l.cfg.RetainFrom() {
			break // the segment holds offsets at or past RetainFrom
		}
		// Unlist first so no new reader finds it, then delete the files.
		// Each removal is synced before the next, so a crash can only
		// leave a prefix of the log removed, never a hole.
		l.mu.Lock()
		l.segs = l.segs[1:]
		l.mu.Unlock()
		total -= s.size
		s.release()
		if err := l.fs.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("storage: retention: remove %s: %w", s.path, err)
		}
		for _, p := range []string{s.indexPath(), s.timeIndexPath()} {
			if err := l.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return removed, fmt.Errorf("storage: retention: remove %s: %w", p, err)
			}
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return removed, fmt.Errorf("storage: retention: sync directory %s: %w", l.dir, err)
		}
		removed++
	}
	return removed, nil
}
