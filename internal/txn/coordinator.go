// Package txn is Sluice's transaction coordinator (KIP-98, KIP-447): it
// maps transactional ids to producer ids and epochs, tracks each
// transaction's partitions and staged group offsets, and ends
// transactions by writing COMMIT or ABORT markers to every partition
// through that partition's acceptor (via Config.WriteMarkers).
//
// Every state change is written to the coordinator's internal log
// (package kvlog) and fsynced before it is acknowledged. Ending a
// transaction goes through a durable decision:
//
//	Ongoing ──EndTxn──> Prepare{Commit,Abort}  (fsynced: the decision)
//	        ──markers on every partition, fsynced──┐ at the same time
//	        ──commit only: staged offsets written to the group, fsynced──┘
//	        ──> Complete{Commit,Abort}          (in memory; written by the id's next record, the sweep or Close)
//
// A commit whose partitions all carry their Since offsets (see Txn) writes
// the PrepareCommit decision and the COMMIT markers at the same time, so
// their fsyncs overlap; the staged offsets still follow the durable
// decision. Both are durable before EndTxn answers. A crash between the
// two leaves COMMIT markers with the transaction still Ongoing; recovery
// finds them (Config.CommittedSince, looking past the offsets the
// partitions ended at when they were added, so an earlier transaction's
// markers do not count) and finishes the commit. The decision is
// published in memory before the first marker is queued, so no batch of
// the producer is accepted after a marker and no other decision can be
// taken meanwhile. Aborts keep the sequential order.
//
// Recovery (Open) finishes every transaction found in a Prepare state
// (markers and offsets are idempotent: a partition without the producer's
// open transaction ignores its marker) and aborts Ongoing transactions
// whose timeout has passed, bumping the epoch so that the old producer is
// fenced. A background sweep does the same while running.
package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/kvlog"
	"github.com/sluicedb/sluice/internal/vfs"
	"github.com/sluicedb/sluice/internal/wal"
)

// Defaults for zero Config fields.
const (
	DefaultMaxTimeout    = 15 * time.Minute // transaction.max.timeout.ms
	DefaultSweepInterval = 10 * time.Second // transaction.abort.timed.out.transaction.cleanup.interval.ms
	// DefaultCompactMinRecords: the state log is compacted once it holds
	// more than this many records (and twice as many as there are live
	// transactional ids). Each transaction writes two records (its
	// first partition's add and its decision), and a compaction stops
	// every coordinator write while it rewrites, fsyncs and switches the
	// log (7-9 ms measured), so kvlog's default of 10,000 records
	// compacted every 5,000 transactions: twice a second at 10,000
	// transactions/s. A start replays 100,000 records in about 0.1 s.
	DefaultCompactMinRecords = 100_000
)

// WALName names the coordinator's records in the shared write-ahead log
// (kvlog.WALKey).
const WALName = "transactions"

