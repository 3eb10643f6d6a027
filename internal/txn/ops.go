package txn

import (
	"math"

	"github.com/sluicedb/sluice/internal/kvlog"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Error codes the operations return (Kafka's).
var (
	codeNotAvailable   = kerr.CoordinatorNotAvailable.Code
	codeMapping        = kerr.InvalidProducerIDMapping.Code
	codeFenced         = kerr.ProducerFenced.Code
	codeBadEpoch       = kerr.InvalidProducerEpoch.Code
	codeBadState       = kerr.InvalidTxnState.Code
	codeConcurrent     = kerr.ConcurrentTransactions.Code
	codeBadTimeout     = kerr.InvalidTransactionTimeout.Code
	codeUnknownPart    = kerr.UnknownTopicOrPartition.Code
	codeNotAttempted   = kerr.OperationNotAttempted.Code
	codeInvalidRequest = kerr.InvalidRequest.Code
)

// checkProducer validates a request's producer id and epoch against t.
func checkProducer(t *Txn, pid int64, epoch int16) int16 {
	switch {
	case t == nil || t.PID != pid:
		return codeMapping
	case epoch < t.Epoch:
		return codeFenced // a newer incarnation of this transactional id exists
	case epoch > t.Epoch:
		return codeBadEpoch
	}
	return 0
}

// bumped returns the producer id and epoch after an epoch bump: the same
// id with epoch+1, or a new id at epoch 0 when the epoch is exhausted.
func (c *Coordinator) bumped(pid int64, epoch int16) (int64, int16, error) {
	if epoch < math.MaxInt16-1 {
		return pid, epoch + 1, nil
	}
	id, err := c.cfg.AllocPID()
	return id, 0, err
}

// InitProducerID gives transactional id id a producer id and epoch: a
// new id the first time, otherwise the same id with a bumped epoch,
// which fences every older incarnation; an ongoing transaction of the
// old incarnation is aborted first. pid and epoch are the caller's
// current ones (KIP-360; -1 when it has none). It returns the producer
// id, epoch and an error code.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, int16) {
	if id == "" {
		return -1, -1, codeInvalidRequest
	}
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return -1, -1, codeBadTimeout
	}
	e := c.entryFor(id, true)
	if e == nil {
		return -1, -1, codeNotAvailable
	}
	e.op.Lock()
	defer e.op.Unlock()
	t := c.current(e)
	if t == nil {
		newPID, err := c.cfg.AllocPID()
		if err != nil {
			c.cfg.Logger.Error("txn: reserving a producer id failed", "err", err)
			return -1, -1, codeNotAvailable
		}
		nt := &Txn{ID: id, PID: newPID, PrevPID: -1, PrevEpoch: -1, State: Empty, TimeoutMs: timeoutMs, StartMs: -1}
		if err := c.persist(e, nt); err != nil {
			return -1, -1, storageCode(err)
		}
		return nt.PID, nt.Epoch, 0
	}
	if pid >= 0 {
		switch {
		case pid == t.PID && epoch == t.Epoch:
		case pid == t.PrevPID && epoch == t.PrevEpoch && (t.State == Empty || t.State == CompleteAbort || t.State == CompleteCommit):
			// A retry of the InitProducerId that produced t: same answer.
			return t.PID, t.Epoch, 0
		default:
			return -1, -1, codeFenced
		}
	}
	orig := t
	aborted := false
	switch t.State {
	case PrepareCommit, PrepareAbort:
		if err := c.finish(e, t); err != nil {
			c.cfg.Logger.Warn("txn: completing a transaction failed", "transactional_id", id, "err", err)
			return -1, -1, codeConcurrent
		}
	case Ongoing:
		if e.undecided {
			// Recovery could not yet tell whether this transaction was
			// being committed; the sweep retries. Until then it is
			// neither aborted nor committed.
			return -1, -1, codeConcurrent
		}
		// Fence the old incarnation: abort its transaction at a bumped epoch.
		mepoch := t.Epoch
		if mepoch < math.MaxInt16-1 {
			mepoch++
		}
		if _, err := c.end(e, t, false, mepoch); err != nil {
			c.cfg.Logger.Warn("txn: aborting the previous incarnation's transaction failed", "transactional_id", id, "err", err)
			return -1, -1, codeConcurrent
		}
		aborted = mepoch != t.Epoch
	}
	t = c.current(e)
	nt := t.clone()
	if !aborted {
		var err error
		if nt.PID, nt.Epoch, err = c.bumped(t.PID, t.Epoch); err != nil {
			return -1, -1, codeNotAvailable
		}
	}
	nt.PrevPID, nt.PrevEpoch = orig.PID, orig.Epoch
	nt.State, nt.TimeoutMs, nt.StartMs, nt.Partitions, nt.Since, nt.Offsets = Empty, timeoutMs, -1, nil, nil, nil
	if err := c.persist(e, nt); err != nil {
		return -1, -1, storageCode(err)
	}
	return nt.PID, nt.Epoch, 0
}

