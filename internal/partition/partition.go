package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/storage"
	"github.com/sluicedb/sluice/internal/vfs"
)

// Config says how to open a partition.
type Config struct {
	FS    vfs.FS
	Dir   string // the partition's directory (meta.Layout.PartitionDir)
	Topic string
	Index int32
	// Create: the partition is new (its directory does not exist) and
	// no snapshot is looked for. Its directory and first segment are
	// made by Prepare, which the caller runs off the request path, or
	// by the first write (storage.Create), and become durable with its
	// first durable write: a power cut before leaves an empty partition
	// that an Open without Create makes again.
	Create bool
	// Storage configures the log. Open sets its RetainFrom (retention
	// never removes an open transaction's records) and Logger.
	Storage storage.Config
	// Replay, when set, replays the entries a write-ahead log holds for
	// this partition into its log, after recovery and before the state
	// is rebuilt.
	Replay func(*storage.Log) error
	// Acceptor configures the partition's acceptor. Open sets its
	// Recovered hook (the state is rebuilt after a heal) and HWAdvanced
	// (fetch waiters are woken).
	Acceptor acceptor.Config
	// Snapshots writes the partition's periodic producer-state
	// snapshots; nil writes none but at a clean Close.
	Snapshots *Snapshots
	Logger    *slog.Logger
}

// Partition is one partition: its log, the acceptor that writes it, and
// the state derived from the log (the idempotent-producer table, the
// transaction index, snapshot bookkeeping), plus its fetch waiters and
// traffic counters.
//
// The producer table and the transaction index are written only on the
// acceptor goroutine (in the checks of Enqueue and EnqueueMarker, and in
// the Recovered hook), after Open rebuilt them; readers take their
// mutexes.
type Partition struct {
	topic string
	index int32
	dir   string
	fs    vfs.FS
	log   *storage.Log
	acc   *acceptor.Acceptor
	lg    *slog.Logger
	pids  *producerTable
	txns  *txnIndex
	snaps snapState
	// snapshots is the writer periodic snapshots go to (nil: none).
	snapshots *Snapshots
	// fromSnapshot: pids and txns were loaded from a snapshot and the
	// log scanned only from scannedFrom.
	fromSnapshot bool
	scannedFrom  int64

	watch watchers
	// openWatch notes when each open transaction was first seen
	// (hanging.go).
	openWatch openWatch

	traffic Traffic
}

// Open opens (Create: creates) a partition: it recovers the log, replays
// the write-ahead log into it, loads the newest usable producer-state
// snapshot, rebuilds the state from the log after it and starts the
// acceptor.
func Open(cfg Config) (*Partition, error) {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	p := &Partition{
		topic:     cfg.Topic,
		index:     cfg.Index,
		dir:       cfg.Dir,
		fs:        cfg.FS,
		lg:        lg,
		pids:      newProducerTable(),
		txns:      newTxnIndex(),
		snapshots: cfg.Snapshots,
	}
	scfg := cfg.Storage
	scfg.Logger = lg
	// Retention never removes the records of an open transaction (at or
	// past the first offset of the oldest one).
	txns := p.txns
	scfg.RetainFrom = func() int64 { return txns.lso(math.MaxInt64) }
	create := cfg.Create
	if !create {
		// A partition of a large topic gets its directory with its first
		// write (storage.Create, lazyFile); one never written has none,
		// and nothing to recover: it is opened as new, making no files.
		if _, err := cfg.FS.Stat(cfg.Dir); errors.Is(err, os.ErrNotExist) {
			create = true
		}
	}
	open := storage.Open
	if create {
		open = storage.Create
	}
	l, err := open(cfg.FS, cfg.Dir, scfg)
	if err != nil {
		return nil, fmt.Errorf("open partition %s/%d: %w", cfg.Topic, cfg.Index, err)
	}
	if r := l.Recovery(); !create {
		lg.Debug("partition recovered", "report", fmt.Sprintf("%+v", r))
	}
	if cfg.Replay != nil {
		if err := cfg.Replay(l); err != nil {
			l.Close()
			return nil, fmt.Errorf("open partition %s/%d: %w", cfg.Topic, cfg.Index, err)
		}
	}
	l.SettleStartOffset() // after the replay, which may bring back records a DeleteRecords start is past
	p.log = l
	from, fromSnapshot := l.StartOffset(), false
	if !create {
		from, fromSnapshot = p.loadSnapshot(l.StartOffset(), l.NextOffset(), p.pids, p.txns)
	}
	if err := rebuildState(l, from, p.pids, p.txns); err != nil {
		l.Close()
		return nil, fmt.Errorf("rebuild producer state of %s/%d: %w", cfg.Topic, cfg.Index, err)
	}
	p.fromSnapshot, p.scannedFrom = fromSnapshot, from
	acfg := cfg.Acceptor
	acfg.Logger = lg
	// A healed log may have lost appends that had passed the idempotence
	// check or opened a transaction: rebuild the producer state and the
	// transaction index from what the log holds, on the acceptor
	// goroutine (the only writer of both).
	acfg.Recovered = func() error {
		np, nt := newProducerTable(), newTxnIndex()
		if err := rebuildState(l, l.StartOffset(), np, nt); err != nil {
			return fmt.Errorf("rebuild producer state: %w", err)
		}
		p.pids.replaceWith(np)
		p.txns.replaceWith(nt)
		p.snapshotHealed()
		return nil
	}
	acfg.HWAdvanced = p.watch.wake
	p.acc = acceptor.Start(l, acfg)
	return p, nil
}