// Config sets up a coordinator.
type Config struct {
	FS    vfs.FS
	Dir   string
	Fsync acceptor.FsyncPolicy
	// WAL, when set (Fsync acceptor.FsyncAlways), is the shared
	// write-ahead log the coordinator's records are made durable through,
	// in the same rounds as the markers and the transactional batches,
	// under the name WALName (see kvlog.ReplayWAL).
	WAL    *wal.WAL
	Logger *slog.Logger
	Now    func() time.Time
	// MaxTimeout bounds transaction.timeout.ms (InitProducerId beyond it
	// gets INVALID_TRANSACTION_TIMEOUT). Default 15 min.
	MaxTimeout time.Duration
	// SweepInterval is how often expired transactions are aborted and
	// unfinished ones completed. Default 10 s; negative disables the sweep.
	SweepInterval time.Duration
	// CompactMinRecords: the state log is compacted once it holds more
	// records than this (and twice as many as are live). Default
	// DefaultCompactMinRecords.
	CompactMinRecords int

	// AllocPID returns a producer id never handed out before.
	AllocPID func() (int64, error)
	// WriteMarkers writes a COMMIT (commit) or ABORT marker for producer
	// pid at epoch to every partition of parts and returns once all are
	// durable. A partition without an open transaction of pid must ignore
	// the marker, and so must one whose open transaction of pid has
	// batches at an epoch above batchEpoch (the epoch of the transaction's
	// batches): those are a newer transaction's, written after the
	// decision bumped the epoch (KIP-890). A partition that no longer
	// exists is skipped.
	WriteMarkers func(pid int64, epoch int16, commit bool, parts []TopicPartition, batchEpoch int16) error
	// CommitOffsets durably writes committed offsets for a group, except
	// for partitions whose current offset was committed after notBeforeMs
	// (milliseconds; a newer commit wins over a transaction's offsets
	// written again by recovery).
	CommitOffsets func(group string, offsets []Offset, notBeforeMs int64) error
	// PartitionExists says whether a partition exists.
	PartitionExists func(topic string, partition int32) bool
	// EndOffset returns a partition's log end offset (-1 if it does not
	// exist). AddPartitionsToTxn records it with the partition: a marker
	// at or past it belongs to the transaction being added to.
	EndOffset func(topic string, partition int32) int64
	// CommittedSince reports whether the partition holds a COMMIT marker of
	// producer pid at an offset >= from, and the epoch of the first one.
	// With EndOffset it lets EndTxn(commit) write the decision and the
	// markers at the same time: recovery finishes a commit whose markers
	// are on disk though its decision is not. Without either, the decision
	// is made durable first.
	CommittedSince func(pid int64, tp TopicPartition, from int64) (epoch int16, found bool, err error)
	// OpenTransactions lists the transactions open on the partitions
	// (recovery). A transaction version 2 producer's records may become
	// durable before the coordinator record that implicitly added their
	// partition (both are written at the same time; the Produce reply
	// waits for both): recovery adds such partitions to their producer's
	// transaction again, so that its end writes their markers.
	OpenTransactions func() []OpenTxn
	// AfterSweep, if set, is called on the sweep's goroutine after each
	// sweep (the broker aborts hanging transactions there, which needs
	// the sweep's view of live state: Coordinator.Live).
	AfterSweep func()
	// CheckMember validates a TxnOffsetCommit's group membership (KIP-447):
	// it returns 0 or a Kafka error code (UNKNOWN_MEMBER_ID,
	// ILLEGAL_GENERATION, FENCED_INSTANCE_ID). nil accepts every member.
	CheckMember func(group, memberID string, instanceID *string, generation int32) int16
}

// entry is one transactional id.
type entry struct {
	// op serializes the operations on one transactional id and is held
	// across their log writes and marker writes. Taken before
	// Coordinator.mu, never while holding it.
	op sync.Mutex
	t  *Txn // guarded by Coordinator.mu; nil until the first state is durable
	// dirty (guarded by Coordinator.mu): t is a Complete state not yet in
	// the log. The id's next record supersedes it; the sweep and Close
	// write it for ids that stay idle.
	dirty bool
	// undecided (guarded by op): recovery could not tell whether this
	// Ongoing transaction's commit had already written markers (a
	// partition could not be read). Until a later roll-forward succeeds,
	// nothing may abort it: an abort could leave COMMIT markers on some
	// partitions and ABORT markers on others.
	undecided bool
	// add (guarded by Coordinator.mu) is the last queued record that
	// implicitly added a partition (CheckProduceAt), until a later
	// durable record of the id supersedes it: produces to the id's
	// partitions wait for it before their reply.
	add *Pending
}

// OpenTxn is a transaction open on a partition: its producer id, the
// epoch of its batches and the offset of its first batch.
type OpenTxn struct {
	PID   int64
	Epoch int16
	TP    TopicPartition
	First int64
}

