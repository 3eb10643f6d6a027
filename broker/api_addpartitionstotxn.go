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
//   - Authorization: WRITE on the transactional id (else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition) and on
//     every topic; a refused topic gets TOPIC_AUTHORIZATION_FAILED and
//     the others OPERATION_NOT_ATTEMPTED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
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
	// Authorization: WRITE on the transactional id, and on every topic;
	// when a topic is refused, the others are not attempted (Kafka).
	denied := map[string]bool{}
	for _, t := range req.Topics {
		if !r.allowed(opWrite, resTopic, t.Topic) {
			denied[t.Topic] = true
		}
	}
	if !r.allowed(opWrite, resTxnID, req.TransactionalID) || len(denied) > 0 {
		codes = make([]int16, 0, len(parts))
		for _, p := range parts {
			switch {
			case !r.allowed(opWrite, resTxnID, req.TransactionalID):
				codes = append(codes, kerr.TransactionalIDAuthorizationFailed.Code)
			case denied[p.Topic]:
				codes = append(codes, kerr.TopicAuthorizationFailed.Code)
			default:
				codes = append(codes, kerr.OperationNotAttempted.Code)
			}
		}
	} else if tc, err := r.b.txnCoordinator(); err != nil {
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
