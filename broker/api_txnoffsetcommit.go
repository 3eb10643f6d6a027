package broker

// TxnOffsetCommit v0-3.
//
// Behaviour:
//   - Stages offsets of a group in the transaction (after
//     AddOffsetsToTxn for that group; otherwise INVALID_TXN_STATE),
//     fsynced in the coordinator's log before the reply. They become the
//     group's committed offsets when the transaction commits and are
//     dropped when it aborts. OffsetFetch with RequireStable answers
//     UNSTABLE_OFFSET_COMMIT for them meanwhile.
//   - v3 (KIP-447) carries the member id, generation and instance id:
//     they are checked against the group (UNKNOWN_MEMBER_ID,
//     ILLEGAL_GENERATION, FENCED_INSTANCE_ID), so a member that lost its
//     partitions in a rebalance cannot commit. Serving v3 tells clients
//     the broker fences this way, so they skip their pre-KIP-447 wait.
//   - Producer errors as AddPartitionsToTxn; a partition that does not
//     exist gets UNKNOWN_TOPIC_OR_PARTITION.
//   - v4+ (KIP-890) is not served.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"sluice/internal/txn"
)

func init() { register(kmsg.TxnOffsetCommit.Int16(), 0, 3, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var offs []txn.Offset
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			o := txn.Offset{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset, LeaderEpoch: -1}
			if req.Version >= 2 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			offs = append(offs, o)
		}
	}
	gen, member := int32(-1), ""
	var instance *string
	if req.Version >= 3 {
		gen, member, instance = req.Generation, req.MemberID, req.InstanceID
	}
	var codes []int16
	if tc, err := r.b.txnCoordinator(); err != nil {
		codes = make([]int16, len(offs))
		for i := range codes {
			codes[i] = codeOf(err)
		}
	} else {
		codes = tc.CommitOffsets(req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, gen, member, instance, offs)
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, fencedCode(codes[i], req.Version, 3)
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