// Coordinator is the transaction coordinator.
//
// Goroutines: Open starts the sweep goroutine (unless disabled) and the
// internal log's acceptor; Close stops the sweep, waits for it, then
// closes the log.
type Coordinator struct {
	cfg Config
	log *kvlog.Log

	// mu guards byID, byPID and every entry's t. It is held only for map
	// and pointer work, never across I/O, so partition acceptors may take
	// it (CheckProduce) while an operation waits for their markers.
	mu     sync.Mutex
	byID   map[string]*entry
	byPID  map[int64]*entry
	closed bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open replays the coordinator's log, finishes what recovery must finish
// and starts the sweep.
func Open(cfg Config) (*Coordinator, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.CompactMinRecords <= 0 {
		cfg.CompactMinRecords = DefaultCompactMinRecords
	}
	if cfg.AllocPID == nil || cfg.WriteMarkers == nil || cfg.CommitOffsets == nil {
		return nil, errors.New("txn: Config.AllocPID, WriteMarkers and CommitOffsets are required")
	}
	l, err := kvlog.Open(kvlog.Config{FS: cfg.FS, Dir: cfg.Dir, Fsync: cfg.Fsync, WAL: cfg.WAL, WALName: WALName,
		CompactMinRecords: cfg.CompactMinRecords, Now: cfg.Now, Logger: cfg.Logger.With("log", "transactions")})
	if err != nil {
		return nil, fmt.Errorf("txn: %w", err)
	}
	c := &Coordinator{cfg: cfg, log: l, byID: map[string]*entry{}, byPID: map[int64]*entry{},
		stop: make(chan struct{}), done: make(chan struct{})}
	err = l.Replay(func(_ int64, r kvlog.Record) error {
		if r.Value == nil {
			return nil // no tombstones are written; tolerate them
		}
		t, err := decodeTxn(r.Key, r.Value)
		if err != nil {
			return err
		}
		e := c.byID[t.ID]
		if e == nil {
			e = &entry{}
			c.byID[t.ID] = e
		}
		c.publishLocked(e, t)
		return nil
	})
	if err == nil {
		err = l.Start(c.snapshot)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("txn: recover state: %w", err)
	}
	// Partitions whose implicit add was lost are adopted before recovery
	// (so that finishing or expiring their transaction reaches them) and
	// again after it (a transaction that recovery completed may have
	// records of the id's next one, written at the bumped epoch).
	c.adoptOpen()
	c.recover()
	c.adoptOpen()
	if cfg.SweepInterval > 0 {
		go c.sweepLoop()
	} else {
		close(c.done)
	}
	return c, nil
}

// publishLocked makes t the entry's state. c.mu must be held (or the
// coordinator not yet shared).
func (c *Coordinator) publishLocked(e *entry, t *Txn) {
	if e.t != nil && e.t.PID != t.PID && c.byPID[e.t.PID] == e {
		delete(c.byPID, e.t.PID)
	}
	e.t = t
	c.byPID[t.PID] = e
}

func (c *Coordinator) snapshot() []kvlog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.byID))
	for id, e := range c.byID {
		if e.t != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	recs := make([]kvlog.Record, 0, len(ids))
	for _, id := range ids {
		recs = append(recs, kvlog.Record{Key: recordKey(id), Value: encodeTxn(c.byID[id].t)})
	}
	return recs
}

// persist makes t durable and then the entry's state. e.op must be held.
func (c *Coordinator) persist(e *entry, t *Txn) error {
	t.UpdateMs = c.cfg.Now().UnixMilli()
	return c.log.Append([]kvlog.Record{{Key: recordKey(t.ID), Value: encodeTxn(t)}}, func(int64) {
		c.mu.Lock()
		c.publishLocked(e, t)
		e.dirty = false
		e.add = nil // this durable record follows it
		c.mu.Unlock()
	})
}

// write is persist without waiting for the fsync (see kvlog.Log.Write).
func (c *Coordinator) write(e *entry, t *Txn) error {
	t.UpdateMs = c.cfg.Now().UnixMilli()
	return c.log.Write([]kvlog.Record{{Key: recordKey(t.ID), Value: encodeTxn(t)}}, func(int64) {
		c.mu.Lock()
		c.publishLocked(e, t)
		e.dirty = false
		c.mu.Unlock()
	})
}

// flushDirty writes the Complete states not yet in the log (see
// entry.dirty), without waiting for their fsync.
func (c *Coordinator) flushDirty() {
	for _, e := range c.entries() {
		e.op.Lock()
		c.mu.Lock()
		t, dirty := e.t, e.dirty
		c.mu.Unlock()
		if dirty {
			if err := c.write(e, t.clone()); err != nil {
				c.cfg.Logger.Warn("txn: writing a completed transaction's state failed", "transactional_id", t.ID, "err", err)
			}
		}
		e.op.Unlock()
	}
}

// current returns the entry's published state (nil if none).
func (c *Coordinator) current(e *entry) *Txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return e.t
}

// entryFor returns the entry of id, creating an empty one when create.
func (c *Coordinator) entryFor(id string, create bool) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	e := c.byID[id]
	if e == nil && create {
		e = &entry{}
		c.byID[id] = e
	}
	return e
}

