package broker

// Produce v3-12.
//
// Behaviour:
//   - acks 0, 1 and -1. acks=-1 is answered only after the partition's
//     acceptor has fsynced the records (under the default fsync policy);
//     acks=1 once they are written; acks=0 gets no response at all. Any
//     other acks value gets INVALID_REQUIRED_ACKS on every partition.
//   - Each partition's records are validated (validateBatches: magic 2,
//     CRC32C, lengths, record count against lastOffsetDelta,
//     max.message.bytes) and errors are per partition: CORRUPT_MESSAGE,
//     UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_RECORD, MESSAGE_TOO_LARGE.
//     Compressed batches are stored as produced, never recompressed.
//   - Idempotent batches are checked in the partition's acceptor,
//     serialized with offset assignment (see producers.go): a retried
//     batch gets its original base offset and is not written again.
//   - Every partition's append is queued on the connection's read loop
//     (a request over 128 partitions or more is split between it and up
//     to three helpers it waits for: parallelProduce), before any is
//     waited for and before the next request is read, so partitions'
//     fsyncs overlap and each partition keeps its order;
//     the connection's writer waits for them and writes the response
//     (deferredReply), so the read loop reads the next request at once:
//     a pipelining producer's requests share group commits and keep their
//     order per partition.
//   - Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION (topics
//     are auto-created by Metadata, not by Produce).
//   - Needs WRITE on each topic (else TOPIC_AUTHORIZATION_FAILED on its
//     partitions) and, for a transactional request, WRITE on the
//     transactional id.
//   - Transactional batches (KIP-98) are checked on the partition's
//     acceptor goroutine against the transaction coordinator: a producer
//     id unknown to it gets INVALID_PRODUCER_ID_MAPPING, another epoch
//     INVALID_PRODUCER_EPOCH, a partition not added to the ongoing
//     transaction INVALID_TXN_STATE. Internal topics refuse produce
//     (INVALID_TOPIC_EXCEPTION). LogAppendTime is -1 (CreateTime topics
//     only).
//   - v12 (KIP-890 transaction version 2): a transactional batch for a
//     partition not in its producer's transaction adds it (starting the
//     transaction), so the client skips AddPartitionsToTxn; the add's
//     coordinator record is fsynced at the same time as the batch and
//     the reply waits for both (see txn.Coordinator.CheckProduceAt).
//   - v13's topic ids are not served (v12 is the maximum).

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/txn"
)

func init() { register(kmsg.Produce.Int16(), 3, 12, handleProduce) }

