package broker

// InitProducerID v0-4.
//
// Behaviour:
//   - Hands out a new producer id with epoch 0 for idempotent producers.
//     Ids are never reused: blocks of ids are reserved in cluster.json
//     (fsynced) before any id of the block is handed out.
//   - v3+ with a producer id and epoch (KIP-360, a producer bumping its
//     epoch after an error): the same id with epoch+1, or a new id when
//     the epoch would overflow.
//   - An idempotent producer needs IDEMPOTENT_WRITE on the cluster or
//     WRITE on some topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
//   - Transactions are not supported: a transactional id gets
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED (the code Kafka gives a
//     producer that may not use transactions).

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.InitProducerID.Int16(), 0, 4, handleInitProducerID) }

func handleInitProducerID(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID == nil && !r.allowedCluster(opIdempotentWrite) && !r.mayWriteAnyTopic() {
		// KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil
	}
	if req.TransactionalID != nil {
		// Unauthorized or not, a transactional id gets
		// TRANSACTIONAL_ID_AUTHORIZATION_FAILED while Sluice has no
		// transactions; the check stays for when it does.
		r.allowed(opWrite, resTxnID, *req.TransactionalID)
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
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
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