// Close stops the sweep and closes the log. It is idempotent.
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.stop)
		<-c.done
		c.flushDirty()
		c.closeErr = c.log.Close()
	})
	return c.closeErr
}

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// recover finishes transactions left in a Prepare state and aborts
// expired ongoing ones.
func (c *Coordinator) recover() {
	for _, e := range c.entries() {
		c.rollForward(e)
		c.sweepOne(e)
	}
}

// rollForward finishes the commit of an Ongoing transaction that has a
// COMMIT marker on one of its partitions past the offset that partition
// ended at when it was added: its EndTxn wrote the markers and the
// decision at the same time and only the markers reached the disk.
func (c *Coordinator) rollForward(e *entry) {
	e.op.Lock()
	defer e.op.Unlock()
	t := c.current(e)
	if t == nil || t.State != Ongoing || c.cfg.CommittedSince == nil || !t.knowsSince() {
		return
	}
	e.undecided = false
	for i, tp := range t.Partitions {
		mepoch, found, err := c.cfg.CommittedSince(t.PID, tp, t.Since[i])
		if err != nil {
			c.cfg.Logger.Error("txn: cannot tell whether an open transaction was being committed; leaving it open, undecided, and retrying",
				"transactional_id", t.ID, "topic", tp.Topic, "partition", tp.Partition, "err", err)
			e.undecided = true
			return
		}
		if !found {
			continue
		}
		c.cfg.Logger.Info("txn: finishing a commit whose markers were written before its decision",
			"transactional_id", t.ID, "producer_id", t.PID, "epoch", t.Epoch)
		// The markers carry the decision's epoch: bumped by an EndTxn v5.
		if _, err := c.end(e, t, true, max(t.Epoch, mepoch)); err != nil {
			c.cfg.Logger.Warn("txn: finishing a commit failed; will retry", "transactional_id", t.ID, "err", err)
			e.undecided = true // the next sweep retries the roll-forward, never an abort
		}
		return
	}
}

// overlaps reports whether committing t may write its decision and its
// markers at the same time (recovery can then tell its markers apart).
func (c *Coordinator) overlaps(t *Txn) bool {
	return c.cfg.EndOffset != nil && c.cfg.CommittedSince != nil && len(t.Partitions) > 0 && t.knowsSince()
}

func (c *Coordinator) entries() []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := make([]*entry, 0, len(c.byID))
	for _, e := range c.byID {
		es = append(es, e)
	}
	return es
}

// sweepLoop runs the sweep every SweepInterval until Close.
func (c *Coordinator) sweepLoop() {
	defer close(c.done)
	tk := time.NewTicker(c.cfg.SweepInterval)
	defer tk.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tk.C:
			c.flushDirty()
			for _, e := range c.entries() {
				if c.isClosed() {
					return
				}
				c.sweepOne(e)
			}
			if c.cfg.AfterSweep != nil && !c.isClosed() {
				c.cfg.AfterSweep()
			}
		}
	}
}

// Sweep runs one sweep now: it completes unfinished transactions and
// aborts expired ones. The background sweep calls it; tests may too.
func (c *Coordinator) Sweep() {
	for _, e := range c.entries() {
		c.sweepOne(e)
	}
}

func (c *Coordinator) sweepOne(e *entry) {
	e.op.Lock()
	undecided := e.undecided
	e.op.Unlock()
	if undecided {
		c.rollForward(e)
	}
	e.op.Lock()
	defer e.op.Unlock()
	t := c.current(e)
	if t == nil || e.undecided {
		return
	}
	switch {
	case t.State == PrepareCommit || t.State == PrepareAbort:
		if err := c.finish(e, t); err != nil {
			c.cfg.Logger.Warn("txn: completing a transaction failed; will retry", "transactional_id", t.ID, "err", err)
		}
	case t.State == Ongoing && c.cfg.Now().UnixMilli() >= t.StartMs+int64(t.TimeoutMs):
		c.cfg.Logger.Info("txn: aborting a transaction past its timeout", "transactional_id", t.ID, "producer_id", t.PID, "epoch", t.Epoch)
		epoch := t.Epoch
		if epoch < math.MaxInt16-1 {
			epoch++ // fence the producer that let it expire
		}
		if _, err := c.end(e, t, false, epoch); err != nil {
			c.cfg.Logger.Warn("txn: aborting an expired transaction failed; will retry", "transactional_id", t.ID, "err", err)
		}
	}
}

