package broker

// AddPartitionsToTxn v0-3.
//
// Behaviour:
//   - Adds partitions to the transactional id's ongoing transaction
//     (starting one), fsynced in the coordinator's log before the reply;
//     a producer may write a partition in a transaction only after this.
//   - Errors for the whole request: INVALID_PRODUCER_ID_MAPPING (unknown
//     transactional id or another producer id), PRODUCER_FENCED
//     (INVALID_PRODUCER_EPOCH before v2) for an older epoch,
//     CONCURRENT_TRANSACTIONS while the previous transaction's markers are
//     still being written. A partition that does not exist gets
//     UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED.
//   - v4+ (KIP-890, brokers verifying partitions) is not served.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"sluice/internal/txn"
)

func init() { register(kmsg.AddPartitionsToTxn.Int16(), 0, 3, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var parts []txn.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	var codes []int16
	if tc, err := r.b.txnCoordinator(); err != nil {
		codes = make([]int16, len(parts))
		for i := range codes {
			codes[i] = codeOf(err)
		}
	} else {
		codes = tc.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts)
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, fencedCode(codes[i], req.Version, 2)
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