func handleProduce(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	b := r.b
	// Every partition's append is queued here, on the read loop (and its
	// helpers for a large request); the connection's writer waits for
	// them (finish),
	// while the read loop reads the next request, so a pipelining
	// producer's next request joins the same group commit while its
	// batches keep their order per partition.
	//
	// A partition to validate and queue, with its outcome. The items of
	// a request are one allocation: each holds its append's state (the
	// acceptor request, its check's data, the header of a one-batch
	// append), so that queueing an append allocates nothing of its own.
	type item struct {
		sp    *kmsg.ProduceResponseTopicPartition
		p     *partition
		t     *topic
		topic string
		rp    *kmsg.ProduceRequestTopicPartition
		pend  acceptor.Pending
		ok    bool // queued
		hdr   [1]batch.Header
		ap    appendState
	}
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	items := make([]item, 0, n)
	for _, rt := range req.Topics {
		st := kmsg.ProduceResponseTopic{Topic: rt.Topic}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t := b.lookup(rt.Topic)
		denied := !r.allowed(opWrite, resTopic, rt.Topic)
		if req.TransactionID != nil && !r.allowed(opWrite, resTxnID, *req.TransactionID) {
			denied = true
		}
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			sp := &st.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			switch {
			case denied:
				err = errCode(kerr.TopicAuthorizationFailed, "not authorized to write to topic %q", rt.Topic)
			case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
				err = errCode(kerr.InvalidRequiredAcks, "acks=%d; Sluice accepts 0, 1 and -1", req.Acks)
			case t == nil && isInternalTopic(rt.Topic):
				err = errCode(kerr.InvalidTopicException, "%s is internal: clients may not produce to it", rt.Topic)
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				err = errCode(kerr.UnknownTopicOrPartition, "%s/%d does not exist", rt.Topic, rp.Partition)
			}
			if err != nil {
				setProduceError(sp, req.Version, err)
				continue
			}
			items = append(items, item{sp: sp, p: t.parts[rp.Partition], t: t, topic: rt.Topic, rp: rp})
		}
		resp.Topics = append(resp.Topics, st)
	}
	// work validates and queues one partition's batches.
	work := func(it *item) {
		hs, n, err := validateBatches(it.hdr[:0], it.rp.Records, it.t.conf.maxMessageBytes)
		if err == nil && it.t.conf.compact {
			err = requireKeys(it.topic, it.rp.Partition, it.rp.Records)
		}
		if err == nil {
			ap := &it.ap
			ap.wantEnd = req.Acks == -1
			if req.TransactionID != nil {
				ap.add = &txnAdd{implicit: req.Version >= 12}
			}
			it.pend, err = b.enqueue(context.Background(), it.p, it.rp.Records, hs, n, req.Acks == -1, ap)
		}
		if err != nil {
			setProduceError(it.sp, req.Version, err)
			return
		}
		it.ok = true
	}
	parallelProduce(items, func(i int) *partition { return items[i].p }, func(i int) { work(&items[i]) })
	// The broker's traffic counters, shared by every connection, once
	// per request rather than per partition.
	var recs, bytes int64
	for i := range items {
		if items[i].ok {
			recs += items[i].ap.n
			bytes += int64(len(items[i].rp.Records))
		}
	}
	b.traffic.in(recs, int(bytes))
	finish := func() kmsg.Response {
		for i := range items {
			it := &items[i]
			if !it.ok {
				continue
			}
			base, err := b.wait(context.Background(), it.p, it.pend)
			if aerr := it.ap.add.wait(); err == nil {
				err = aerr
			}
			if err != nil {
				setProduceError(it.sp, req.Version, err)
				continue
			}
			it.sp.BaseOffset = base
			it.sp.LogStartOffset = it.p.log.StartOffset()
		}
		if req.Acks == 0 {
			return nil
		}
		return resp
	}
	// ready: every acks=all append was accepted and the high watermark
	// (durable offset) covers it, so finish will not wait on an fsync.
	ready := func() bool {
		for i := range items {
			it := &items[i]
			if !it.ok {
				continue
			}
			if !it.ap.wantEnd {
				return false
			}
			if e := it.ap.end.Load(); e <= 0 || it.p.acc.HighWatermark() < e || !it.ap.add.done() {
				return false
			}
		}
		return true
	}
	return &deferredReply{Response: resp, finish: finish, ready: ready}, nil
}

// parallelMin is the fewest partitions in one produce request that are
// validated and queued by more than one goroutine.
const parallelMin = 128

// parallelProduce runs do(i) for each of n items (len(items)): on the
// calling goroutine, or, for a request over many partitions, split
// between it and up to GOMAXPROCS-1 helpers (at most 3), and returns once
// all are done. With the shared WAL most appends are handled inline by
// whoever queues them (acceptor.Acceptor.Enqueue), so one connection's
// request over 2000 partitions would otherwise run on one core. Each
// partition's appends keep their order: a request's items are all queued
// before the connection reads its next request, and a request naming a
// partition twice runs on one goroutine.
func parallelProduce[T any](items []T, part func(i int) *partition, do func(i int)) {
	n := len(items)
	k := min(runtime.GOMAXPROCS(0), 4, n/(parallelMin/2))
	if n < parallelMin || k < 2 {
		for i := range n {
			do(i)
		}
		return
	}
	seen := make(map[*partition]struct{}, n)
	for i := range n {
		if _, dup := seen[part(i)]; dup {
			for i := range n {
				do(i)
			}
			return
		}
		seen[part(i)] = struct{}{}
	}
	var wg sync.WaitGroup
	chunk := (n + k - 1) / k
	for c := 1; c < k; c++ {
		from, to := c*chunk, min((c+1)*chunk, n)
		if from >= to {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from; i < to; i++ {
				do(i)
			}
		}()
	}
	for i := range min(chunk, n) {
		do(i)
	}
	wg.Wait()
}

