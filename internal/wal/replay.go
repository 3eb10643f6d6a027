package wal

import (
	"encoding/binary"
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

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/vfs"
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
	spares  []segFile       // retired segment files kept for reuse (name: segment's + spareSuffix)
	paths   []string        // other files, removed by Done
	nextSeq uint64          // above every segment's and spare's number
	log     *slog.Logger

	// keep is how many segment files Done keeps as spares for w (0: a
	// start with the WAL off, which removes them all).
	keep int
	w    *WAL
}

// segFile is a segment file found in the directory.
type segFile struct {
	seq  uint64
	path string
}

// Applied reports what Replay.Apply did to one log.
type Applied struct {
	Batches int   // batches appended
	Skipped int   // entries (or their tails) dropped: past a hole in the log
	End     int64 // the log's end afterwards
	// LogEnd is where the log ended when the first dropped entry was
	// met, and DroppedFrom and DroppedTo the first and last offset of
	// the batches dropped (all three zero when Skipped is 0).
	LogEnd, DroppedFrom, DroppedTo int64
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
	for _, s := range rp.segs {
		es, err := readSegment(fs, s.path, s.seq)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			rp.byKey[e.key] = append(rp.byKey[e.key], e)
		}
	}
	return rp, nil
}

// listSegments lists the files in dir: segments, oldest first, spare
// files (retired segments renamed for reuse), and anything else. The
// next segment number is above every segment's and spare's, so that a
// spare reused later is always renamed to a number above any its old
// entries were sealed with: they fail their CRC there.
func listSegments(fs vfs.FS, dir string) (*Replay, error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	rp := &Replay{fs: fs, dir: dir, byKey: map[Key][]entry{}, nextSeq: 1, log: slog.New(slog.DiscardHandler)}
	for _, n := range names {
		path := filepath.Join(dir, n)
		seg, spare := strings.CutSuffix(n, spareSuffix)
		if seq, ok := parseSegName(seg); ok {
			rp.nextSeq = max(rp.nextSeq, seq+1)
			if spare {
				rp.spares = append(rp.spares, segFile{seq, path})
			} else {
				rp.segs = append(rp.segs, segFile{seq, path})
			}
			continue
		}
		rp.paths = append(rp.paths, path)
	}
	sort.Slice(rp.segs, func(i, j int) bool { return rp.segs[i].seq < rp.segs[j].seq })
	return rp, nil
}

