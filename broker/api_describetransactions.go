package broker

// DescribeTransactions v0.
//
// Behaviour:
//   - For each transactional id: its state (Kafka's names: Empty,
//     Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
//     CompleteAbort), timeout, start time of the ongoing transaction (-1
//     when none), producer id and epoch, and the partitions added to the
//     ongoing transaction. An unknown id gets TRANSACTIONAL_ID_NOT_FOUND.
//   - Authorization: DESCRIBE on each transactional id (else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED); partitions of topics the
//     principal may not DESCRIBE are left out.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeTransactions.Int16(), 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	tc, err := r.b.txnCoordinator()
	for i, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		switch {
		case !r.allowed(opDescribe, resTxnID, id):
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		case err != nil:
			st.ErrorCode = codeOf(err)
		default:
			t := tc.Describe(req.TransactionalIDs[i : i+1])[0]
			if t == nil {
				st.ErrorCode = kerr.TransactionalIDNotFound.Code
				break
			}
			st.State, st.TimeoutMillis, st.StartTimestamp = t.State.String(), t.TimeoutMs, t.StartMs
			st.ProducerID, st.ProducerEpoch = t.PID, t.Epoch
			for _, tp := range t.Partitions {
				if !r.allowed(opDescribe, resTopic, tp.Topic) {
					continue // topics the principal may not describe are left out
				}
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
					rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					rt.Topic = tp.Topic
					st.Topics = append(st.Topics, rt)
				}
				rt := &st.Topics[len(st.Topics)-1]
				rt.Partitions = append(rt.Partitions, tp.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
