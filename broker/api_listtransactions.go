package broker

// ListTransactions v0-1.
//
// Behaviour:
//   - Lists every transactional id with its producer id and state,
//     filtered by StateFilters (state names; an unknown name is listed in
//     UnknownStateFilters and matches nothing), ProducerIDFilters, and
//     (v1) DurationFilterMillis: only transactions ongoing for longer.
//   - v2's TransactionalIDPattern is not served.
//   - Authorization: only transactional ids the principal may DESCRIBE
//     are listed.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/txn"
)

func init() { register(kmsg.ListTransactions.Int16(), 0, 1, handleListTransactions) }

func handleListTransactions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	tc, err := r.b.txnCoordinator()
	if err != nil {
		resp.ErrorCode = codeOf(err)
		return resp, nil
	}
	var states []txn.State
	for _, name := range req.StateFilters {
		s, ok := txn.ParseState(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states = append(states, s)
	}
	if len(req.StateFilters) > 0 && len(states) == 0 {
		return resp, nil // only unknown states: nothing matches
	}
	now := timeNowMs()
	for _, t := range tc.List(states, req.ProducerIDFilters) {
		if !r.allowed(opDescribe, resTxnID, t.ID) {
			continue // only transactional ids the principal may describe
		}
		if req.Version >= 1 && req.DurationFilterMillis >= 0 && (t.StartMs < 0 || now-t.StartMs <= req.DurationFilterMillis) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = t.ID, t.PID, t.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
