package partition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
)

// Producer-state snapshots.
//
// A partition's producer state (the idempotent-producer table) and its
// transaction index (open and aborted transactions) are derived from the
// batch headers of its log. Rebuilding them scans every header of the
// partition; snapshots bound that scan to the log written after the
// newest snapshot, also after a crash.
//
// A snapshot is named by the offset N it covers,
// producers-<N, 20 digits>.snapshot in the partition directory: it holds
// the state that the batches below N produce. Its file is one header line
// and a JSON body:
//
//	sluice-producers v2 crc32c=<8 hex digits of the CRC32C of the body>
//	{"version":2, "start":S, "next":N, "max_pid":P,
//	 "producers":[{"pid":7,"epoch":0,"batches":[[first,last,base],...],
//	               "last_ts":1764640000000}],
//	 "open":[{"pid":9,"first":120}],
//	 "aborted":[{"pid":9,"first":40,"last":52}]}
//
// start is the log start offset when it was taken; batches holds each
// producer's last sequence ranges (first sequence, last sequence, base
// offset; oldest first) and last_ts the max timestamp of its last batch
// or marker (absent in snapshots written before it was kept: the
// producer's LastTimestamp is then -1 until its next batch), open the
// first offset of each open transaction,
// aborted the aborted transactions (first offset, ABORT marker offset).
// A periodic one is written to a temporary file, fsynced, renamed into
// place and the directory fsynced; the one a clean shutdown writes is
// written in place and synced with the logs (writeSnapshotUnsynced,
// CloseAll); the newest snapshotKeep are kept.
//
// When snapshots are taken:
//   - Periodically, after every DefaultSnapshotInterval bytes (NewSnapshots) a partition
//     accepted: the state is captured on the partition's acceptor
//     goroutine at the offset the next append gets (so it matches the
//     log below it exactly), and is written by the broker's snapshot
//     writer only once the high watermark has passed that offset, that
//     is once the log below it is durable. A partition that fails and
//     heals drops the capture it had not written yet and removes the
//     snapshots above its healed log end.
//   - At a clean shutdown, at the log end, once the acceptor stopped.
//
// Recovery (openPartition): snapshots above the recovered log end
// describe offsets the log no longer holds (a crash lost them, or a
// repair truncated the log) and are removed, as are those below the log
// start. The newest remaining one whose header, checksum and body decode
// and agree with its name is loaded; one that does not is removed and the
// next older one tried; then the log is scanned only from N. With no
// usable snapshot the whole log is scanned, as without snapshots. The
// state a snapshot restores keeps producers whose batches retention
// removed since, as the running broker does; a full scan forgets them.
//
// Version 1 (producers.snapshot, bare JSON, written at clean shutdown by
// earlier versions) is still loaded, under the same rules, then removed.
const (
	snapshotPrefix          = "producers-"
	snapshotSuffix          = ".snapshot"
	legacySnapshot          = "producers.snapshot" // version 1
	snapshotMagic           = "sluice-producers v2 crc32c="
	snapshotKeep            = 3
	DefaultSnapshotInterval = 64 << 20 // default bytes accepted between periodic snapshots
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type producerSnapshot struct {
	Version   int                `json:"version"`
	Start     int64              `json:"start"`
	Next      int64              `json:"next"`
	MaxPID    int64              `json:"max_pid"`
	Producers []snapshotProducer `json:"producers"`
	Open      []snapshotOpen     `json:"open"`
	Aborted   []snapshotAborted  `json:"aborted"`
}

type snapshotProducer struct {
	PID     int64      `json:"pid"`
	Epoch   int16      `json:"epoch"`
	Batches [][3]int64 `json:"batches"` // first sequence, last sequence, base offset; oldest first
	// Marked tells that a marker of the producer was written (false in
	// older snapshots); CoordEpoch is the coordinator epoch it carried.
	Marked     bool  `json:"marked,omitempty"`
	CoordEpoch int32 `json:"coord_epoch,omitempty"`
	// LastTs is the max timestamp of the producer's last batch or
	// marker; absent in older snapshots and when unknown.
	LastTs snapTs `json:"last_ts,omitzero"`
}

// snapTs is a timestamp a snapshot may lack: the zero value is unknown
// and is left out of the JSON.
type snapTs struct {
	ms    int64
	known bool
}

func (t snapTs) MarshalJSON() ([]byte, error) { return strconv.AppendInt(nil, t.ms, 10), nil }

func (t *snapTs) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = snapTs{}
		return nil
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("last_ts %s: %w", b, err)
	}
	*t = snapTs{ms: ms, known: true}
	return nil
}