// Prepare makes a new partition's directory and first segment, if
// they are not made yet (see Config.Create), without syncing them; it
// may run on any goroutine. Afterwards nothing of the partition is made
// at its path any more, so its directory can be renamed away.
func (p *Partition) Prepare() error { return p.log.Prepare() }

// Pending reports whether the partition's files are not made yet: its
// first bytes, if any, are in memory and in the WAL (storage.Log.Pending).
func (p *Partition) Pending() bool { return p.log.Pending() }

// HoldFiles keeps a new partition from making its directory and files
// until ReleaseFiles (storage.Log.HoldFiles), while its topic's
// directory is moved; it reports whether they were made already.
func (p *Partition) HoldFiles() (made bool) { return p.log.HoldFiles() }

// ReleaseFiles undoes HoldFiles.
func (p *Partition) ReleaseFiles() { p.log.ReleaseFiles() }

// SyncCheckpoints makes durable, in a bounded number of filesystem
// syncs, the zeroing of the opened partitions' clean-shutdown
// checkpoints (storage.SyncCheckpoints), so that opening many
// partitions after a clean shutdown costs no fsync each.
func SyncCheckpoints(fs vfs.FS, ps []*Partition) error {
	logs := make([]*storage.Log, len(ps))
	for i, p := range ps {
		logs[i] = p.log
	}
	return storage.SyncCheckpoints(fs, logs)
}

// DirsSynced tells a new partition, after a successful Prepare, that
// the caller made its directory entries durable (see storage.Log.DirsSynced).
func (p *Partition) DirsSynced() { p.log.DirsSynced() }

// Close stops the partition without a final snapshot.
func (p *Partition) Close() error { return p.close() }

// CloseClean stops the partition and, when its acceptor stopped cleanly,
// writes a producer-state snapshot at the log end before closing the
// log, so that the next Open scans nothing.
func (p *Partition) CloseClean() error { return closeAll([]*Partition{p}, false) }

// CloseAll closes ps as CloseClean closes each, with a number of
// filesystem syncs that does not grow with the number of partitions
// (a broker's clean shutdown): the acceptors are stopped concurrently,
// leaving the log's last fsync to the close (acceptor.CloseLeavingSync);
// then each partition's final producer snapshot is written without a
// sync and storage.CloseAll makes the logs, their indexes and the
// snapshots durable in one filesystem sync before it writes the logs'
// clean-shutdown checkpoints, durable in a second one. A snapshot is
// used only where the log below its offset is durable and a checkpoint
// only once what it describes is durable, so a crash at any point
// recovers every acknowledged append and the producer state (a torn or
// early snapshot is rejected and an older one or a scan used). The
// partitions must share one filesystem. Until CloseAll returns without
// an error, the appends the logs hold may be durable only in the WAL:
// keep it.
func CloseAll(ps []*Partition) error { return closeAll(ps, true) }

// closeAllWorkers bounds the goroutines that stop acceptors together.
const closeAllWorkers = 16

