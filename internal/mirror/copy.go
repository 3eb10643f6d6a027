package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// mirror is one Run. Everything runs on Run's goroutine; the franz-go
// clients it creates are closed by close, which Run defers.
type mirror struct {
	cfg   Config
	log   *slog.Logger
	start time.Time
	mode  Mode

	src, tgt       *kgo.Client // admin clients (the consumer is its own, in copyLoop)
	srcAdm, tgtAdm *kadm.Client
	w              *kgo.Client // target producer (transactional in Transactional mode)

	partitions      map[string][]*partState // topic -> partition number -> state
	maxMessageBytes int64                   // the largest source max.message.bytes
	metrics         *metrics
	report          Report

	records, bytes, txns int64
	topicRecords         map[string]int64
	topicBytes           map[string]int64
	topicLag             map[string]int64
	groups               map[string]GroupStats
	groupWritten         map[string]map[string]map[int32]int64 // last offsets written per group
	ownedByTarget        map[string]string                     // groups that moved to the target, and why
	lastTick             time.Time

	// The open batch: records produced and positions read, not yet
	// committed.
	batch      []*kgo.Record
	batchSrc   []int64 // source offset of each batch record
	batchBytes int64   // key+value bytes of the batch records
	touched    map[*partState]bool
	batchStart time.Time
	inTxn      bool

	errMu      sync.Mutex // guards produceErr, set from franz-go's goroutines
	produceErr error

	lastRecords    int64
	lastBytes      int64
	rate, byteRate float64
}

// partState is the copy state of one source partition.
type partState struct {
	topic string
	part  int32

	pos       int64 // next source offset to read (data, control or skipped)
	committed int64 // next source offset whose copy is committed on the target
	tgtNext   int64 // target offset after the last committed copy
	end       int64 // source end offset at start (the --once goal)
	skip      int64 // records already on the target past the stored position (no-transaction restart)

	startSrc, startTgt int64 // where this run started
	fresh              bool  // no stored position: started at the source start offset

	runs      []run           // source->target offsets of records copied by this run
	byContent map[int64]int64 // source->target offsets found by translateByContent
}

// run maps n consecutive source offsets from src to consecutive target
// offsets from tgt.
type run struct{ src, tgt, n int64 }

// maxRuns bounds a partition's offset map; the oldest half is dropped
// past it (groups committed before what remains are not translated).
const maxRuns = 1 << 16

func (ps *partState) mapOffset(src, tgt int64) {
	if k := len(ps.runs); k > 0 {
		r := &ps.runs[k-1]
		if r.src+r.n == src && r.tgt+r.n == tgt {
			r.n++
			return
		}
	}
	if len(ps.runs) >= maxRuns {
		ps.runs = append(ps.runs[:0], ps.runs[maxRuns/2:]...)
		ps.fresh = false
		ps.startSrc = ps.runs[0].src
	}
	ps.runs = append(ps.runs, run{src: src, tgt: tgt, n: 1})
}

func (m *mirror) close() {
	for _, c := range []*kgo.Client{m.w, m.src, m.tgt} {
		if c != nil {
			c.Close()
		}
	}
}

func (m *mirror) initPartitions(plan *topicPlan) {
	m.maxMessageBytes = plan.maxMessageBytes
	m.partitions = map[string][]*partState{}
	m.topicRecords, m.topicBytes, m.topicLag = map[string]int64{}, map[string]int64{}, map[string]int64{}
	m.groups = map[string]GroupStats{}
	m.groupWritten = map[string]map[string]map[int32]int64{}
	m.ownedByTarget = map[string]string{}
	m.touched = map[*partState]bool{}
	for t, n := range plan.topics {
		ps := make([]*partState, n)
		for p := range ps {
			ps[p] = &partState{topic: t, part: int32(p)}
		}
		m.partitions[t] = ps
	}
}

// targetVersions caps the target clients at Kafka 3.7's request versions:
// the classic transaction protocol (AddOffsetsToTxn + TxnOffsetCommit by
// topic name), which Kafka, Redpanda and kfake all serve.
func targetVersions() kgo.Opt { return kgo.MaxVersions(kversion.V3_7_0()) }

