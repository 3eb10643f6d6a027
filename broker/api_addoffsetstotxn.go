package broker

// AddOffsetsToTxn v0-3.
//
// Behaviour:
//   - Adds a consumer group to the transactional id's ongoing transaction
//     (starting one), fsynced before the reply; the group's offsets are
//     then staged with TxnOffsetCommit and written to the group only if
//     the transaction commits.
//   - Errors as AddPartitionsToTxn; an empty group id gets INVALID_GROUP_ID.
//   - v4+ (KIP-890) is not served.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AddOffsetsToTxn.Int16(), 0, 3, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	tc, err := r.b.txnCoordinator()
	if err != nil {
		resp.ErrorCode = codeOf(err)
		return resp, nil
	}
	resp.ErrorCode = fencedCode(tc.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group), req.Version, 2)
	return resp, nil
}
