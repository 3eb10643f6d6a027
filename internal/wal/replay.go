package wal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sluice/internal/batch"
	"sluice/internal/vfs"
)

// Target is the partition log a replay appends to; *storage.Log
// implements it.
type Target interface {
	NextOffset() int64
	// Append writes whole batches continuing the log (hs nil: it
	// validates them itself).
	Append(b []byte, hs []batch.Header) error
}

// Replay is what Open found in the segments of a previous run.
type Replay struct {
	fs      vfs.FS
	dir     string
	byKey   map[Key][]entry // each key's entries in WAL order
	segs    []segFile       // the old segments, oldest first
	paths   []string        // the files to remove: spares, then the old segments oldest first
	nextSeq uint64
	log     *slog.Logger
}

// segFile is a segment file found in the directory.
type segFile struct {
	seq  uint64
	path string
}

// Applied reports what Replay.Apply did to one log.
type Applied struct {
	Batches int   // batches appended
	Skipped int   // entries (or their tails) not applied: past a hole or stale
	End     int64 // the log's end afterwards
}

// Read reads the segments a previous run left in dir, without opening a
// WAL to write: for a start with the WAL off, which replays them and then
// removes them (Replay.Done).
func Read(fs vfs.FS, dir string, lg *slog.Logger) (*Replay, error) {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return readAll(fs, dir, lg)
}

// readAll reads every segment in dir, oldest first.
func readAll(fs vfs.FS, dir string, lg *slog.Logger) (*Replay, error) {
	rp, err := listSegments(fs, dir)
	if err != nil {
		return nil, err
	}
	rp.log = lg
	for i, s := range rp.segs {
		es, err := readSegment(fs, s.path, s.seq)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			rp.byKey[e.key] = append(rp.byKey[e.key], e)
		}
		if i == len(rp.segs)-1 {
			rp.nextSeq = s.seq + 1
		}
	}
	return rp, nil
}

// listSegments lists the files in dir: spare files (retired segments
// renamed for reuse) and anything else first, then segments, oldest
// first.
func listSegments(fs vfs.FS, dir string) (*Replay, error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	rp := &Replay{fs: fs, dir: dir, byKey: map[Key][]entry{}, nextSeq: 1, log: slog.New(slog.DiscardHandler)}
	for _, n := range names {
		if stem, ok := strings.CutSuffix(n, segSuffix); ok {
			if seq, err := strconv.ParseUint(stem, 10, 64); err == nil && len(stem) == 20 {
				rp.segs = append(rp.segs, segFile{seq, filepath.Join(dir, n)})
				continue
			}
		}
		rp.paths = append(rp.paths, filepath.Join(dir, n))
	}
	sort.Slice(rp.segs, func(i, j int) bool { return rp.segs[i].seq < rp.segs[j].seq })
	for _, s := range rp.segs {
		rp.paths = append(rp.paths, s.path)
	}
	return rp, nil
}

// readSegment reads the entries of one segment file, up to the first
// that does not decode.
func readSegment(fs vfs.FS, path string, seq uint64) ([]entry, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("wal: size of %s: %w", path, err)
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, fmt.Errorf("wal: read %s: %w", path, err)
	}
	var es []entry
	for pos := 0; pos < len(b); {
		e, n, err := decodeEntry(b[pos:], seq)
		if err != nil {
			break
		}
		es = append(es, e)
		pos += n
	}
	return es, nil
}

// Keys returns the keys with entries (for tests and reports).
func (rp *Replay) Keys() []Key {
	ks := make([]Key, 0, len(rp.byKey))
	for k := range rp.byKey {
		ks = append(ks, k)
	}
	return ks
}

// Apply brings k's log up to date from the WAL, after the log's own
// recovery: in WAL order, batches it holds are skipped and batches at its
// end appended. A batch past its end is a hole: nothing from there on was
// acknowledged (a partition acknowledges an offset only once every offset
// below it is durable), so the entry is ignored; so is the stale part of
// an entry followed by a truncate entry of k. The caller fsyncs the log
// afterwards. Apply forgets k's entries.
func (rp *Replay) Apply(k Key, t Target) (Applied, error) {
	es := rp.byKey[k]
	delete(rp.byKey, k)
	a, err := applyEntries(es, t, math.MaxInt64)
	if a.Skipped > 0 {
		rp.log.Warn("wal: replay ignored entries past the log's end (never acknowledged) or stale",
			"topic_id", fmt.Sprintf("%x", k.Topic), "partition", k.Partition, "entries", a.Skipped)
	}
	return a, err
}

// Done removes the old segments, oldest first, each removal synced before
// the next (see collect). The caller has replayed and fsynced every log;
// the entries of keys never applied (deleted topics) are dropped.
func (rp *Replay) Done() error {
	for _, p := range rp.paths {
		if err := rp.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("wal: remove replayed segment %s: %w", p, err)
		}
		if err := rp.fs.SyncDir(rp.dir); err != nil {
			return fmt.Errorf("wal: sync directory %s: %w", rp.dir, err)
		}
	}
	rp.paths, rp.byKey = nil, nil
	return nil
}

// applyEntries applies es (one key's entries, WAL order) to t, appending
// no batch at or past limit.
func applyEntries(es []entry, t Target, limit int64) (Applied, error) {
	// Each data entry is capped by the truncate entries after it.
	caps := make([]int64, len(es))
	c := limit
	for i := len(es) - 1; i >= 0; i-- {
		caps[i] = c
		if es[i].kind == kindTruncate {
			c = min(c, es[i].offset)
		}
	}
	var a Applied
	end := t.NextOffset()
	for i, e := range es {
		if e.kind != kindData {
			continue
		}
		run, runEnd, skipped := -1, 0, false // the batches to append: e.data[run:runEnd]
		for pos := 0; pos < len(e.data); {
			h, err := batch.ParseHeader(e.data[pos:])
			if err != nil || pos+h.Size() > len(e.data) {
				return a, fmt.Errorf("wal: an entry holds a bad batch at byte %d: %v", pos, err)
			}
			if h.LastOffset() >= caps[i] {
				break // stale: a later truncate entry cut it
			}
			switch {
			case h.LastOffset() < end && run < 0:
				// held already
			case h.BaseOffset == end:
				if run < 0 {
					run = pos
				}
				runEnd = pos + h.Size()
				end = h.LastOffset() + 1
				a.Batches++
			default:
				// A hole before it, or a batch that straddles the log's
				// end: the log's history differs from here on.
				skipped = true
			}
			if skipped {
				break
			}
			pos += h.Size()
		}
		if skipped {
			a.Skipped++
		}
		if run >= 0 {
			if err := t.Append(e.data[run:runEnd], nil); err != nil {
				return a, fmt.Errorf("wal: replay into the log at offset %d: %w", t.NextOffset(), err)
			}
		}
	}
	a.End = t.NextOffset()
	return a, nil
}

// refill applies k's entries found in the WAL's current segment files to
// t, up to offset to.
func (w *WAL) refill(k Key, t Target, to int64) error {
	w.mu.Lock()
	type sp struct {
		seq  uint64
		path string
	}
	segs := make([]sp, len(w.segs))
	for i, s := range w.segs {
		segs[i] = sp{s.seq, s.path}
	}
	w.mu.Unlock()
	var es []entry
	for _, s := range segs {
		all, err := readSegment(w.fs, s.path, s.seq)
		if err != nil {
			return err
		}
		for _, e := range all {
			if e.key == k {
				es = append(es, e)
			}
		}
	}
	_, err := applyEntries(es, t, to)
	return err
}