// openWriter creates the target producer; in Transactional mode it loads
// the producer id at once, which fences an older mirror with the same
// name and aborts its open transaction before the position is read.
func (m *mirror) openWriter(ctx context.Context) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(m.cfg.To...),
		kgo.DialTimeout(m.cfg.Timeout),
		targetVersions(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(2 * m.cfg.MaxBatch),
		kgo.MaxBufferedBytes(4 * maxBatchBytes),
		// Room for the largest record a source topic accepts (franz-go's
		// default, about 1 MB, is Kafka's default max.message.bytes).
		kgo.ProducerBatchMaxBytes(int32(min(max(m.maxMessageBytes, 1_000_012), 1<<30))),
	}
	if m.mode == Transactional {
		opts = append(opts, kgo.TransactionalID(m.cfg.Name), kgo.TransactionTimeout(time.Minute))
	}
	opts = append(opts, m.cfg.TargetOpts...)
	w, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("mirror: target producer: %w", err)
	}
	m.w = w
	ictx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	if _, _, err := w.ProducerID(ictx); err != nil {
		return fmt.Errorf("mirror: target producer id (transactional id %s): %w", m.cfg.Name, err)
	}
	return nil
}

// consumer creates the source consumer at every partition's position.
func (m *mirror) consumer() (*kgo.Client, error) {
	parts := map[string]map[int32]kgo.Offset{}
	for t, ps := range m.partitions {
		parts[t] = map[int32]kgo.Offset{}
		for _, p := range ps {
			parts[t][p.part] = kgo.NewOffset().At(p.pos)
		}
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(m.cfg.From...),
		kgo.DialTimeout(m.cfg.Timeout),
		kgo.ConsumePartitions(parts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(time.Second),
	}, m.cfg.SourceOpts...)
	return kgo.NewClient(opts...)
}

func (m *mirror) done() bool {
	if !m.cfg.Once {
		return false
	}
	for _, ps := range m.partitions {
		for _, p := range ps {
			if p.committed < p.end || p.skip > 0 {
				return false
			}
		}
	}
	return true
}

// commitLinger is the longest a batch stays open while records arrive;
// maxBatchBytes bounds its size.
const (
	commitLinger  = 100 * time.Millisecond
	maxBatchBytes = 8 << 20
)

// copyLoop polls the source and produces each record at once (franz-go
// batches them); a batch of records commits with its positions when it
// reaches MaxBatch records, after commitLinger, when the source has
// nothing more for now, and before each progress tick.
func (m *mirror) copyLoop(ctx context.Context) error {
	if m.done() {
		return nil
	}
	c, err := m.consumer()
	if err != nil {
		return fmt.Errorf("mirror: source consumer: %w", err)
	}
	defer c.Close()
	m.lastTick = time.Now()
	if err := m.tick(ctx, false); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return m.stop(err)
		}
		deadline := m.lastTick.Add(m.cfg.Interval)
		if !time.Now().Before(deadline) {
			if err := m.commit(ctx); err != nil {
				return err
			}
			if err := m.tick(ctx, false); err != nil {
				return m.stop(err)
			}
			continue
		}
		if len(m.touched) > 0 {
			if d := m.batchStart.Add(commitLinger); d.Before(deadline) {
				deadline = d
			}
		}
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fs := c.PollRecords(pctx, max(1, m.cfg.MaxBatch-len(m.batch)))
		cancel()
		if err := m.fetchErrors(ctx, fs); err != nil {
			return m.stop(err)
		}
		if err := m.add(fs); err != nil {
			return err
		}
		if len(m.touched) > 0 && (len(m.batch) >= m.cfg.MaxBatch || m.batchBytes >= maxBatchBytes || fs.NumRecords() == 0 ||
			time.Since(m.batchStart) >= commitLinger || m.readToEnd()) {
			if err := m.commit(ctx); err != nil {
				return err
			}
		}
		if m.done() {
			return nil
		}
	}
}

// stop commits the open batch (a clean stop keeps what was copied) and
// returns why the loop stopped.
func (m *mirror) stop(why error) error {
	sctx, cancel := context.WithTimeout(context.Background(), m.cfg.Timeout)
	defer cancel()
	if err := m.commit(sctx); err != nil {
		return errors.Join(why, err)
	}
	return why
}

// fetchErrors turns fetch errors into a clear error, or nil for the
// poll's own deadline and retriable errors.
func (m *mirror) fetchErrors(ctx context.Context, fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		switch {
		case errors.Is(fe.Err, context.DeadlineExceeded), errors.Is(fe.Err, context.Canceled):
			if ctx.Err() != nil {
				return ctx.Err()
			}
		case errors.Is(fe.Err, kerr.UnknownTopicOrPartition), errors.Is(fe.Err, kerr.UnknownTopicID):
			if err := m.checkSourceTopics(ctx); err != nil {
				return err
			}
		case errors.Is(fe.Err, kgo.ErrClientClosed):
			return fmt.Errorf("mirror: source consumer closed: %w", fe.Err)
		default:
			var ke *kerr.Error
			if errors.As(fe.Err, &ke) && ke.Retriable {
				continue
			}
			m.log.Warn("mirror: source fetch error", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
		}
	}
	return nil
}

