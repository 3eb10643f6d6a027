package broker

// TxnOffsetCommit v0-5.
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
//   - v4 is v3. v5 (KIP-890 transaction version 2) adds the group to the
//     transaction itself (starting one if none is ongoing), in the same
//     record as the offsets, so the client skips AddOffsetsToTxn.
//     v6 (topic ids) is not served.
//   - Authorization: WRITE on the transactional id, READ on the group
//     (else TRANSACTIONAL_ID_ or GROUP_AUTHORIZATION_FAILED on every
//     partition), READ on each topic (refused topics get
//     TOPIC_AUTHORIZATION_FAILED and are not committed).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/txn"
)

func init() { register(kmsg.TxnOffsetCommit.Int16(), 0, 5, handleTxnOffsetCommit) }

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
	commit := func(tc *txn.Coordinator, offs []txn.Offset) []int16 {
		if req.Version >= 5 { // KIP-890: adds the group to the transaction
			return tc.CommitOffsetsAdding(req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, gen, member, instance, offs)
		}
		return tc.CommitOffsets(req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, gen, member, instance, offs)
	}
	var codes []int16
	// Authorization: WRITE on the transactional id, READ on the group,
	// READ on each topic (refused topics are left out of the commit).
	var refuse int16
	switch {
	case !r.allowed(opWrite, resTxnID, req.TransactionalID):
		refuse = kerr.TransactionalIDAuthorizationFailed.Code
	case !r.allowed(opRead, resGroup, req.Group):
		refuse = kerr.GroupAuthorizationFailed.Code
	}
	var denied map[int]bool // index in offs
	if refuse == 0 {
		for i, o := range offs {
			if !r.allowed(opRead, resTopic, o.Topic) {
				if denied == nil {
					denied = map[int]bool{}
				}
				denied[i] = true
			}
		}
	}
	if refuse != 0 {
		codes = make([]int16, len(offs))
		for i := range codes {
			codes[i] = refuse
		}
	} else if len(denied) > 0 {
		var keep []txn.Offset
		for i, o := range offs {
			if !denied[i] {
				keep = append(keep, o)
			}
		}
		var kept []int16
		if tc, err := r.b.txnCoordinator(); err != nil {
			kept = make([]int16, len(keep))
			for i := range kept {
				kept[i] = codeOf(err)
			}
		} else if len(keep) > 0 {
			kept = commit(tc, keep)
		}
		codes = make([]int16, len(offs))
		for i, j := 0, 0; i < len(offs); i++ {
			if denied[i] {
				codes[i] = kerr.TopicAuthorizationFailed.Code
				continue
			}
			codes[i] = kept[j]
			j++
		}
	} else if tc, err := r.b.txnCoordinator(); err != nil {
		codes = make([]int16, len(offs))
		for i := range codes {
			codes[i] = codeOf(err)
		}
	} else {
		codes = commit(tc, offs)
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