// timestamp is t in the producer table's terms (-1: unknown).
func (t snapTs) timestamp() int64 {
	if !t.known {
		return -1
	}
	return t.ms
}

type snapshotOpen struct {
	PID   int64 `json:"pid"`
	First int64 `json:"first"`
}

type snapshotAborted struct {
	PID   int64 `json:"pid"`
	First int64 `json:"first"`
	Last  int64 `json:"last"`
}

// snapState is a partition's snapshot bookkeeping.
type snapState struct {
	// Touched only by the partition's acceptor goroutine (in
	// Request.Check and Config.Recovered).
	since   int64             // bytes accepted since the last capture
	pending *producerSnapshot // captured, waiting for the high watermark to reach pending.Next

	mu     sync.Mutex // guards the fields below and the partition's snapshot files
	closed bool       // the partition is closing or closed: the writer writes no more
	epoch  int        // raised when the partition healed: older captures are dropped
}

// snapJob is a captured snapshot whose log prefix is durable, for the
// snapshot writer.
type snapJob struct {
	p     *Partition
	s     *producerSnapshot
	epoch int
}

// snapshot captures the partition's producer state at the log end; the
// acceptor must be stopped (or the partition idle, in tests).
func (p *Partition) snapshot() *producerSnapshot { return p.snapshotAt(p.log.NextOffset()) }