// begin returns the entry of id, locked, and its state, after checking
// the producer; code is non-zero (and nothing locked) on failure.
func (c *Coordinator) begin(id string, pid int64, epoch int16) (*entry, *Txn, int16) {
	e := c.entryFor(id, false)
	if e == nil {
		if c.isClosed() {
			return nil, nil, codeNotAvailable
		}
		return nil, nil, codeMapping
	}
	e.op.Lock()
	t := c.current(e)
	code := checkProducer(t, pid, epoch)
	if code == 0 && (t.State == PrepareCommit || t.State == PrepareAbort || e.undecided) {
		// The previous EndTxn's markers are still being written (retried
		// by the sweep), or recovery could not yet tell whether they were.
		code = codeConcurrent
	}
	if code != 0 {
		e.op.Unlock()
		return nil, nil, code
	}
	return e, t, 0
}

// ongoing returns a copy of t in the Ongoing state, starting a new
// transaction when t is not ongoing.
func (c *Coordinator) ongoing(t *Txn) *Txn {
	if t.State != Ongoing {
		nt := t.shallow() // every shared field is replaced
		nt.State, nt.StartMs, nt.Partitions, nt.Since, nt.Offsets = Ongoing, c.cfg.Now().UnixMilli(), nil, nil, nil
		return nt
	}
	return t.clone()
}

// AddPartitions adds partitions to id's transaction (AddPartitionsToTxn)
// and returns a code per partition.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, parts []TopicPartition) []int16 {
	codes := make([]int16, len(parts))
	all := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	e, t, code := c.begin(id, pid, epoch)
	if code != 0 {
		return all(code)
	}
	defer e.op.Unlock()
	bad := false
	for i, tp := range parts {
		if tp.Partition < 0 || (c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(tp.Topic, tp.Partition)) {
			codes[i], bad = codeUnknownPart, true
		}
	}
	if bad {
		for i := range codes {
			if codes[i] == 0 {
				codes[i] = codeNotAttempted
			}
		}
		return codes
	}
	nt := c.ongoing(t)
	changed := t.State != Ongoing
	for _, tp := range parts {
		if nt.has(tp) {
			continue
		}
		since := int64(-1)
		if c.cfg.EndOffset != nil {
			since = c.cfg.EndOffset(tp.Topic, tp.Partition)
		}
		nt.add(tp, since)
		changed = true
	}
	if changed {
		if err := c.persist(e, nt); err != nil {
			return all(storageCode(err))
		}
	}
	return codes
}

// AddOffsets adds group to id's transaction (AddOffsetsToTxn).
func (c *Coordinator) AddOffsets(id string, pid int64, epoch int16, group string) int16 {
	if group == "" {
		return kerr.InvalidGroupID.Code
	}
	e, t, code := c.begin(id, pid, epoch)
	if code != 0 {
		return code
	}
	defer e.op.Unlock()
	if t.State == Ongoing {
		if _, ok := t.Offsets[group]; ok {
			return 0
		}
	}
	nt := c.ongoing(t)
	if nt.Offsets == nil {
		nt.Offsets = map[string][]Offset{}
	}
	nt.Offsets[group] = []Offset{}
	return storageCode(c.persist(e, nt))
}

// CommitOffsets stages offsets of group in id's transaction
// (TxnOffsetCommit). memberID, instanceID and generation are checked
// against the group when given (KIP-447; generation -1 and an empty
// member id skip the check). It returns a top-level code (applied to
// every offset) and a code per offset.
func (c *Coordinator) CommitOffsets(id, group string, pid int64, epoch int16, generation int32, memberID string, instanceID *string, offs []Offset) []int16 {
	return c.commitOffsets2(id, group, pid, epoch, generation, memberID, instanceID, offs, false)
}

