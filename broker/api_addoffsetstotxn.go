package broker

// AddOffsetsToTxn v0-4.
//
// Behaviour:
//   - Adds a consumer group to the transactional id's ongoing transaction
//     (starting one), fsynced before the reply; the group's offsets are
//     then staged with TxnOffsetCommit and written to the group only if
//     the transaction commits.
//   - Errors as AddPartitionsToTxn; an empty group id gets INVALID_GROUP_ID.
//   - v4 is v3 (it allows TRANSACTION_ABORTABLE, which Sluice does not
//     return); a transaction version 2 client skips this request
//     (TxnOffsetCommit v5 adds the group).
//   - Authorization: WRITE on the transactional id (else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else
//     GROUP_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.AddOffsetsToTxn.Int16(), 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !r.allowed(opWrite, resTxnID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case !r.allowed(opRead, resGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	tc, err := r.b.txnCoordinator()
	if err != nil {
		resp.ErrorCode = codeOf(err)
		return resp, nil
	}
	resp.ErrorCode = fencedCode(tc.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group), req.Version, 2)
	return resp, nil
}