// snapshotAt captures the partition's producer state as the batches below
// next produce it. It runs on the acceptor goroutine before the append
// that gets offset next is checked, or after the acceptor stopped.
func (p *Partition) snapshotAt(next int64) *producerSnapshot {
	s := &producerSnapshot{Version: 2, Start: p.log.StartOffset(), Next: next}
	p.pids.mu.Lock()
	s.MaxPID = p.pids.maxPID
	for id, st := range p.pids.m {
		sp := snapshotProducer{PID: id, Epoch: st.epoch}
		sp.Marked, sp.CoordEpoch = st.marked, st.coordEpoch
		if st.lastTs >= 0 {
			sp.LastTs = snapTs{ms: st.lastTs, known: true}
		}
		for i := st.n - 1; i >= 0; i-- {
			e := st.batches[(st.head+dedupWindow-1-i)%dedupWindow]
			sp.Batches = append(sp.Batches, [3]int64{int64(e.first), int64(e.last), e.base})
		}
		s.Producers = append(s.Producers, sp)
	}
	p.pids.mu.Unlock()
	p.txns.trim(s.Start)
	p.txns.mu.Lock()
	for id, first := range p.txns.open {
		s.Open = append(s.Open, snapshotOpen{PID: id, First: first})
	}
	for _, a := range p.txns.aborted {
		s.Aborted = append(s.Aborted, snapshotAborted{PID: a.pid, First: a.first, Last: a.last})
	}
	p.txns.mu.Unlock()
	slices.SortFunc(s.Producers, func(a, b snapshotProducer) int { return cmpInt64(a.PID, b.PID) })
	slices.SortFunc(s.Open, func(a, b snapshotOpen) int { return cmpInt64(a.PID, b.PID) })
	return s
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// restore loads s into empty tables.
func (s *producerSnapshot) restore(pids *producerTable, txns *txnIndex) {
	pids.maxPID = s.MaxPID
	for _, sp := range s.Producers {
		st := &producerState{epoch: sp.Epoch}
		st.marked, st.coordEpoch, st.lastTs = sp.Marked, sp.CoordEpoch, sp.LastTs.timestamp()
		for _, b := range sp.Batches {
			st.push(seqEntry{first: int32(b[0]), last: int32(b[1]), base: b[2]})
		}
		pids.m[sp.PID] = st
	}
	for _, o := range s.Open {
		txns.open[o.PID] = o.First
	}
	for _, a := range s.Aborted {
		txns.aborted = append(txns.aborted, abortedTxn{pid: a.PID, first: a.First, last: a.Last})
	}
}

// snapshotPoint runs on the acceptor goroutine before the append that
// would get offset base is checked: it hands a capture whose log prefix
// has become durable to the snapshot writer, and captures the state at
// base once the writer's interval of bytes were accepted since the last capture.
func (p *Partition) snapshotPoint(base int64) {
	w := p.snapshots
	if w == nil {
		return
	}
	s := &p.snaps
	if s.pending != nil && p.acc.HighWatermark() >= s.pending.Next {
		s.mu.Lock()
		j := snapJob{p: p, s: s.pending, epoch: s.epoch}
		s.mu.Unlock()
		select {
		case w.q <- j:
		default: // the writer is behind: a later capture replaces this one
		}
		s.pending = nil
	}
	if s.pending == nil && w.interval > 0 && s.since >= w.interval {
		s.pending, s.since = p.snapshotAt(base), 0
	}
}

// snapshotHealed runs on the acceptor goroutine when the partition healed
// (its log may be shorter than what was captured): it drops the capture
// not yet written and removes the snapshots above the log end.
func (p *Partition) snapshotHealed() {
	p.snaps.pending, p.snaps.since = nil, 0
	p.snaps.mu.Lock()
	defer p.snaps.mu.Unlock()
	p.snaps.epoch++
	if err := pruneSnapshots(p.fs, p.dir, p.log.StartOffset(), p.log.NextOffset()); err != nil {
		p.lg.Warn("removing producer snapshots past the healed log end failed", "err", err)
	}
}

// Snapshots is the writer of periodic producer-state snapshots, shared
// by the partitions of a broker. NewSnapshots starts its goroutine;
// Close stops it and waits for it (idempotent).
type Snapshots struct {
	interval int64
	q        chan snapJob
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// NewSnapshots starts a snapshot writer: each partition using it
// captures its state after every interval bytes it accepted (0: never;
// only a clean close writes one).
func NewSnapshots(interval int64) *Snapshots {
	w := &Snapshots{interval: interval, q: make(chan snapJob, 64), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Close stops the writer; a capture not yet written is dropped (the next
// start scans more of the log).
func (w *Snapshots) Close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

// run is the writer goroutine: it writes the snapshots snapshotPoint
// hands it, until Close.
func (w *Snapshots) run() {
	defer close(w.done)
	for {
		select {
		case j := <-w.q:
			j.p.persistSnapshot(j)
		case <-w.stop:
			return
		}
	}
}

// persistSnapshot writes a periodic snapshot unless its partition closed
// or healed since it was captured.
func (p *Partition) persistSnapshot(j snapJob) {
	s := &j.p.snaps
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.epoch != j.epoch {
		return
	}
	if err := p.writeSnapshotLocked(j.s); err != nil {
		p.lg.Warn("producer snapshot not written; recovery scans more of the log", "err", err)
	}
}

// closeSnapshots stops the partition's snapshots without a final one
// (closeSnapshotsUnsynced writes one).
func (p *Partition) closeSnapshots() {
	p.snaps.mu.Lock()
	p.snaps.closed = true
	p.snaps.mu.Unlock()
}

// closeSnapshotsUnsynced stops the partition's snapshots, as at a clean
// stop (the acceptor stopped, the log still open), after one at the log
// end: it is written in place without a sync (writeSnapshotUnsynced),
// and name is the file written ("" when none was), for the caller to
// sync; dirChanged says that the partition's directory needs a sync too.
func (p *Partition) closeSnapshotsUnsynced() (name string, dirChanged bool) {
	s := &p.snaps
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", false
	}
	s.closed = true
	if p.log.Pending() {
		// A new partition whose files are not made yet (storage.Create):
		// never written, it keeps no files; else its files are made here.
		if p.log.NextOffset() == 0 {
			return "", false
		}
		if err := p.log.Prepare(); err != nil {
			p.lg.Warn("producer snapshot not written; the next start scans more of the log", "err", err)
			return "", false
		}
	}
	name, dirChanged, err := p.writeSnapshotUnsynced(p.snapshot())
	if err != nil {
		p.lg.Warn("producer snapshot not written; the next start scans more of the log", "err", err)
	}
	return name, dirChanged
}

// writeSnapshotUnsynced writes s as the snapshot at s.Next without a
// temporary file or a sync, reusing an inode where it can: a snapshot
// file already there is written over (or left when it holds these very
// bytes, as after a restart with no write since), else the oldest of
// snapshotKeep is renamed to the new name and written over (the newest
// snapshotKeep are kept), else a file is created. It returns the name
// written ("" when nothing was). A crash before the caller's sync can
// leave the file torn, or holding the renamed snapshot's bytes:
// loadSnapshot rejects both (checksum; offset not agreeing with the
// name), removes the file and falls back to an older snapshot or a
// scan, as for any unusable snapshot. The caller holds p.snaps.mu.
func (p *Partition) writeSnapshotUnsynced(s *producerSnapshot) (written string, dirChanged bool, err error) {
	data, err := encodeSnapshot(s)
	if err != nil {
		return "", false, err
	}
	offs, err := listSnapshots(p.fs, p.dir)
	if err != nil {
		return "", false, err
	}
	name := filepath.Join(p.dir, snapshotName(s.Next))
	have := slices.Contains(offs, s.Next)
	if have {
		if old, err := vfs.ReadFile(p.fs, name); err == nil && bytes.Equal(old, data) {
			return "", false, nil
		}
	}
	others := slices.DeleteFunc(offs, func(o int64) bool { return o == s.Next }) // ascending
	if !have && len(others) >= snapshotKeep {
		if err := p.fs.Rename(filepath.Join(p.dir, snapshotName(others[0])), name); err != nil {
			return "", false, fmt.Errorf("reuse producer snapshot %d of %s/%d: %w", others[0], p.topic, p.index, err)
		}
		others, dirChanged = others[1:], true
	}
	for len(others) >= snapshotKeep { // more than kept with the new one: drop the oldest
		if err := removeIfExists(p.fs, filepath.Join(p.dir, snapshotName(others[0]))); err != nil {
			return "", dirChanged, err
		}
		others, dirChanged = others[1:], true
	}
	f, created, err := vfs.WriteInPlace(p.fs, name, data)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return "", dirChanged || created, fmt.Errorf("write producer snapshot of %s/%d: %w", p.topic, p.index, err)
	}
	return name, dirChanged || created, nil
}

// writeSnapshotLocked writes s and removes all but the newest
// snapshotKeep snapshots. The caller holds p.snaps.mu.
func (p *Partition) writeSnapshotLocked(s *producerSnapshot) error {
	data, err := encodeSnapshot(s)
	if err != nil {
		return err
	}
	if err := p.log.Prepare(); err != nil { // a new partition's directory may not be made yet
		return fmt.Errorf("write producer snapshot of %s/%d: %w", p.topic, p.index, err)
	}
	if err := vfs.WriteFileAtomic(p.fs, filepath.Join(p.dir, snapshotName(s.Next)), data); err != nil {
		return fmt.Errorf("write producer snapshot of %s/%d: %w", p.topic, p.index, err)
	}
	offs, err := listSnapshots(p.fs, p.dir)
	if err != nil {
		return err
	}
	for len(offs) > snapshotKeep {
		if err := removeIfExists(p.fs, filepath.Join(p.dir, snapshotName(offs[0]))); err != nil {
			return err
		}
		offs = offs[1:]
	}
	return nil
}

func snapshotName(next int64) string {
	return fmt.Sprintf("%s%020d%s", snapshotPrefix, next, snapshotSuffix)
}

// listSnapshots returns the offsets of the snapshots in dir, ascending.
func listSnapshots(fs vfs.FS, dir string) ([]int64, error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var offs []int64
	for _, n := range names {
		if !strings.HasPrefix(n, snapshotPrefix) || !strings.HasSuffix(n, snapshotSuffix) {
			continue
		}
		off, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(n, snapshotPrefix), snapshotSuffix), 10, 64)
		if err != nil || off < 0 || snapshotName(off) != n {
			continue
		}
		offs = append(offs, off)
	}
	slices.Sort(offs)
	return offs, nil
}

// pruneSnapshots removes the snapshots of dir outside [start, end].
func pruneSnapshots(fs vfs.FS, dir string, start, end int64) error {
	offs, err := listSnapshots(fs, dir)
	if err != nil {
		return err
	}
	for _, off := range offs {
		if off < start || off > end {
			if err := removeIfExists(fs, filepath.Join(dir, snapshotName(off))); err != nil {
				return err
			}
		}
	}
	return nil
}

func removeIfExists(fs vfs.FS, name string) error {
	if err := fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// encodeSnapshot renders s as a snapshot file (header line and body).
func encodeSnapshot(s *producerSnapshot) ([]byte, error) {
	body, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode producer snapshot: %w", err)
	}
	body = append(body, '\n')
	out := fmt.Appendf(nil, "%s%08x\n", snapshotMagic, crc32.Checksum(body, crcTable))
	return append(out, body...), nil
}

// decodeSnapshot parses a snapshot file, checking its checksum.
func decodeSnapshot(data []byte) (*producerSnapshot, error) {
	line, body, ok := bytes.Cut(data, []byte{'\n'})
	if !ok || !bytes.HasPrefix(line, []byte(snapshotMagic)) {
		return nil, errors.New("no snapshot header line")
	}
	want, err := strconv.ParseUint(string(line[len(snapshotMagic):]), 16, 32)
	if err != nil {
		return nil, fmt.Errorf("bad checksum field %q", line[len(snapshotMagic):])
	}
	if got := crc32.Checksum(body, crcTable); got != uint32(want) {
		return nil, fmt.Errorf("checksum mismatch: body has %08x, header says %08x", got, want)
	}
	var s producerSnapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("decode body: %w", err)
	}
	if s.Version != 2 {
		return nil, fmt.Errorf("version %d, want 2", s.Version)
	}
	return &s, nil
}

