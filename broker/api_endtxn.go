package broker

// EndTxn v0-5.
//
// Behaviour:
//   - Commits or aborts the transactional id's ongoing transaction. The
//     decision (PrepareCommit or PrepareAbort) is fsynced in the
//     coordinator's log; then a COMMIT or ABORT control batch is written
//     through the acceptor of every partition holding records of the
//     transaction and fsynced; on commit the staged group offsets are
//     written to the group and fsynced; then the transaction is marked
//     complete. The reply comes after all of it.
//   - A retry of a finished EndTxn with the same decision succeeds; the
//     other decision, or EndTxn with no transaction, gets
//     INVALID_TXN_STATE. If markers could not be written (a failed
//     partition), the decision stands: the reply is
//     CONCURRENT_TRANSACTIONS and the coordinator's sweep retries.
//   - Producer errors as AddPartitionsToTxn (PRODUCER_FENCED from v2).
//   - v4 is v3 (it allows TRANSACTION_ABORTABLE, which Sluice does not
//     return). v5 (KIP-890 transaction version 2): the decision bumps the
//     producer epoch, the markers carry the new epoch, and the reply
//     returns the producer id and epoch for the next transaction (a new
//     id at epoch 0 when the epoch is exhausted). An abort with no
//     transaction ongoing succeeds and bumps the epoch. A retry with the
//     previous id and epoch gets the same answer.
//   - Authorization: WRITE on the transactional id (else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.EndTxn.Int16(), 0, 5, handleEndTxn) }

func handleEndTxn(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !r.allowed(opWrite, resTxnID, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	tc, err := r.b.txnCoordinator()
	if err != nil {
		resp.ErrorCode = codeOf(err)
		return resp, nil
	}
	if req.Version >= 5 {
		pid, epoch, code := tc.EndTxnV2(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, pid, epoch
		return resp, nil
	}
	resp.ErrorCode = fencedCode(tc.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit), req.Version, 2)
	return resp, nil
}
