package broker

// Produce v3-11.
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
//   - Partitions of one request are appended concurrently, so their
//     fsyncs overlap; requests on one connection are served one at a
//     time, so a producer's batches to a partition keep their order.
//   - Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION (topics
//     are auto-created by Metadata, not by Produce).
//   - Transactions are not supported: transactional batches get
//     INVALID_RECORD. LogAppendTime is -1 (CreateTime topics only).
//   - v13's topic ids are not served (v11 is the maximum).

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"sluice/internal/acceptor"
	"sluice/internal/batch"
)

func init() { register(kmsg.Produce.Int16(), 3, 11, handleProduce) }

func handleProduce(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	b := r.b
	var wg, takenWG sync.WaitGroup
	for _, rt := range req.Topics {
		st := kmsg.ProduceResponseTopic{Topic: rt.Topic}
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t := b.lookup(rt.Topic)
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			var p *partition
			var err error
			switch {
			case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
				err = errCode(kerr.InvalidRequiredAcks, "acks=%d; Sluice accepts 0, 1 and -1", req.Acks)
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				err = errCode(kerr.UnknownTopicOrPartition, "%s/%d does not exist", rt.Topic, rp.Partition)
			default:
				p = t.parts[rp.Partition]
			}
			var hs []batch.Header
			var n int64
			if err == nil {
				hs, n, err = validateBatches(rp.Records, t.conf.maxMessageBytes)
			}
			if err != nil {
				setProduceError(sp, req.Version, err)
				continue
			}
			wg.Add(1)
			takenWG.Add(1)
			go func() {
				defer wg.Done()
				base, err := b.appendTo(context.Background(), p, rp.Records, hs, n, req.Acks == -1, sync.OnceFunc(takenWG.Done))
				if err != nil {
					setProduceError(sp, req.Version, err)
					return
				}
				sp.BaseOffset = base
				sp.LogStartOffset = p.log.StartOffset()
			}()
		}
		resp.Topics = append(resp.Topics, st)
	}
	takenWG.Wait()
	if r.taken != nil {
		r.taken()
	}
	wg.Wait()
	if req.Acks == 0 {
		return nil, nil
	}
	return resp, nil
}

func setProduceError(sp *kmsg.ProduceResponseTopicPartition, version int16, err error) {
	sp.ErrorCode = codeOf(err)
	sp.BaseOffset = -1
	if version >= 8 {
		msg := err.Error()
		sp.ErrorMessage = &msg
	}
}

// appendTo appends validated batches to a partition through its acceptor
// and returns the base offset (the original one for a duplicate). taken,
// if not nil, is called once the acceptor has taken the append (on the
// acceptor goroutine, just before offsets are assigned) or the append
// failed; it must not block.
func (b *Broker) appendTo(ctx context.Context, p *partition, records []byte, hs []batch.Header, n int64, durable bool, taken func()) (int64, error) {
	req := &acceptor.Request{Batches: records, Records: n, Durable: durable}
	idempotent := false
	for i := range hs {
		idempotent = idempotent || hs[i].Idempotent()
	}
	switch {
	case idempotent:
		req.Check = func(base int64) (int64, bool, error) {
			if taken != nil {
				taken()
			}
			return p.pids.check(hs, base)
		}
	case taken != nil:
		req.Check = func(int64) (int64, bool, error) { taken(); return 0, false, nil }
	}
	res, err := p.acc.Append(ctx, req)
	if taken != nil {
		taken() // the append failed before it was taken, or this is a no-op
	}
	if err != nil {
		var ce *codeError
		switch {
		case errors.As(err, &ce):
			return -1, err
		case errors.Is(err, acceptor.ErrClosed):
			return -1, errCode(kerr.NotLeaderForPartition, "%s/%d is closing", p.topic, p.index)
		case errors.Is(err, acceptor.ErrFailed):
			return -1, errCode(kerr.KafkaStorageError, "%s/%d: %v", p.topic, p.index, err)
		case errors.Is(err, acceptor.ErrBadRequest):
			return -1, errCode(kerr.CorruptMessage, "%v", err)
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return -1, fmt.Errorf("%w: %w", kerr.RequestTimedOut, err)
		}
		return -1, fmt.Errorf("%w: %s/%d: %w", kerr.UnknownServerError, p.topic, p.index, err)
	}
	return res.BaseOffset, nil
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
	hs, n, err := validateBatches(records, t.conf.maxMessageBytes)
	if err != nil {
		return -1, err
	}
	return b.appendTo(ctx, p, records, hs, n, acks == -1, nil)
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