// end decides transaction t (Ongoing) with the given epoch for the
// markers: it persists the Prepare state, then finishes. e.op must be
// held. The returned state is the final one.
func (c *Coordinator) end(e *entry, t *Txn, commit bool, epoch int16) (*Txn, error) {
	p := t.shallow() // scalar changes; Offsets is replaced, not modified
	p.State, p.Epoch = PrepareAbort, epoch
	if commit {
		p.State = PrepareCommit
	} else {
		p.Offsets = nil // staged offsets are dropped with the abort
	}
	if epoch != t.Epoch {
		p.PrevPID, p.PrevEpoch, p.Bumped = t.PID, t.Epoch, true
	}
	if err := c.persist(e, p); err != nil {
		return nil, err
	}
	if err := c.finish(e, p); err != nil {
		return nil, err
	}
	return c.current(e), nil
}

// endOverlapped commits transaction t (Ongoing, see overlaps) writing
// its PrepareCommit decision and its COMMIT markers at the same time; the
// staged offsets follow the durable decision. epoch is the markers' (t's,
// or t's plus one for an EndTxn v5). e.op must be held. If the decision cannot be made durable the transaction
// stays PrepareCommit in memory (the sweep, a retried EndTxn or, after a
// crash, recovery finishes it), since its markers may already be written.
func (c *Coordinator) endOverlapped(e *entry, t *Txn, _ bool, epoch int16) (*Txn, error) {
	p := t.shallow() // scalar changes only
	p.State, p.UpdateMs, p.Epoch = PrepareCommit, c.cfg.Now().UnixMilli(), epoch
	if epoch != t.Epoch {
		p.PrevPID, p.PrevEpoch, p.Bumped = t.PID, t.Epoch, true
	}
	// Published before the first marker is queued: from here on
	// CheckProduce refuses the producer's batches, so none lands after a
	// marker, and the transaction can only be committed.
	c.mu.Lock()
	c.publishLocked(e, p)
	c.mu.Unlock()
	// The decision is queued first and waited for last: the markers are
	// queued and fsynced meanwhile, on this goroutine.
	wait, derr := c.log.Enqueue([]kvlog.Record{{Key: recordKey(p.ID), Value: encodeTxn(p)}})
	merr := c.writeMarkers(p)
	if derr == nil {
		derr = wait()
	}
	var oerr error
	if derr == nil && len(p.Offsets) > 0 {
		oerr = c.commitOffsets(p)
	}
	if err := errors.Join(derr, merr, oerr); err != nil {
		return nil, err
	}
	if err := c.complete(e, p); err != nil {
		return nil, err
	}
	return c.current(e), nil
}

// writeMarkers writes the markers of p (a Prepare state) and returns once
// they are durable.
func (c *Coordinator) writeMarkers(p *Txn) error {
	if len(p.Partitions) == 0 {
		return nil
	}
	batchEpoch := p.Epoch
	if p.Bumped {
		batchEpoch--
	}
	if err := c.cfg.WriteMarkers(p.PID, p.Epoch, p.State == PrepareCommit, p.Partitions, batchEpoch); err != nil {
		return fmt.Errorf("txn: write markers of %q: %w", p.ID, err)
	}
	return nil
}

// finish writes the markers and (commit) the staged offsets of a
// transaction in a Prepare state, then persists its Complete state.
// Each step is idempotent, so finish may run again after a crash or a
// failure. e.op must be held.
func (c *Coordinator) finish(e *entry, p *Txn) error {
	// The markers and (commit) the staged offsets go to different logs
	// and both only follow the durable decision, so they are written at
	// the same time: their fsyncs overlap. Until both are done the
	// transaction stays in its Prepare state (RequireStable fetches of
	// its offsets wait; a crash finishes it again).
	offsetsDone := make(chan error, 1)
	if p.State == PrepareCommit && len(p.Offsets) > 0 {
		go func() { offsetsDone <- c.commitOffsets(p) }() // joined below, before finish returns
	} else {
		offsetsDone <- nil
	}
	merr := c.writeMarkers(p)
	if err := errors.Join(merr, <-offsetsDone); err != nil {
		return err
	}
	return c.complete(e, p)
}