func (m *mirror) readToEnd() bool {
	if !m.cfg.Once {
		return false
	}
	for _, ps := range m.partitions {
		for _, p := range ps {
			if p.pos < p.end || p.skip > 0 {
				return false
			}
		}
	}
	return true
}

func (m *mirror) touch(ps *partState) {
	if len(m.touched) == 0 {
		m.batchStart = time.Now()
	}
	m.touched[ps] = true
}

// add produces one poll's records into the open batch.
func (m *mirror) add(fs kgo.Fetches) error {
	var err error
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		ps := m.partState(fp.Topic, fp.Partition)
		if ps == nil || err != nil {
			return
		}
		for _, r := range fp.Records {
			if r.Offset < ps.pos {
				continue // already seen
			}
			ps.pos = r.Offset + 1
			m.touch(ps)
			if r.Attrs.IsControl() {
				continue
			}
			if ps.skip > 0 {
				// Written by a run killed before it committed the
				// position: the target already has it.
				ps.mapOffset(r.Offset, ps.tgtNext)
				ps.tgtNext++
				ps.skip--
				continue
			}
			if m.mode == Transactional && !m.inTxn {
				if err = m.w.BeginTransaction(); err != nil {
					err = fmt.Errorf("mirror: begin transaction: %w", err)
					return
				}
				m.inTxn = true
			}
			out := &kgo.Record{
				Topic:     r.Topic,
				Partition: r.Partition,
				Key:       r.Key,
				Value:     r.Value,
				Headers:   r.Headers,
				Timestamp: r.Timestamp,
			}
			m.batch = append(m.batch, out)
			m.batchSrc = append(m.batchSrc, r.Offset)
			m.batchBytes += int64(len(r.Key) + len(r.Value))
			// The records outlive the caller's context: a clean stop
			// still commits them.
			m.w.Produce(context.Background(), out, m.promise)
		}
	})
	return err
}

// promise records the first produce error of the open batch; franz-go
// calls it from its own goroutines.
func (m *mirror) promise(_ *kgo.Record, err error) {
	if err == nil {
		return
	}
	m.errMu.Lock()
	defer m.errMu.Unlock()
	if m.produceErr == nil {
		m.produceErr = err
	}
}

func (m *mirror) takeProduceErr() error {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	err := m.produceErr
	m.produceErr = nil
	return err
}

// commit waits for the open batch's records and commits them with the
// positions of the partitions it read: in one transaction, or after the
// records.
func (m *mirror) commit(ctx context.Context) error {
	if len(m.touched) == 0 {
		return nil
	}
	if len(m.batch) == 0 && m.mode == Transactional {
		// Control records only: nothing to write. The stored position
		// stays behind them until the next records (a restart reads them
		// again, harmlessly); in memory they count as copied.
		for ps := range m.touched {
			ps.committed = ps.pos
		}
		clear(m.touched)
		return nil
	}
	if err := m.w.Flush(ctx); err != nil {
		return m.abort(fmt.Errorf("mirror: writing to the target: %w", err))
	}
	if err := m.takeProduceErr(); err != nil {
		return m.abort(fmt.Errorf("mirror: writing to the target: %w", err))
	}
	next := map[*partState]int64{}
	for _, r := range m.batch {
		next[m.partState(r.Topic, r.Partition)] = r.Offset + 1
	}
	offs := kadm.Offsets{}
	for ps := range m.touched {
		if n, ok := next[ps]; ok {
			ps.tgtNext = n
		}
		offs.Add(kadm.Offset{Topic: ps.topic, Partition: ps.part, At: ps.pos, LeaderEpoch: -1, Metadata: positionMeta(ps.tgtNext)})
	}
	if m.mode == Transactional {
		if err := m.txnCommitOffsets(ctx, offs); err != nil {
			return m.abort(err)
		}
		m.inTxn = false
		if err := m.w.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("mirror: committing the transaction (a restart resumes from the last committed one): %w", err)
		}
	} else {
		rs, err := m.tgtAdm.CommitOffsets(ctx, m.cfg.Name, offs)
		if err == nil {
			err = rs.Error()
		}
		if err != nil {
			return fmt.Errorf("mirror: committing the copy position (the records are written; a restart skips them): %w", err)
		}
	}
	for i, r := range m.batch {
		ps := m.partState(r.Topic, r.Partition)
		ps.mapOffset(m.batchSrc[i], r.Offset)
		n := int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
		m.records++
		m.bytes += n
		m.topicRecords[r.Topic]++
		m.topicBytes[r.Topic] += n
		m.metrics.copied(r.Topic, n)
	}
	for ps := range m.touched {
		ps.committed = ps.pos
	}
	clear(m.touched)
	clear(m.batch) // drop the record references
	m.batch, m.batchSrc, m.batchBytes = m.batch[:0], m.batchSrc[:0], 0
	m.txns++
	m.metrics.commits.Inc()
	return nil
}