func closeAll(ps []*Partition, leaveSync bool) error {
	if len(ps) == 0 {
		return nil
	}
	accErrs := make([]error, len(ps))
	stop := func(i int) {
		if leaveSync {
			accErrs[i] = ps[i].acc.CloseLeavingSync()
		} else {
			accErrs[i] = ps[i].acc.Close()
		}
	}
	concurrently(len(ps), stop)
	// Started before the snapshots are written: it covers their writes.
	set := vfs.NewSyncSet(ps[0].fs, ps[0].dir)
	logs := make([]*storage.Log, len(ps))
	for i, p := range ps {
		if accErrs[i] == nil {
			name, dirChanged := p.closeSnapshotsUnsynced()
			if name != "" {
				set.AddName(name)
			}
			if dirChanged {
				set.AddDir(p.dir)
			}
		} else {
			p.closeSnapshots()
		}
		p.watch.wake()
		logs[i] = p.log
	}
	logErrs := storage.CloseAll(ps[0].fs, logs, set)
	var errs []error
	for i, p := range ps {
		if accErrs[i] != nil {
			errs = append(errs, fmt.Errorf("close %s/%d acceptor: %w", p.topic, p.index, accErrs[i]))
		}
		if logErrs[i] != nil {
			errs = append(errs, fmt.Errorf("close %s/%d log: %w", p.topic, p.index, logErrs[i]))
		}
	}
	return errors.Join(errs...)
}

// concurrently calls f(0) to f(n-1) on up to closeAllWorkers goroutines
// and returns when all have returned.
func concurrently(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(closeAllWorkers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// DiscardAll discards ps (Discard) concurrently: a deleted topic's
// partitions.
func DiscardAll(ps []*Partition) error {
	errs := make([]error, len(ps))
	concurrently(len(ps), func(i int) { errs[i] = ps[i].Discard() })
	return errors.Join(errs...)
}

// Discard stops a partition whose files are being removed (its topic
// was deleted): the acceptor stops without a last fsync, the WAL forgets
// its entries, and nothing more is written to its files
// (storage.Log.Discard).
func (p *Partition) Discard() error {
	err := p.acc.CloseLeavingSync()
	p.acc.ForgetWAL()
	p.closeSnapshots()
	p.watch.wake()
	p.log.Discard()
	if err != nil {
		return fmt.Errorf("close %s/%d acceptor: %w", p.topic, p.index, err)
	}
	return nil
}

func (p *Partition) close() error {
	var errs []error
	err := p.acc.Close()
	if err != nil {
		errs = append(errs, fmt.Errorf("close %s/%d acceptor: %w", p.topic, p.index, err))
	}
	p.closeSnapshots()
	p.watch.wake()
	if err := p.log.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close %s/%d log: %w", p.topic, p.index, err))
	}
	return errors.Join(errs...)
}

// Topic and Index name the partition.
func (p *Partition) Topic() string { return p.topic }
func (p *Partition) Index() int32  { return p.index }

// Dir is the partition's directory.
func (p *Partition) Dir() string { return p.dir }

// Log is the partition's log, for reads, retention and configuration.
// Only the acceptor appends to it.
func (p *Partition) Log() *storage.Log { return p.log }

// HighWatermark is the offset below which every record is durable and
// readable.
func (p *Partition) HighWatermark() int64 { return p.acc.HighWatermark() }

// LastStableOffset is the offset read_committed reads stop before: the
// first offset of the oldest open transaction, else the high watermark.
func (p *Partition) LastStableOffset() int64 { return p.txns.lso(p.acc.HighWatermark()) }

// StartOffset is the log start offset.
func (p *Partition) StartOffset() int64 { return p.log.StartOffset() }

// NextOffset is the offset the next append gets (the log end offset).
func (p *Partition) NextOffset() int64 { return p.log.NextOffset() }

// Err is the partition's failure (nil while it is healthy).
func (p *Partition) Err() error { return p.acc.Err() }

// MaxProducerID is the largest producer id the partition has seen.
func (p *Partition) MaxProducerID() int64 { return p.pids.maxID() }

// RecoveredFrom reports the offset Open scanned the log from to rebuild
// the producer state, and whether it loaded a snapshot first.
func (p *Partition) RecoveredFrom() (offset int64, fromSnapshot bool) {
	return p.scannedFrom, p.fromSnapshot
}

// Traffic counts what Produce accepted and Fetch sent on the partition.
func (p *Partition) Traffic() *Traffic { return &p.traffic }

// Wait waits for a queued append and returns its base offset (the
// original one for a duplicate).
func (p *Partition) Wait(ctx context.Context, pend acceptor.Pending) (int64, error) {
	res, err := pend.Wait(ctx)
	if err != nil {
		return -1, p.appendError(err)
	}
	return res.BaseOffset, nil
}

// Ready reports whether the append that ends at end (Append.End) is
// durable: the high watermark covers it.
func (p *Partition) Ready(end int64) bool { return end > 0 && p.acc.HighWatermark() >= end }

// appendError maps an acceptor error to the Kafka error a client gets.
func (p *Partition) appendError(err error) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return err
	case errors.Is(err, acceptor.ErrClosed):
		return errCode(kerr.NotLeaderForPartition, "%s/%d is closing", p.topic, p.index)
	case errors.Is(err, acceptor.ErrFailed):
		return errCode(kerr.KafkaStorageError, "%s/%d: %v", p.topic, p.index, err)
	case errors.Is(err, acceptor.ErrBadRequest):
		return errCode(kerr.CorruptMessage, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", kerr.RequestTimedOut, err)
	}
	return fmt.Errorf("%w: %s/%d: %w", kerr.UnknownServerError, p.topic, p.index, err)
}