// CommitOffsetsAdding is CommitOffsets for TxnOffsetCommit v5+ (KIP-890
// transaction version 2): the group is added to the transaction, which
// starts if none is ongoing, as AddOffsetsToTxn would, in the same
// record as the offsets.
func (c *Coordinator) CommitOffsetsAdding(id, group string, pid int64, epoch int16, generation int32, memberID string, instanceID *string, offs []Offset) []int16 {
	return c.commitOffsets2(id, group, pid, epoch, generation, memberID, instanceID, offs, true)
}

func (c *Coordinator) commitOffsets2(id, group string, pid int64, epoch int16, generation int32, memberID string, instanceID *string, offs []Offset, addGroup bool) []int16 {
	codes := make([]int16, len(offs))
	all := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	e, t, code := c.begin(id, pid, epoch)
	if code != 0 {
		if code == codeMapping && c.isClosed() {
			code = codeNotAvailable
		}
		return all(code)
	}
	defer e.op.Unlock()
	if group == "" {
		return all(kerr.InvalidGroupID.Code)
	}
	if _, ok := t.Offsets[group]; (!ok || t.State != Ongoing) && !addGroup {
		return all(codeBadState) // AddOffsetsToTxn was not called for this group
	}
	if c.cfg.CheckMember != nil && (memberID != "" || generation >= 0) {
		if code := c.cfg.CheckMember(group, memberID, instanceID, generation); code != 0 {
			return all(code)
		}
	}
	nt := c.ongoing(t)
	if _, ok := nt.Offsets[group]; !ok {
		if nt.Offsets == nil {
			nt.Offsets = map[string][]Offset{}
		}
		nt.Offsets[group] = []Offset{}
	}
	n := 0
	for i, o := range offs {
		if o.Partition < 0 || (c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(o.Topic, o.Partition)) {
			codes[i] = codeUnknownPart
			continue
		}
		nt.stage(group, o)
		n++
	}
	if n == 0 {
		return codes
	}
	if err := c.persist(e, nt); err != nil {
		return all(storageCode(err))
	}
	return codes
}

// EndTxn commits or aborts id's transaction and returns once its markers
// (and, on commit, its offsets) are durable (EndTxn v0-4: the epoch stays).
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool) int16 {
	_, _, code := c.endTxn(id, pid, epoch, commit, false)
	return code
}

// EndTxnV2 is EndTxn for EndTxn v5+ (KIP-890 transaction version 2): the
// decision bumps the epoch (the markers carry the new one, fencing every
// batch of the old), and the producer id and epoch to use next are
// returned: the same id at epoch+1, or a new id at epoch 0 once the epoch
// is exhausted. Aborting with no transaction ongoing bumps the epoch too.
// A retry of an EndTxn whose answer was lost (the previous id and epoch)
// gets the same answer.
func (c *Coordinator) EndTxnV2(id string, pid int64, epoch int16, commit bool) (int64, int16, int16) {
	return c.endTxn(id, pid, epoch, commit, true)
}

