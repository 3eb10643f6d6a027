package broker

// InitProducerID v0-5 (v5: as v4, for KIP-890 clients).
//
// Behaviour:
//   - Without a transactional id: a new producer id with epoch 0 for an
//     idempotent producer. Ids are never reused: blocks of ids are
//     reserved in cluster.json (fsynced) before any id of the block is
//     handed out. v3+ with a producer id and epoch (KIP-360, a producer
//     bumping its epoch after an error): the same id with epoch+1, or a
//     new id when the epoch would overflow.
//   - With a transactional id: the transaction coordinator's answer
//     (internal/txn): a new producer id the first time, otherwise the
//     same id with a bumped epoch, which fences every older incarnation;
//     an ongoing transaction of the old incarnation is aborted (markers
//     written and fsynced) first. v3+ with the caller's current id and
//     epoch bumps them (KIP-360); a retry of a bump whose answer was lost
//     gets the same answer; any other id or epoch gets PRODUCER_FENCED
//     (INVALID_PRODUCER_EPOCH before v4). transaction.timeout.ms must be
//     1 ms to the broker's maximum (INVALID_TRANSACTION_TIMEOUT).
//   - Authorization: a transactional id needs WRITE on it (else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
//     IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679),
//     else CLUSTER_AUTHORIZATION_FAILED.

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.InitProducerID.Int16(), 0, 5, handleInitProducerID) }

func handleInitProducerID(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID == nil && !r.allowedCluster(opIdempotentWrite) && !r.mayWriteAnyTopic() {
		// KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if req.TransactionalID != nil {
		if !r.allowed(opWrite, resTxnID, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp, nil
		}
		tc, err := r.b.txnCoordinator()
		if err != nil {
			resp.ErrorCode = codeOf(err)
			return resp, nil
		}
		pid, epoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			pid, epoch = req.ProducerID, req.ProducerEpoch
		}
		id, ep, code := tc.InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, pid, epoch)
		resp.ErrorCode = fencedCode(code, req.Version, 4)
		if code == 0 {
			resp.ProducerID, resp.ProducerEpoch = id, ep
		}
		return resp, nil
	}
	if req.Version >= 3 && req.ProducerID >= 0 && req.ProducerID < r.b.nextPID.Load() && req.ProducerEpoch >= 0 && req.ProducerEpoch < math.MaxInt16 {
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		return resp, nil
	}
	id, err := r.b.allocPID()
	if err != nil {
		r.b.cfg.logger.Error("reserving producer ids failed", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