// Traffic counts records and bytes accepted by Produce (in) and sent by
// Fetch (out). Records out are the offsets a fetch response covers from
// the fetch offset on (a compacted log's gaps count too).
type Traffic struct {
	recordsIn, bytesIn, recordsOut, bytesOut atomic.Int64
}

// In counts records accepted.
func (t *Traffic) In(records int64, bytes int) {
	t.recordsIn.Add(records)
	t.bytesIn.Add(int64(bytes))
}

// Out counts records sent.
func (t *Traffic) Out(records int64, bytes int) {
	t.recordsOut.Add(records)
	t.bytesOut.Add(int64(bytes))
}

// Load returns the totals: records and bytes in, records and bytes out.
func (t *Traffic) Load() (recordsIn, bytesIn, recordsOut, bytesOut int64) {
	return t.recordsIn.Load(), t.bytesIn.Load(), t.recordsOut.Load(), t.bytesOut.Load()
}

// watchers are the fetch waiters registered on a partition. n lets the
// acceptor's high-watermark hook skip the mutex when nobody waits.
type watchers struct {
	n  atomic.Int32
	mu sync.Mutex // guards m
	m  map[*Waiter]struct{}
}

func (w *watchers) add(x *Waiter) {
	w.mu.Lock()
	if w.m == nil {
		w.m = map[*Waiter]struct{}{}
	}
	if _, ok := w.m[x]; !ok {
		w.m[x] = struct{}{}
		w.n.Add(1)
	}
	w.mu.Unlock()
}

func (w *watchers) remove(x *Waiter) {
	w.mu.Lock()
	if _, ok := w.m[x]; ok {
		delete(w.m, x)
		w.n.Add(-1)
	}
	w.mu.Unlock()
}

// wake signals every registered waiter. It runs on the acceptor's
// goroutine (or whoever advanced the high watermark) and at Close.
func (w *watchers) wake() {
	if w.n.Load() == 0 {
		return
	}
	w.mu.Lock()
	for x := range w.m {
		x.signal()
	}
	w.mu.Unlock()
}

// Waiter is one long-polling fetch: registered on every partition it
// reads, it is signalled when any of their high watermarks advances (or a
// partition closes). Register before reading, so that no advance between
// the read and the wait is missed: a signal is kept until C is received
// from.
type Waiter struct {
	c     chan struct{}
	parts []*Partition
}

// NewWaiter returns a waiter registered on nothing.
func NewWaiter() *Waiter { return &Waiter{c: make(chan struct{}, 1)} }

// C is signalled after a registered partition's high watermark advances.
func (w *Waiter) C() <-chan struct{} { return w.c }

func (w *Waiter) signal() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Watch registers w on p.
func (w *Waiter) Watch(p *Partition) {
	p.watch.add(w)
	w.parts = append(w.parts, p)
}

// Stop unregisters w from every partition it watches.
func (w *Waiter) Stop() {
	for _, p := range w.parts {
		p.watch.remove(w)
	}
	w.parts = nil
}

// HealthChanged returns a channel closed when the partition next fails
// or heals (Err changes), or when it closes. Take the channel before
// reading Err, so that a change in between is not missed.
func (p *Partition) HealthChanged() <-chan struct{} { return p.acc.HealthChanged() }