// loadSnapshot fills empty pids and txns from the newest usable snapshot
// of the partition in dir, whose recovered log holds [start, end) (see
// the recovery rules above), and returns the offset the log must be
// scanned from: the snapshot's, or start when none was usable.
func (p *Partition) loadSnapshot(start, end int64, pids *producerTable, txns *txnIndex) (from int64, ok bool) {
	dir, log := p.dir, p.lg
	if err := pruneSnapshots(p.fs, dir, start, end); err != nil {
		log.Warn("removing producer snapshots outside the log failed", "err", err)
	}
	offs, err := listSnapshots(p.fs, dir)
	if err != nil {
		log.Warn("listing producer snapshots failed; scanning the log", "err", err)
		offs = nil
	}
	for i := len(offs) - 1; i >= 0 && !ok; i-- {
		name := filepath.Join(dir, snapshotName(offs[i]))
		s, err := readSnapshot(p.fs, name)
		switch {
		case err == nil && s.Next != offs[i]:
			err = fmt.Errorf("holds offset %d", s.Next)
		case err == nil && (s.Next < start || s.Next > end):
			err = fmt.Errorf("offset %d is outside the log [%d, %d]", s.Next, start, end)
		}
		if err != nil {
			log.Warn("producer snapshot unusable; removing it and trying an older one", "file", name, "err", err)
			if rerr := removeIfExists(p.fs, name); rerr != nil {
				log.Warn("removing an unusable producer snapshot failed", "err", rerr)
			}
			continue
		}
		s.restore(pids, txns)
		from, ok = s.Next, true
	}
	if !ok {
		from, ok = p.loadLegacySnapshot(start, end, pids, txns)
	}
	if err := removeIfExists(p.fs, filepath.Join(dir, legacySnapshot)); err != nil {
		log.Warn("removing a version 1 producer snapshot failed", "err", err)
	}
	if !ok {
		return start, false
	}
	txns.trim(start)
	return from, true
}

