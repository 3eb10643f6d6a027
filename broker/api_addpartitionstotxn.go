package broker

// AddPartitionsToTxn v0-5.
//
// Behaviour:
//   - Adds partitions to the transactional id's ongoing transaction
//     (starting one), fsynced in the coordinator's log before the reply;
//     a producer using Produce v11 or older may write a partition in a
//     transaction only after this (v12 adds it implicitly, KIP-890).
//   - Errors for the whole request: INVALID_PRODUCER_ID_MAPPING (unknown
//     transactional id or another producer id), PRODUCER_FENCED
//     (INVALID_PRODUCER_EPOCH before v2) for an older epoch,
//     CONCURRENT_TRANSACTIONS while the previous transaction's markers are
//     still being written. A partition that does not exist gets
//     UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED.
//   - v4+ (KIP-890, the form brokers use to verify partitions) carries
//     several transactions, each answered on its own; VerifyOnly reports
//     per partition whether it is in the ongoing transaction (else
//     INVALID_TXN_STATE) without adding it. It needs CLUSTER_ACTION on the
//     cluster (else CLUSTER_AUTHORIZATION_FAILED for the request). v5 is
//     v4 (it allows TRANSACTION_ABORTABLE, which Sluice does not return).
//   - Authorization: WRITE on the transactional id (else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition) and on
//     every topic; a refused topic gets TOPIC_AUTHORIZATION_FAILED and
//     the others OPERATION_NOT_ATTEMPTED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/txn"
)

func init() { register(kmsg.AddPartitionsToTxn.Int16(), 0, 5, handleAddPartitionsToTxn) }

// txnTopicParts is one topic's partitions in an AddPartitionsToTxn.
type txnTopicParts struct {
	topic string
	parts []int32
}

func handleAddPartitionsToTxn(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		topics := make([]txnTopicParts, len(req.Topics))
		for i, t := range req.Topics {
			topics[i] = txnTopicParts{t.Topic, t.Partitions}
		}
		codes := addTxnPartitions(r, req.TransactionalID, req.ProducerID, req.ProducerEpoch, topics, false)
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
	if !r.allowedCluster(opClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, tx := range req.Transactions {
		topics := make([]txnTopicParts, len(tx.Topics))
		for i, t := range tx.Topics {
			topics[i] = txnTopicParts{t.Topic, t.Partitions}
		}
		codes := addTxnPartitions(r, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, topics, tx.VerifyOnly)
		rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rtx.TransactionalID = tx.TransactionalID
		i := 0
		for _, t := range tx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[i]
				i++
				rt.Partitions = append(rt.Partitions, rp)
			}
			rtx.Topics = append(rtx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp, nil
}

// addTxnPartitions adds (or with verify, checks) the partitions of topics
// in transaction id and returns a code per partition, in order.
func addTxnPartitions(r *request, id string, pid int64, epoch int16, topics []txnTopicParts, verify bool) []int16 {
	var parts []txn.TopicPartition
	for _, t := range topics {
		for _, p := range t.parts {
			parts = append(parts, txn.TopicPartition{Topic: t.topic, Partition: p})
		}
	}
	// Authorization: WRITE on the transactional id, and on every topic;
	// when a topic is refused, the others are not attempted (Kafka).
	denied := map[string]bool{}
	for _, t := range topics {
		if !r.allowed(opWrite, resTopic, t.topic) {
			denied[t.topic] = true
		}
	}
	idAllowed := r.allowed(opWrite, resTxnID, id)
	if !idAllowed || len(denied) > 0 {
		codes := make([]int16, 0, len(parts))
		for _, p := range parts {
			switch {
			case !idAllowed:
				codes = append(codes, kerr.TransactionalIDAuthorizationFailed.Code)
			case denied[p.Topic]:
				codes = append(codes, kerr.TopicAuthorizationFailed.Code)
			default:
				codes = append(codes, kerr.OperationNotAttempted.Code)
			}
		}
		return codes
	}
	tc, err := r.b.txnCoordinator()
	if err != nil {
		codes := make([]int16, len(parts))
		for i := range codes {
			codes[i] = codeOf(err)
		}
		return codes
	}
	if verify {
		return tc.VerifyPartitions(id, pid, epoch, parts)
	}
	return tc.AddPartitions(id, pid, epoch, parts)
}
