package broker

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/groups"
	"github.com/sluicedb/sluice/internal/kvlog"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/txn"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// segmentWriteBehind is how many of a partition's newest bytes its
// active segment would keep in memory while the WAL is on
// (storage.Config.WriteBehind): acks=all appends are durable in the WAL
// before they are acknowledged, so a produce request could copy a
// partition's batches into memory instead of writing them to the segment
// file. A heal keeps what the segment file already holds
// (storage.Log.RecoverUpTo), so a full disk needs room only for the
// tails' bytes to heal. 16 KiB keeps most of the CPU saved with 32 KiB
// (one write per dozens of requests either way) at about half the
// memory: docs/perf/2026-12-01-tuning-history.md, "Write-behind segment tail".
const segmentWriteBehind = 16 << 10

// openWAL reads the write-ahead log a previous run left in <data>/wal (if
// any) for load to replay into the partitions, and opens a fresh one for
// this run when the WAL is on (fsync policy always). The directory
// exists only once a WAL was used: a broker that never ran with it does
// not scan or create anything.
func (b *Broker) openWAL() error {
	dir := b.layout.WALDir()
	if !b.cfg.wal || b.cfg.fsync != acceptor.FsyncAlways {
		if _, err := b.fs.Stat(dir); err != nil {
			return nil // no WAL to replay, none wanted
		}
		rp, err := wal.Read(b.fs, dir, b.componentLogger("wal"))
		if err != nil {
			return fmt.Errorf("broker: read the write-ahead log: %w", err)
		}
		b.walReplay, b.walOff = rp, true
		return nil
	}
	w, rp, err := wal.Open(wal.Options{FS: b.fs, Dir: dir, SegmentBytes: b.cfg.walSegmentBytes, Logger: b.componentLogger("wal")})
	if err != nil {
		return fmt.Errorf("broker: open the write-ahead log: %w", err)
	}
	b.wal, b.walReplay = w, rp
	return nil
}

// replayWAL brings a partition log just opened up to date from the WAL
// of the previous run (batches acknowledged but durable only there) and
// fsyncs it. A partition created now has no entries.
func (b *Broker) replayWAL(key wal.Key, l *storage.Log, log *slog.Logger) error {
	if b.walReplay == nil {
		return nil
	}
	name := filepath.Base(filepath.Dir(l.Dir())) + "/" + filepath.Base(l.Dir()) // topic/partition
	a, err := b.walReplay.ApplyNamed(key, name, l)
	b.metrics.walDropped.Add(float64(a.Skipped))
	if err != nil {
		return fmt.Errorf("replay the write-ahead log: %w", err)
	}
	if a.Batches == 0 {
		return nil
	}
	if err := l.Sync(); err != nil {
		return fmt.Errorf("sync after replaying the write-ahead log: %w", err)
	}
	log.Info("replayed acknowledged batches from the write-ahead log", "batches", a.Batches, "next_offset", a.End)
	return nil
}

// retireWALReplay runs once every partition was opened (and replayed):
// the coordinators' internal logs are brought up to date from it, then
// the old WAL segments are removed (entries of deleted topics with
// them). With the WAL off, its directory goes too.
func (b *Broker) retireWALReplay() error {
	if b.walReplay == nil {
		return nil
	}
	for _, l := range []struct{ dir, name string }{{b.layout.GroupsDir(), groups.WALName}, {b.layout.TransactionsDir(), txn.WALName}} {
		a, err := kvlog.ReplayWAL(b.fs, l.dir, l.name, b.walReplay, b.componentLogger("wal"))
		b.metrics.walDropped.Add(float64(a.Skipped))
		if err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		if a.Batches > 0 {
			b.cfg.logger.Info("replayed acknowledged coordinator records from the write-ahead log", "log", l.name, "batches", a.Batches, "next_offset", a.End)
		}
	}
	if err := b.walReplay.Done(); err != nil {
		return fmt.Errorf("broker: retire the replayed write-ahead log: %w", err)
	}
	b.walReplay = nil
	if b.walOff {
		b.walOff = false
		dir := b.layout.WALDir()
		if err := vfs.RemoveAllDurable(b.fs, dir); err != nil {
			return fmt.Errorf("broker: remove %s: %w", dir, err)
		}
	}
	return nil
}

// closeWAL closes the WAL after every partition closed. When each closed
// cleanly (fsynced its log: nothing in the WAL is needed any more), the
// WAL's files are removed, so that a clean restart replays nothing and a
// log repaired offline is not refilled from entries of before.
func (b *Broker) closeWAL(clean bool) error {
	w := b.wal
	if w == nil {
		return nil
	}
	if !clean {
		return w.Close()
	}
	if err := w.Retire(); err != nil {
		return fmt.Errorf("broker: remove the write-ahead log after a clean shutdown: %w", err)
	}
	return nil
}