func readSnapshot(fs vfs.FS, name string) (*producerSnapshot, error) {
	data, err := vfs.ReadFile(fs, name)
	if err != nil {
		return nil, err
	}
	return decodeSnapshot(data)
}

// loadLegacySnapshot loads a version 1 snapshot (bare JSON, written only
// at clean shutdown) under the same rules.
func (p *Partition) loadLegacySnapshot(start, end int64, pids *producerTable, txns *txnIndex) (int64, bool) {
	name := filepath.Join(p.dir, legacySnapshot)
	var s producerSnapshot
	data, err := vfs.ReadFile(p.fs, name)
	if err == nil {
		if err = json.Unmarshal(data, &s); err != nil {
			err = fmt.Errorf("decode %s: %w", name, err)
		}
	}
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			p.lg.Warn("producer snapshot unreadable; scanning the log", "file", name, "err", err)
		}
		return start, false
	}
	if s.Version != 1 || s.Next < start || s.Next > end {
		p.lg.Info("producer snapshot does not match the log; scanning it", "file", name,
			"snapshot_next", s.Next, "log_start", start, "log_next", end)
		return start, false
	}
	s.restore(pids, txns)
	return s.Next, true
}

// rebuildState adds to pids and txns the batches of l from offset from
// on (from a snapshot, or the log start with empty tables), reading
// their headers and their transaction markers' records.
func rebuildState(l *storage.Log, from int64, pids *producerTable, txns *txnIndex) error {
	start := max(from, l.StartOffset())
	if start >= l.NextOffset() {
		return nil // nothing to scan: a new partition, or a snapshot at the end
	}
	return l.ScanHeaders(start, func(h batch.Header) error {
		if h.BaseOffset < from {
			return nil // covered by the snapshot
		}
		var m batch.Marker
		if h.Control() && h.Transactional() {
			var err error
			if m, err = readMarker(l, &h); err != nil {
				return err
			}
		}
		pids.replay(&h, m.CoordinatorEpoch)
		txns.replay(&h, m.Type == batch.ControlCommit)
		return nil
	})
}

