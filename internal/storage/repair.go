package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
)

// RepairReport says what Repair found in a log and what it removed.
type RepairReport struct {
	Dir string
	// Corruption is what stopped recovery; nil when every batch of the
	// log is valid (then nothing else is set).
	Corruption *CorruptionError
	// Truncated: the log was cut at Corruption.Position. Without it the
	// fields below say what a truncation would remove.
	Truncated bool
	// FirstOffset is the first offset removed (Corruption.Offset);
	// LastOffset the last offset of a valid batch found after the
	// corruption (-1 when none could be read).
	FirstOffset, LastOffset int64
	// RemovedBytes counts the bytes cut from the corrupt segment and
	// those of the later segments.
	RemovedBytes int64
	// LaterSegments are the segment files after the corrupt one, which a
	// truncation moves aside whole.
	LaterSegments []string
	// Copies are the files kept aside (the corrupt segment's copy and
	// the later segments, renamed with a ".broken" suffix).
	Copies []string
}

// Repair checks every batch of the log in dir (CRC included, trusting no
// index) and, if recovery stops at corruption, reports it; without
// truncate it changes nothing on disk. With truncate
// it then cuts the log at the last valid batch before the corruption:
// the corrupt segment is copied to <segment>.broken and truncated, later
// segments are renamed to <segment>.broken, and the log is opened again
// to check it. The caller holds the data directory's lock.
func Repair(fs vfs.FS, dir string, truncate bool) (RepairReport, error) {
	rep := RepairReport{Dir: dir, LastOffset: -1}
	l, err := Open(fs, dir, Config{verify: true, noCopy: !truncate})
	if err == nil {
		return rep, l.Close()
	}
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		return rep, err
	}
	rep.Corruption, rep.FirstOffset = ce, ce.Offset
	if ce.Broken != "" {
		rep.Copies = append(rep.Copies, ce.Broken)
	}

	// What lies after the corruption: valid batches in the rest of the
	// segment, then whole later segments.
	f, err := fs.Open(ce.Segment)
	if err != nil {
		return rep, fmt.Errorf("storage: repair: %w", err)
	}
	size, err := f.Size()
	if err == nil {
		rep.RemovedBytes = size - ce.Position
		rep.LastOffset, err = lastValidAfter(&window{f: f, size: size}, ce.Position)
	}
	f.Close()
	if err != nil {
		return rep, fmt.Errorf("storage: repair: read %s: %w", ce.Segment, err)
	}
	names, err := fs.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("storage: repair: %w", err)
	}
	corruptBase, _ := parseSegmentName(filepath.Base(ce.Segment))
	for _, n := range names {
		base, ok := parseSegmentName(n)
		if !ok || base <= corruptBase {
			continue
		}
		p := filepath.Join(dir, n)
		fi, err := fs.Stat(p)
		if err != nil {
			return rep, fmt.Errorf("storage: repair: %w", err)
		}
		rep.LaterSegments = append(rep.LaterSegments, p)
		rep.RemovedBytes += fi.Size()
		if g, err := fs.Open(p); err == nil {
			if sz, err := g.Size(); err == nil {
				if last, err := lastValidAfter(&window{f: g, size: sz}, -1); err == nil && last > rep.LastOffset {
					rep.LastOffset = last
				}
			}
			g.Close()
		}
	}
	sort.Strings(rep.LaterSegments)
	if !truncate {
		return rep, nil
	}
	if ce.Broken == "" {
		return rep, fmt.Errorf("storage: repair: could not keep a copy of %s; nothing was changed", ce.Segment)
	}
	for _, p := range rep.LaterSegments {
		if err := fs.Rename(p, p+brokenSuffix); err != nil {
			return rep, fmt.Errorf("storage: repair: move %s aside: %w", p, err)
		}
		rep.Copies = append(rep.Copies, p+brokenSuffix)
		stem := p[:len(p)-len(logSuffix)]
		for _, ix := range []string{stem + indexSuffix, stem + timeIndexSuffix} {
			if err := fs.Remove(ix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return rep, fmt.Errorf("storage: repair: %w", err)
			}
		}
	}
	f, err = fs.OpenRW(ce.Segment)
	if err != nil {
		return rep, fmt.Errorf("storage: repair: %w", err)
	}
	err = f.Truncate(ce.Position)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, fmt.Errorf("storage: repair: truncate %s at byte %d: %w", ce.Segment, ce.Position, err)
	}
	// The cut segment is the last one now: its indexes and any clean
	// shutdown checkpoint describe the old file.
	stem := ce.Segment[:len(ce.Segment)-len(logSuffix)]
	for _, p := range []string{stem + indexSuffix, stem + timeIndexSuffix, filepath.Join(dir, checkpointName)} {
		if err := fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return rep, fmt.Errorf("storage: repair: %w", err)
		}
	}
	if err := fs.SyncDir(dir); err != nil {
		return rep, fmt.Errorf("storage: repair: sync %s: %w", dir, err)
	}
	rep.Truncated = true
	l, err = Open(fs, dir, Config{verify: true})
	if err != nil {
		return rep, fmt.Errorf("storage: repair: the log still does not open: %w", err)
	}
	return rep, l.Close()
}

// lastValidAfter returns the last offset of the valid batches found
// after position from (-1 when none), jumping over each one it finds.
func lastValidAfter(w *window, from int64) (int64, error) {
	last := int64(-1)
	for q := from + 1; q+batch.HeaderSize <= w.size; {
		hb, err := w.bytes(q, batch.HeaderSize)
		if err != nil {
			return last, err
		}
		h, err := batch.ParseHeader(hb)
		if hb[16] != 2 || err != nil || h.Size() < batch.HeaderSize || int64(h.Size()) > w.size-q {
			q++
			continue
		}
		b, err := w.bytes(q, h.Size())
		if err != nil {
			return last, err
		}
		if _, err := batch.Validate(b); err != nil {
			q++
			continue
		}
		last = max(last, h.LastOffset())
		q += int64(h.Size())
	}
	return last, nil
}