func (c *Coordinator) endTxn(id string, pid int64, epoch int16, commit, v2 bool) (int64, int16, int16) {
	e := c.entryFor(id, false)
	if e == nil {
		if c.isClosed() {
			return -1, -1, codeNotAvailable
		}
		return -1, -1, codeMapping
	}
	e.op.Lock()
	defer e.op.Unlock()
	t := c.current(e)
	if code := checkProducer(t, pid, epoch); code != 0 {
		if !v2 || t == nil || t.PrevPID != pid || t.PrevEpoch != epoch {
			return -1, -1, code
		}
		// A retry of the EndTxn v5 that bumped the epoch.
		switch t.State {
		case PrepareCommit, PrepareAbort:
			if (t.State == PrepareCommit) != commit {
				return -1, -1, codeBadState
			}
			if err := c.finish(e, t); err != nil {
				return -1, -1, codeConcurrent
			}
			return c.next(e, pid, epoch)
		case CompleteCommit, CompleteAbort:
			if (t.State == CompleteCommit) != commit {
				return -1, -1, codeBadState
			}
			return c.next(e, pid, epoch)
		}
		return -1, -1, code
	}
	switch t.State {
	case Ongoing:
		if e.undecided && !commit {
			// Its commit may have written markers already (recovery could
			// not read a partition yet): only a commit is safe until the
			// sweep has looked again.
			return -1, -1, codeConcurrent
		}
		end := c.end
		if commit && c.overlaps(t) {
			end = c.endOverlapped
		}
		mepoch := t.Epoch
		if v2 {
			mepoch++ // at most MaxInt16: producers' epochs stay below MaxInt16-1
		}
		if _, err := end(e, t, commit, mepoch); err != nil {
			c.cfg.Logger.Warn("txn: ending a transaction failed", "transactional_id", id, "commit", commit, "err", err)
			if cur := c.current(e); cur.State == PrepareAbort || cur.State == PrepareCommit {
				return -1, -1, codeConcurrent // decided; the sweep completes it
			}
			return -1, -1, codeNotAvailable
		}
		if v2 {
			return c.next(e, pid, epoch)
		}
		return -1, -1, 0
	case PrepareCommit, PrepareAbort:
		if (t.State == PrepareCommit) != commit {
			return -1, -1, codeBadState
		}
		if err := c.finish(e, t); err != nil {
			return -1, -1, codeConcurrent
		}
		if v2 {
			return c.next(e, pid, epoch)
		}
		return -1, -1, 0
	case Empty, CompleteCommit, CompleteAbort:
		if v2 && !commit {
			// KIP-890: an abort with nothing ongoing succeeds and bumps
			// the epoch, fencing whatever the old one might still send.
			nt := t.clone()
			nt.State, nt.PrevPID, nt.PrevEpoch = CompleteAbort, t.PID, t.Epoch
			var err error
			if nt.PID, nt.Epoch, err = c.bumped(t.PID, t.Epoch); err != nil {
				return -1, -1, codeNotAvailable
			}
			if err := c.persist(e, nt); err != nil {
				return -1, -1, storageCode(err)
			}
			return nt.PID, nt.Epoch, 0
		}
		if t.State == CompleteCommit && commit || t.State == CompleteAbort && !commit {
			return -1, -1, 0 // a retry (EndTxn v0-4)
		}
	}
	return -1, -1, codeBadState
}

// next returns the producer id and epoch after an EndTxn v5 of (pid,
// epoch), whose decision bumped the epoch: the current ones, or, when the
// epoch can no longer grow, a new producer id at epoch 0, made durable
// first. e.op must be held.
func (c *Coordinator) next(e *entry, pid int64, epoch int16) (int64, int16, int16) {
	t := c.current(e)
	if t.Epoch < math.MaxInt16-1 {
		return t.PID, t.Epoch, 0
	}
	newPID, err := c.cfg.AllocPID()
	if err != nil {
		c.cfg.Logger.Error("txn: reserving a producer id failed", "err", err)
		return -1, -1, codeNotAvailable
	}
	nt := t.clone()
	nt.PID, nt.Epoch, nt.PrevPID, nt.PrevEpoch = newPID, 0, pid, epoch
	if err := c.persist(e, nt); err != nil {
		return -1, -1, storageCode(err)
	}
	return nt.PID, nt.Epoch, 0
}

// CheckProduce validates a transactional batch of producer pid at epoch
// for a partition: the producer must be the current incarnation of its
// transactional id and the partition added to its ongoing transaction.
func (c *Coordinator) CheckProduce(pid int64, epoch int16, topic string, partition int32) int16 {
	code, _ := c.CheckProduceAt(pid, epoch, topic, partition, -1, false)
	return code
}