// complete writes the Complete state that follows p (a Prepare state
// whose markers and offsets are durable). e.op must be held.
func (c *Coordinator) complete(e *entry, p *Txn) error {
	commit := p.State == PrepareCommit
	d := p.shallow() // the shared fields are replaced below
	d.State = CompleteAbort
	if commit {
		d.State = CompleteCommit
	}
	// StartMs stays: a completed transaction keeps its start time, as
	// Kafka's coordinator keeps txnStartTimestamp, for DescribeTransactions
	// and ListTransactions' duration filter.
	d.Partitions, d.Since, d.Offsets, d.Bumped = nil, nil, nil, false
	// The Complete state need not be in the log before EndTxn answers:
	// the decision, markers and offsets are durable, and if a crash loses
	// it recovery finds the Prepare state (or, for a commit whose markers
	// overlapped its decision, Ongoing with COMMIT markers) and finishes
	// again (markers are skipped where written, offsets are not written
	// over newer commits). It is not even written now: the id's next
	// state record (its next transaction's first AddPartitionsToTxn, an
	// InitProducerId) supersedes it, and writing it would cost the log an
	// fsync that the next durable record would wait behind. The sweep and
	// Close write it for ids that stay idle.
	d.UpdateMs = c.cfg.Now().UnixMilli()
	c.mu.Lock()
	c.publishLocked(e, d)
	e.dirty = true
	c.mu.Unlock()
	return nil
}

// adoptOpen adds to their producer's transaction the partitions holding
// records of the producer's current epoch that the transaction does not
// list: their implicit add (CheckProduceAt) did not reach the log before
// a crash, though their records did (neither was acknowledged). The
// transaction then ends as its producer or the timeout decides, markers
// on those partitions included.
func (c *Coordinator) adoptOpen() {
	if c.cfg.OpenTransactions == nil {
		return
	}
	for _, o := range c.cfg.OpenTransactions() {
		c.mu.Lock()
		e := c.byPID[o.PID]
		c.mu.Unlock()
		if e == nil {
			continue
		}
		e.op.Lock()
		t := c.current(e)
		if t != nil && t.PID == o.PID && t.Epoch == o.Epoch && !e.undecided &&
			((t.State == Ongoing && !t.has(o.TP)) || t.State == Empty || t.State == CompleteCommit || t.State == CompleteAbort) {
			c.cfg.Logger.Info("txn: adding a partition whose records are durable but whose implicit add was not",
				"transactional_id", t.ID, "producer_id", t.PID, "epoch", t.Epoch, "topic", o.TP.Topic, "partition", o.TP.Partition)
			nt := c.ongoing(t)
			nt.add(o.TP, o.First)
			if err := c.persist(e, nt); err != nil {
				c.cfg.Logger.Error("txn: adding a recovered partition to its transaction failed", "transactional_id", t.ID, "err", err)
			}
		}
		e.op.Unlock()
	}
}

// commitOffsets writes the staged offsets of p (PrepareCommit) to their
// groups.
func (c *Coordinator) commitOffsets(p *Txn) error {
	groups := make([]string, 0, len(p.Offsets))
	for g := range p.Offsets {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		if len(p.Offsets[g]) == 0 {
			continue
		}
		if err := c.cfg.CommitOffsets(g, p.Offsets[g], p.UpdateMs); err != nil {
			return fmt.Errorf("txn: commit offsets of %q for group %s: %w", p.ID, g, err)
		}
	}
	return nil
}

// storageCode maps a failed log write to the code clients retry on.
func storageCode(err error) int16 {
	if err == nil {
		return 0
	}
	return kerr.CoordinatorNotAvailable.Code
}

// Pending is a queued coordinator record a Produce reply waits for (see
// CheckProduceAt).
type Pending struct {
	once sync.Once
	wait func() error
	err  error
	done atomic.Bool
}

// Done reports whether the record is durable or failed, and Wait has
// returned for one caller.
func (p *Pending) Done() bool { return p.done.Load() }

// Wait returns once the record is durable (nil) or failed. Any number of
// callers may wait.
func (p *Pending) Wait() error {
	p.once.Do(func() {
		if p.err = p.wait(); p.err != nil {
			p.err = fmt.Errorf("txn: implicitly adding a partition: %w", p.err)
		}
		p.done.Store(true)
	})
	return p.err
}