// parseSegName returns the number of a segment file's name.
func parseSegName(n string) (uint64, bool) {
	stem, ok := strings.CutSuffix(n, segSuffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(stem, 10, 64)
	return seq, err == nil
}

// readSegment reads the entries of one segment file, up to the first
// that does not decode.
func readSegment(fs vfs.FS, path string, seq uint64) ([]entry, error) {
	b, err := readFile(fs, path)
	if err != nil {
		return nil, err
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
	return rp.ApplyNamed(k, fmt.Sprintf("%x/%d", k.Topic, k.Partition), t)
}

// ApplyNamed is Apply for the log called name (a topic partition, a
// coordinator's log), which the warning about dropped entries names: a
// log shorter than the WAL expects either never had the dropped batches
// acknowledged (their write or an earlier one of the key failed), or lost
// fsynced bytes of its own after a crash.
func (rp *Replay) ApplyNamed(k Key, name string, t Target) (Applied, error) {
	es := rp.byKey[k]
	delete(rp.byKey, k)
	a, err := applyEntries(es, t, math.MaxInt64)
	if a.Skipped > 0 {
		rp.log.Warn("wal: replay dropped entries that do not continue the log: the log ends before them, "+
			"so they were never acknowledged, or the log lost fsynced data in a crash",
			"log", name, "topic_id", fmt.Sprintf("%x", k.Topic), "partition", k.Partition,
			"entries", a.Skipped, "log_end", a.LogEnd, "dropped_from", a.DroppedFrom, "dropped_to", a.DroppedTo)
	}
	return a, err
}

// Done retires the old segments, oldest first, each change synced before
// the next (see collect): the first few full-length ones are renamed to
// spares that the WAL reuses instead of zeroing new files (as many as it
// keeps while it runs), the others are removed, as are surplus spares
// and unknown files. The caller has replayed and fsynced every log; the
// entries of keys never applied (deleted topics) are dropped.
func (rp *Replay) Done() error {
	var kept []string
	for _, s := range rp.spares {
		if len(kept) < rp.keep && rp.fullSize(s.path) {
			kept = append(kept, s.path)
			continue
		}
		if err := rp.remove(s.path); err != nil {
			return err
		}
	}
	for _, p := range rp.paths {
		if err := rp.remove(p); err != nil {
			return err
		}
	}
	for _, s := range rp.segs {
		if len(kept) < rp.keep && rp.fullSize(s.path) {
			spare := s.path + spareSuffix
			if err := rp.fs.Rename(s.path, spare); err == nil {
				if err := rp.fs.SyncDir(rp.dir); err != nil {
					return fmt.Errorf("wal: sync directory %s: %w", rp.dir, err)
				}
				kept = append(kept, spare)
				continue
			}
		}
		if err := rp.remove(s.path); err != nil {
			return err
		}
	}
	if rp.w != nil {
		rp.w.recycleMu.Lock()
		rp.w.recycle = append(rp.w.recycle, kept...)
		rp.w.recycleMu.Unlock()
	}
	rp.segs, rp.spares, rp.paths, rp.byKey = nil, nil, nil, nil
	return nil
}

// remove removes a file Done does not keep and syncs the directory.
func (rp *Replay) remove(path string) error {
	if err := rp.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("wal: remove replayed segment %s: %w", path, err)
	}
	if err := rp.fs.SyncDir(rp.dir); err != nil {
		return fmt.Errorf("wal: sync directory %s: %w", rp.dir, err)
	}
	return nil
}

// fullSize reports whether a segment file has its full length (zeroed
// ahead when it was made): a shorter one is not worth keeping. With no
// WAL to reuse it (keep 0) nothing is kept anyway.
func (rp *Replay) fullSize(path string) bool {
	if rp.w == nil {
		return false
	}
	return rp.w.fullSize(path)
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
				if a.Skipped == 0 {
					a.LogEnd, a.DroppedFrom = end, h.BaseOffset
				}
				a.DroppedFrom = min(a.DroppedFrom, h.BaseOffset)
				a.DroppedTo = max(a.DroppedTo, batchesEnd(e.data[pos:])-1)
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

// batchesEnd returns the offset after the last whole batch in b.
func batchesEnd(b []byte) int64 {
	var end int64
	for len(b) > 0 {
		h, err := batch.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			break
		}
		end = h.LastOffset() + 1
		b = b[h.Size():]
	}
	return end
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

// Pending reports k's data entries: how many there are and the offsets
// they cover, from the first batch of the oldest to the end of the
// newest (first == end when there are none). Replaying them brings a
// log that ends anywhere in [first, end) up to end, unless an entry in
// between was lost (see Inspect).
func (rp *Replay) Pending(k Key) (first, end int64, entries int) {
	for _, e := range rp.byKey[k] {
		if e.kind != kindData || len(e.data) < batch.HeaderSize {
			continue
		}
		h, err := batch.ParseHeader(e.data)
		if err != nil {
			continue
		}
		last := h.LastOffset()
		for pos := h.Size(); pos+batch.HeaderSize <= len(e.data); {
			h, err = batch.ParseHeader(e.data[pos:])
			if err != nil || h.Size() < batch.HeaderSize {
				break
			}
			last = h.LastOffset()
			pos += h.Size()
		}
		if entries == 0 {
			first = e.offset
		}
		entries++
		first, end = min(first, e.offset), max(end, last+1)
	}
	if entries == 0 {
		return 0, 0, 0
	}
	return first, end, entries
}

// Damage is a segment whose readable entries end at a byte that does not
// decode while entries written after it in the same segment do. Replay
// applies only what comes before it; the entries after it are ignored.
// A round's entries are written in order and a failed round abandons the
// segment, so this is damage to the file (a bad sector, bit rot, a write
// lost by the disk), or, after the machine itself lost power, the tail of
// a round whose fdatasync never finished (written out of order by the
// disk, and never acknowledged).
type Damage struct {
	Segment string // the segment file
	At      int64  // the first byte that does not decode
	After   int    // entries of the segment that decode after At
}

// Inspect reads the segments in dir like Read, without changing
// anything, and also looks past the end of each segment's readable
// entries for entries that were written after it: the damage it finds,
// oldest segment first. It is for offline checks (`sluice repair`): the
// scan reads every byte of each segment.
func Inspect(fs vfs.FS, dir string) (*Replay, []Damage, error) {
	rp, err := readAll(fs, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	var ds []Damage
	for _, s := range rp.segs {
		b, err := readFile(fs, s.path)
		if err != nil {
			return nil, nil, err
		}
		end := 0
		for end < len(b) {
			_, n, err := decodeEntry(b[end:], s.seq)
			if err != nil {
				break
			}
			end += n
		}
		if after := entriesAfter(b, end, s.seq); after > 0 {
			ds = append(ds, Damage{Segment: s.path, At: int64(end), After: after})
		}
	}
	return rp, ds, nil
}

// entriesAfter counts the entries of segment seq that decode in b after
// byte from (which does not decode), trying every byte position. Before
// computing a CRC it checks what a real entry of this shape must hold (a
// truncate entry's exact size; a data entry's offset equal to its first
// batch's base offset), so that stale bytes of a recycled file and zeros
// cost a few comparisons per byte.
func entriesAfter(b []byte, from int, seq uint64) int {
	n := 0
	for q := from + 1; q+entryHead <= len(b); q++ {
		if b[q] == 0 && b[q+1] == 0 && b[q+2] == 0 && b[q+3] == 0 {
			continue // no entry is this short: zeros, mostly
		}
		if !plausibleEntry(b[q:]) {
			continue
		}
		if _, size, err := decodeEntry(b[q:], seq); err == nil {
			n++
			q += size - 1
		}
	}
	return n
}

// plausibleEntry reports whether b starts with what an entry's framing
// and first batch must hold, before its CRC is checked.
func plausibleEntry(b []byte) bool {
	n := int(binary.BigEndian.Uint32(b[0:]))
	if n < fixedBody || n > len(b)-frameSize {
		return false
	}
	switch b[8] {
	case kindTruncate:
		return n == fixedBody
	case kindData, kindBatches:
		data := b[entryHead : frameSize+n]
		return len(data) >= batch.HeaderSize && string(data[:8]) == string(b[29:37])
	}
	return false
}

// readFile reads a whole segment file.
func readFile(fs vfs.FS, path string) ([]byte, error) {
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
	return b, nil
}