// CheckProduceAt is CheckProduce for a batch that would be written at
// offset base. The broker calls it on the partition's acceptor goroutine,
// serialized with the markers, so no batch can land after its
// transaction's marker.
//
// With implicit (Produce v12+, KIP-890 transaction version 2), a
// partition not in the transaction is added to it, starting one when
// none is ongoing: the new state is published at once (later batches and
// the transaction's end see the partition) and its record queued on the
// coordinator's log, which fsyncs it while the partition fsyncs the
// batch. The returned Pending, when not nil, is that record (or an
// earlier add of the id still in flight): the Produce reply must wait for
// it as well as for the batch. A crash that keeps the batch and loses the
// record leaves an open transaction on the partition that recovery adds
// back (Config.OpenTransactions). The add is refused with
// CONCURRENT_TRANSACTIONS (retriable) while another operation of the id
// is running.
func (c *Coordinator) CheckProduceAt(pid int64, epoch int16, topic string, partition int32, base int64, implicit bool) (int16, *Pending) {
	tp := TopicPartition{topic, partition}
	c.mu.Lock()
	e := c.byPID[pid]
	if e == nil || e.t == nil || e.t.PID != pid {
		c.mu.Unlock()
		return codeMapping, nil
	}
	t := e.t
	switch {
	case epoch != t.Epoch:
		c.mu.Unlock()
		return codeBadEpoch, nil
	case t.State == Ongoing && t.has(tp):
		add := e.add
		c.mu.Unlock()
		if add != nil {
			return 0, add
		}
		return 0, nil
	case !implicit || t.State == PrepareCommit || t.State == PrepareAbort:
		c.mu.Unlock()
		return codeBadState, nil
	case !e.op.TryLock():
		// Lock order is e.op before c.mu; TryLock does not wait.
		c.mu.Unlock()
		return codeConcurrent, nil
	}
	defer e.op.Unlock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return codeNotAvailable, nil
	case e.undecided:
		c.mu.Unlock()
		return codeConcurrent, nil
	}
	nt := c.ongoing(t)
	nt.add(tp, base)
	nt.UpdateMs = c.cfg.Now().UnixMilli()
	c.publishLocked(e, nt)
	dirty := e.dirty
	e.dirty = false
	c.mu.Unlock()
	// Queued while e.op is held: no other record of the id can be
	// queued before it and derived from the state before it.
	wait, err := c.log.Enqueue([]kvlog.Record{{Key: recordKey(nt.ID), Value: encodeTxn(nt)}})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		// Nothing derived from nt meanwhile (e.op is held, and other
		// partitions' checks do not look at this one): take it back.
		c.publishLocked(e, t)
		e.dirty = dirty
		c.cfg.Logger.Warn("txn: implicitly adding a partition failed", "transactional_id", nt.ID, "topic", topic, "partition", partition, "err", err)
		return storageCode(err), nil
	}
	e.add = &Pending{wait: wait}
	return 0, e.add
}

// VerifyPartitions reports, per partition, whether it is in id's ongoing
// transaction of producer pid at epoch (AddPartitionsToTxn v4+ with
// VerifyOnly): 0, or the producer's error, or INVALID_TXN_STATE.
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, parts []TopicPartition) []int16 {
	codes := make([]int16, len(parts))
	c.mu.Lock()
	defer c.mu.Unlock()
	var t *Txn
	if e := c.byID[id]; e != nil {
		t = e.t
	}
	code := checkProducer(t, pid, epoch)
	for i, tp := range parts {
		switch {
		case code != 0:
			codes[i] = code
		case t.State != Ongoing || !t.has(tp):
			codes[i] = codeBadState
		}
	}
	return codes
}

// PendingOffset reports whether an unfinished transaction has staged an
// offset of group for the partition (OffsetFetch RequireStable).
func (c *Coordinator) PendingOffset(group, topic string, partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.byID {
		t := e.t
		if t == nil || (t.State != Ongoing && t.State != PrepareCommit) {
			continue
		}
		for _, o := range t.Offsets[group] {
			if o.Topic == topic && o.Partition == partition {
				return true
			}
		}
	}
	return false
}

// Describe returns copies of the states of ids; a missing id is nil.
func (c *Coordinator) Describe(ids []string) []*Txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Txn, len(ids))
	for i, id := range ids {
		if e := c.byID[id]; e != nil && e.t != nil {
			out[i] = e.t.clone()
		}
	}
	return out
}

// List returns copies of every state, by transactional id, filtered by
// states and producer ids when those are not empty.
func (c *Coordinator) List(states []State, pids []int64) []*Txn {
	c.mu.Lock()
	var out []*Txn
	for _, e := range c.byID {
		t := e.t
		if t == nil || (len(states) > 0 && !slices.Contains(states, t.State)) || (len(pids) > 0 && !slices.Contains(pids, t.PID)) {
			continue
		}
		out = append(out, t.clone())
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
