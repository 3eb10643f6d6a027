package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Producer-state snapshots.
//
// A partition's producer state (the idempotent-producer table) and its
// transaction index (open and aborted transactions) are derived from the
// batch headers of its log. Rebuilding them scans every header of the
// partition; to spare that scan after a clean shutdown, closing a
// partition writes them to producers.snapshot in the partition directory
// (JSON, written to a temporary file, fsynced, renamed into place, the
// directory fsynced):
//
//	{"version":1, "start":S, "next":N, "max_pid":P,
//	 "producers":[{"pid":7,"epoch":0,"batches":[[first,last,base],...]}],
//	 "open":[{"pid":9,"first":120}],
//	 "aborted":[{"pid":9,"first":40,"last":52}]}
//
// start and next are the log's start and end offsets when it was written:
// the state covers exactly the batches in [start, next). Opening a
// partition uses the snapshot only when the recovered log has the same
// start and end offsets (it was closed cleanly, or a crash lost exactly
// the bytes written after the snapshot); otherwise, or when the file does
// not decode, it scans the log as before. The snapshot is removed once
// loaded, so it is never used for a log that changed after it.
const snapshotFile = "producers.snapshot"

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

// snapshot captures the partition's producer state. The acceptor must be
// stopped.
func (p *partition) snapshot() *producerSnapshot {
	s := &producerSnapshot{Version: 1, Start: p.log.StartOffset(), Next: p.log.NextOffset()}
	p.pids.mu.Lock()
	s.MaxPID = p.pids.maxPID
	for id, st := range p.pids.m {
		sp := snapshotProducer{PID: id, Epoch: st.epoch}
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
	return s
}

// restore loads s into empty tables.
func (s *producerSnapshot) restore(pids *producerTable, txns *txnIndex) {
	pids.maxPID = s.MaxPID
	for _, sp := range s.Producers {
		st := &producerState{epoch: sp.Epoch}
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

// writeSnapshot writes the partition's snapshot; its acceptor must be
// stopped and its log still open.
func (b *Broker) writeSnapshot(p *partition, dir string) error {
	if err := writeJSON(b.fs, filepath.Join(dir, snapshotFile), p.snapshot()); err != nil {
		return fmt.Errorf("broker: write producer snapshot of %s/%d: %w", p.topic, p.index, err)
	}
	return nil
}

// loadSnapshot fills pids and txns from the partition's snapshot when it
// matches the log (start, end), and removes the file. It reports whether
// it did.
func (b *Broker) loadSnapshot(dir string, start, next int64, pids *producerTable, txns *txnIndex) bool {
	name := filepath.Join(dir, snapshotFile)
	var s producerSnapshot
	err := readJSON(b.fs, name, &s)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if rerr := b.fs.Remove(name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		b.cfg.logger.Warn("removing a used producer snapshot failed", "file", name, "err", rerr)
	}
	switch {
	case err != nil:
		b.cfg.logger.Warn("producer snapshot unreadable; scanning the log", "file", name, "err", err)
		return false
	case s.Version != 1 || s.Start != start || s.Next != next:
		b.cfg.logger.Info("producer snapshot does not match the log; scanning it", "file", name,
			"snapshot_start", s.Start, "snapshot_next", s.Next, "log_start", start, "log_next", next)
		return false
	}
	s.restore(pids, txns)
	return true
}