func (m *mirror) partState(t string, p int32) *partState {
	ps := m.partitions[t]
	if p < 0 || int(p) >= len(ps) {
		return nil
	}
	return ps[p]
}

// abort ends the open transaction without committing and returns err.
func (m *mirror) abort(err error) error {
	if m.mode != Transactional || !m.inTxn {
		return err
	}
	m.inTxn = false
	actx, cancel := context.WithTimeout(context.Background(), m.cfg.Timeout)
	defer cancel()
	if aerr := m.w.AbortBufferedRecords(actx); aerr != nil {
		return errors.Join(err, fmt.Errorf("mirror: aborting buffered records: %w", aerr))
	}
	if aerr := m.w.EndTransaction(actx, kgo.TryAbort); aerr != nil {
		return errors.Join(err, fmt.Errorf("mirror: aborting the transaction: %w", aerr))
	}
	return err
}

// txnCommitOffsets adds the mirror group to the open transaction and
// stages the positions in it (AddOffsetsToTxn, TxnOffsetCommit).
func (m *mirror) txnCommitOffsets(ctx context.Context, offs kadm.Offsets) error {
	id, epoch, err := m.w.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("mirror: producer id: %w", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID = m.cfg.Name
	add.ProducerID, add.ProducerEpoch = id, epoch
	add.Group = m.cfg.Name
	for attempt := 0; ; attempt++ {
		resp, err := add.RequestWith(ctx, m.w)
		if err != nil {
			return fmt.Errorf("mirror: AddOffsetsToTxn: %w", err)
		}
		err = kerr.ErrorForCode(resp.ErrorCode)
		if errors.Is(err, kerr.ConcurrentTransactions) && attempt < 50 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("mirror: AddOffsetsToTxn: %w", err)
		}
		break
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID = m.cfg.Name
	req.Group = m.cfg.Name
	req.ProducerID, req.ProducerEpoch = id, epoch
	req.Generation = -1
	offs.Each(func(o kadm.Offset) {
		var rt *kmsg.TxnOffsetCommitRequestTopic
		for i := range req.Topics {
			if req.Topics[i].Topic == o.Topic {
				rt = &req.Topics[i]
			}
		}
		if rt == nil {
			req.Topics = append(req.Topics, kmsg.NewTxnOffsetCommitRequestTopic())
			rt = &req.Topics[len(req.Topics)-1]
			rt.Topic = o.Topic
		}
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition = o.Partition
		p.Offset = o.At
		meta := o.Metadata
		p.Metadata = &meta
		rt.Partitions = append(rt.Partitions, p)
	})
	resp, err := req.RequestWith(ctx, m.w)
	if err != nil {
		return fmt.Errorf("mirror: TxnOffsetCommit: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("mirror: TxnOffsetCommit %s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// checkSourceTopics fails when a mirrored topic is gone from the source
// (or lost partitions).
func (m *mirror) checkSourceTopics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Timeout)
	defer cancel()
	names := sortedKeys(m.partitions)
	tds, err := m.srcAdm.ListTopics(ctx, names...)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the caller is stopping; not a topic problem
		}
		return fmt.Errorf("mirror: listing source topics: %w", err)
	}
	for _, t := range names {
		td, ok := tds[t]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) || len(td.Partitions) < len(m.partitions[t]) {
			return fmt.Errorf("mirror: source topic %s was deleted mid-mirror; the target holds every record committed up to the last position (%s); stop here, or delete the target topic and the group %s on the target to start over",
				t, m.positionsString(t), m.cfg.Name)
		}
	}
	return nil
}

func (m *mirror) positionsString(t string) string {
	s := ""
	for i, ps := range m.partitions[t] {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%d", ps.part, ps.committed)
	}
	return s
}
