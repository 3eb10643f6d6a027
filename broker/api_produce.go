package broker

// Produce v3-13.
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
//     order per partition. A connection that is not pipelining
//     (conn.soloProduce) has a one-partition acks=-1 request written,
//     fsynced and answered on its read loop instead, when the partition's
//     goroutine is idle (partition.Append.SyncInline).
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
//   - v13 names topics by id (KIP-516); an unknown id gets UNKNOWN_TOPIC_ID
//     on each of its partitions.

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/acceptor"
	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/storage"
)

func init() { register(kmsg.Produce.Int16(), 3, 13, handleProduce) }

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
		p     *partition.Partition
		t     *topic
		topic string
		rp    *kmsg.ProduceRequestTopicPartition
		pend  acceptor.Pending
		ok    bool // queued
		hdr   [1]batch.Header
		ap    partition.Append
	}
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	items := make([]item, 0, n)
	for _, rt := range req.Topics {
		st := kmsg.ProduceResponseTopic{Topic: rt.Topic, TopicID: rt.TopicID}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		name, t, missing := b.topicRef(req.Version >= 13, rt.Topic, rt.TopicID)
		rt.Topic = name
		denied := (t != nil || req.Version < 13) && !r.allowed(opWrite, resTopic, rt.Topic)
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
			case t != nil && notEnoughReplicas(t, req.Acks) != nil:
				err = notEnoughReplicas(t, req.Acks)
			case isInternalTopic(rt.Topic):
				err = errCode(kerr.InvalidTopicException, "%s is internal: clients may not produce to it", rt.Topic)
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				err = errCode(missing, "%s/%d does not exist", rt.Topic, rp.Partition)
			}
			if err != nil {
				setProduceError(sp, req.Version, err)
				continue
			}
			items = append(items, item{sp: sp, p: t.parts[rp.Partition], t: t, topic: rt.Topic, rp: rp})
		}
		resp.Topics = append(resp.Topics, st)
	}
	// A lone acks=all append of a connection that is not pipelining
	// (conn.soloProduce) may be written, fsynced and answered on the read
	// loop: the partition's acceptor does so if its goroutine is idle and
	// the partition fsyncs its own segment (acceptor.Request.SyncInline).
	// Only for one partition: a request's partitions are fsynced in
	// parallel by their goroutines, not one after another here.
	solo := r.c != nil && r.c.soloProduce()
	syncInline := solo && req.Acks == -1 && len(items) == 1
	// A new partition keeps its first bytes in memory until its file is
	// made; a batch large enough to bypass the segment's write-behind
	// tail is then kept as the slice of the frame it arrived in, not
	// copied (storage.Shared): the frame is reused only once every such
	// partition's file is made, and counts against their memory budget
	// meanwhile. dispatch hands the hold to the reply, which releases it.
	// Only when such batches are most of the frame: a frame held for a
	// few of its batches would cost the next request a fresh frame, more
	// memory than the copies it saves (many partitions each given a few
	// tens of KiB in one request of several MiB).
	// mostlyKept estimates it (what the partitions do when their appends
	// run decides): batches of at least the write-behind to partitions
	// whose files are not made yet make up half of n bytes.
	mostlyKept := func(n int) bool {
		kept := 0
		for i := range items {
			if k := len(items[i].rp.Records); k >= segmentWriteBehind && items[i].p.Pending() {
				if kept += k; 2*kept >= n {
					return true
				}
			}
		}
		return false
	}
	var shared *storage.Shared
	if f := r.frame; len(items) > 0 && len(f) >= segmentWriteBehind && mostlyKept(len(f)) {
		shared = storage.NewShared(cap(f), func() { putFrame(f) })
		r.shared = shared
	}
	// work validates and queues one partition's batches.
	work := func(it *item) {
		hs, n, err := validateBatches(it.hdr[:0], it.rp.Records, it.t.conf.maxMessageBytes)
		if err == nil && it.t.conf.compact {
			err = requireKeys(it.topic, it.rp.Partition, it.rp.Records)
		}
		if err == nil {
			ap := &it.ap
			ap.WantEnd = req.Acks == -1
			ap.Implicit = req.TransactionID != nil && req.Version >= 12
			ap.SyncInline = syncInline
			ap.Shared = shared
			var start time.Time
			if syncInline {
				start = time.Now()
			}
			it.pend, err = b.enqueue(context.Background(), it.p, it.rp.Records, hs, n, req.Acks == -1, ap)
			if syncInline {
				// Time spent mostly waiting on the disk, not serving:
				// outside the request-time quota, as a Fetch's wait is.
				r.waited += time.Since(start)
			}
		}
		if err != nil {
			setProduceError(it.sp, req.Version, err)
			return
		}
		it.ok = true
	}
	parallelProduce(items, func(i int) *partition.Partition { return items[i].p }, func(i int) { work(&items[i]) })
	// The broker's traffic counters, shared by every connection, once
	// per request rather than per partition.
	var recs, bytes int64
	for i := range items {
		if items[i].ok {
			recs += items[i].ap.Records()
			bytes += int64(len(items[i].rp.Records))
		}
	}
	b.traffic.In(recs, int(bytes))
	finish := func() kmsg.Response {
		for i := range items {
			it := &items[i]
			if !it.ok {
				continue
			}
			base, err := it.p.Wait(context.Background(), it.pend)
			if aerr := it.ap.TxnWait(); err == nil {
				err = aerr
			}
			if err != nil {
				setProduceError(it.sp, req.Version, err)
				continue
			}
			it.sp.BaseOffset = base
			it.sp.LogStartOffset = it.p.Log().StartOffset()
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
			if !it.ap.WantEnd {
				return false
			}
			if !it.p.Ready(it.ap.End()) || !it.ap.TxnDone() {
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
func parallelProduce[T any](items []T, part func(i int) *partition.Partition, do func(i int)) {
	n := len(items)
	k := min(runtime.GOMAXPROCS(0), 4, n/(parallelMin/2))
	if n < parallelMin || k < 2 {
		for i := range n {
			do(i)
		}
		return
	}
	seen := make(map[*partition.Partition]struct{}, n)
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
		msg := errMessage(err)
		sp.ErrorMessage = &msg
	}
}

// enqueue queues validated batches on a partition (Partition.Enqueue),
// unless the disk guard refuses them. ap.WantEnd and ap.Implicit may be
// set by the caller; enqueue sets the transaction coordinator that
// checks transactional batches.
func (b *Broker) enqueue(ctx context.Context, p *partition.Partition, records []byte, hs []batch.Header, n int64, durable bool, ap *partition.Append) (acceptor.Pending, error) {
	if err := b.diskGuard(p); err != nil {
		return acceptor.Pending{}, err
	}
	if tc := b.txnc.Load(); tc != nil {
		ap.Txn = tc
	}
	return p.Enqueue(ctx, records, hs, n, durable, ap)
}

// AppendBatch appends batch, one or more whole client-encoded
// RecordBatch v2 (CRC valid), to a partition, validated as a Produce
// request would be, and returns the base offset. acks is as in Kafka: -1
// waits until the records are durable, 1 until they are written, 0 as 1
// (an in-process caller always learns the offset). The topic is created
// when it does not exist and auto-creation is on. batch is not modified.
// Errors wrap the Kafka error (errors.Is(err, kerr.OutOfOrderSequenceNumber)).
func (b *Broker) AppendBatch(ctx context.Context, topic string, index int32, batch []byte, acks int16) (baseOffset int64, err error) {
	if acks != 0 && acks != 1 && acks != -1 {
		return -1, errCode(kerr.InvalidRequiredAcks, "acks=%d; use 0, 1 or -1", acks)
	}
	if b.closing.Load() {
		return -1, errCode(kerr.BrokerNotAvailable, "the broker is closed")
	}
	if isInternalTopic(topic) {
		return -1, errCode(kerr.InvalidTopicException, "%s is internal: clients may not produce to it", topic)
	}
	t, err := b.autoCreate(topic)
	if err != nil {
		return -1, err
	}
	if index < 0 || int(index) >= len(t.parts) {
		return -1, errCode(kerr.UnknownTopicOrPartition, "%s/%d does not exist", topic, index)
	}
	p := t.parts[index]
	records := append([]byte(nil), batch...) // the acceptor writes base offsets in place
	hs, n, err := validateBatches(nil, records, t.conf.maxMessageBytes)
	if err == nil && t.conf.compact {
		err = requireKeys(topic, index, records)
	}
	if err != nil {
		return -1, err
	}
	pend, err := b.enqueue(ctx, p, records, hs, n, acks == -1, new(partition.Append))
	if err != nil {
		return -1, err
	}
	b.traffic.In(n, len(records))
	return p.Wait(ctx, pend)
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