// SnapshotKeep is how many producer snapshots a partition keeps.
const SnapshotKeep = snapshotKeep

// SnapshotOffsets lists the offsets of the producer snapshots in a
// partition directory, ascending.
func SnapshotOffsets(fs vfs.FS, dir string) ([]int64, error) { return listSnapshots(fs, dir) }

// SnapshotPath is the path of the snapshot covering the offsets below
// next in a partition directory.
func SnapshotPath(dir string, next int64) string { return filepath.Join(dir, snapshotName(next)) }

// DescribeState renders the partition's producer table, transaction
// index and last stable offset, for diagnostics: equal states render
// equal. The acceptor must be idle (no append in flight).
func (p *Partition) DescribeState() string {
	return fmt.Sprintf("%+v lso=%d", *p.snapshot(), p.txns.lso(p.acc.HighWatermark()))
}

// RescanState is DescribeState of the state a scan of the whole log
// rebuilds: it equals DescribeState unless a snapshot restored something
// the log does not say.
func (p *Partition) RescanState() (string, error) {
	q := &Partition{log: p.log, acc: p.acc, pids: newProducerTable(), txns: newTxnIndex()}
	if err := rebuildState(p.log, p.log.StartOffset(), q.pids, q.txns); err != nil {
		return "", err
	}
	return q.DescribeState(), nil
}