func setProduceError(sp *kmsg.ProduceResponseTopicPartition, version int16, err error) {
	sp.ErrorCode = codeOf(err)
	sp.BaseOffset = -1
	if version >= 8 {
		msg := err.Error()
		sp.ErrorMessage = &msg
	}
}

// appendState is what one append to a partition carries through its
// acceptor: the request, and what its Check needs. handleProduce keeps
// one per partition inside the request's items, so that an append
// allocates nothing of its own.
type appendState struct {
	req     acceptor.Request
	b       *Broker
	p       *partition
	hs      []batch.Header
	records []byte
	n       int64
	// wantEnd: set end (see enqueue). add (nil but for a transactional
	// Produce) carries an implicit partition add (KIP-890) to the reply;
	// tc is the coordinator that checks transactional batches.
	wantEnd     bool
	idem, txnal bool
	end         atomic.Int64
	add         *txnAdd
	tc          *txn.Coordinator
}

// enqueue queues validated batches for a partition's acceptor. For
// idempotent batches the producer-state check runs on the acceptor
// goroutine, serialized with offset assignment (see producers.go); for
// transactional ones so do the coordinator's check (the producer is the
// current incarnation and added this partition to its ongoing
// transaction) and the opening of the transaction on the partition, so
// no batch can land after its transaction's marker. If ap.wantEnd,
// ap.end is set on the acceptor goroutine to the offset after the append
// once the append is accepted (not for a duplicate), so that a caller can
// tell from the high watermark that the append is durable without
// waiting. ap.add may be set by the caller (see appendState); enqueue
// fills in the rest of ap, which must stay untouched until the append is
// waited for.
func (b *Broker) enqueue(ctx context.Context, p *partition, records []byte, hs []batch.Header, n int64, durable bool, ap *appendState) (acceptor.Pending, error) {
	if err := b.diskGuard(p); err != nil {
		return acceptor.Pending{}, err
	}
	// Kafka's leader stamps its leader epoch on every batch it appends,
	// whatever the producer sent (librdkafka sends 0, franz-go and Java
	// -1); Sluice's is always 0 (Metadata says so). Consumers order
	// commits by (epoch, offset): franz-go skipped commits of a -1 batch
	// after a 0 one as going backwards. The field is outside the CRC.
	for i, pos := 0, 0; i < len(hs); i++ {
		batch.SetPartitionLeaderEpoch(records[pos:], 0)
		hs[i].PartitionLeaderEpoch = 0
		pos += hs[i].Size()
	}
	// validateBatches parsed these bytes once (CRC32C included); its
	// headers travel with them to storage, which reads them no more.
	ap.b, ap.p, ap.hs, ap.records, ap.n = b, p, hs, records, n
	ap.req = acceptor.Request{Batches: records, Headers: hs, Records: n, Durable: durable}
	for i := range hs {
		ap.idem = ap.idem || hs[i].Idempotent()
		ap.txnal = ap.txnal || hs[i].Transactional()
	}
	if ap.txnal {
		if ap.tc = b.txnc.Load(); ap.tc == nil {
			return acceptor.Pending{}, errCode(kerr.CoordinatorNotAvailable, "the transaction coordinator is not running")
		}
		// The coordinator's check takes its locks: on the partition's
		// goroutine, never on the connection's.
		ap.req.NoInline = true
	}
	ap.req.Check = ap.check
	pend, err := p.acc.Enqueue(ctx, &ap.req)
	if err == nil {
		p.traffic.in(n, len(records))
	}
	return pend, appendError(p, err)
}

// check is the append's acceptor.Request.Check. Every append passes the
// partition's snapshot point (snapshot.go) before its own check, and
// counts toward the next snapshot once accepted.
func (ap *appendState) check(base int64) (int64, bool, error) {
	p := ap.p
	ap.b.snapshotPoint(p, base)
	switch {
	case ap.txnal:
		if err := ap.add.check(ap.tc, p, ap.hs, base); err != nil {
			return 0, false, err
		}
		dupBase, dup, err := p.pids.check(ap.hs, base)
		if err != nil || dup {
			return dupBase, dup, err
		}
		off := base
		for i := range ap.hs {
			if ap.hs[i].Transactional() {
				p.txns.begin(ap.hs[i].ProducerID, off)
			}
			off += int64(ap.hs[i].LastOffsetDelta) + 1
		}
	case ap.idem:
		if dupBase, dup, err := p.pids.check(ap.hs, base); err != nil || dup {
			return dupBase, dup, err
		}
	}
	p.snaps.since += int64(len(ap.records))
	if ap.wantEnd {
		ap.end.Store(base + ap.n)
	}
	return 0, false, nil
}

// codeErr is errCode for a numeric Kafka error code.
func codeErr(code int16, format string, args ...any) error {
	ke, ok := kerr.ErrorForCode(code).(*kerr.Error)
	if !ok {
		ke = kerr.UnknownServerError
	}
	return errCode(ke, format, args...)
}

// wait waits for a queued append and returns its base offset (the
// original one for a duplicate).
func (b *Broker) wait(ctx context.Context, p *partition, pend acceptor.Pending) (int64, error) {
	res, err := pend.Wait(ctx)
	if err != nil {
		return -1, appendError(p, err)
	}
	return res.BaseOffset, nil
}

// appendError maps an acceptor error to the Kafka error a client gets.
func appendError(p *partition, err error) error {
	if err == nil {
		return nil
	}
	var ce *codeError
	switch {
	case errors.As(err, &ce):
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

// AppendBatch appends batch, one or more whole client-encoded
// RecordBatch v2 (CRC valid), to a partition, validated as a Produce
// request would be, and returns the base offset. acks is as in Kafka: -1
// waits until the records are durable, 1 until they are written, 0 as 1
// (an in-process caller always learns the offset). The topic is created
// when it does not exist and auto-creation is on. batch is not modified.
// Errors wrap the Kafka error (errors.Is(err, kerr.OutOfOrderSequenceNumber)).
func (b *Broker) AppendBatch(ctx context.Context, topic string, partition int32, batch []byte, acks int16) (baseOffset int64, err error) {
	if acks != 0 && acks != 1 && acks != -1 {
		return -1, errCode(kerr.InvalidRequiredAcks, "acks=%d; use 0, 1 or -1", acks)
	}
	if b.closing.Load() {
		return -1, errCode(kerr.BrokerNotAvailable, "the broker is closed")
	}
	t, err := b.autoCreate(topic)
	if err != nil {
		return -1, err
	}
	if partition < 0 || int(partition) >= len(t.parts) {
		return -1, errCode(kerr.UnknownTopicOrPartition, "%s/%d does not exist", topic, partition)
	}
	p := t.parts[partition]
	records := append([]byte(nil), batch...) // the acceptor writes base offsets in place
	hs, n, err := validateBatches(nil, records, t.conf.maxMessageBytes)
	if err == nil && t.conf.compact {
		err = requireKeys(topic, partition, records)
	}
	if err != nil {
		return -1, err
	}
	pend, err := b.enqueue(ctx, p, records, hs, n, acks == -1, new(appendState))
	if err != nil {
		return -1, err
	}
	b.traffic.in(n, len(records))
	return b.wait(ctx, p, pend)
}

// CreateTopic creates a topic with the given partition count (-1: the
// default) and configs. Errors wrap the Kafka error
// (kerr.TopicAlreadyExists, kerr.InvalidConfig, ...).
func (b *Broker) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := b.createTopic(name, partitions, configs, false)
	return err
}
