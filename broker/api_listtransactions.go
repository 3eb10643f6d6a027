package broker

// ListTransactions v0-2.
//
// Behaviour:
//   - Lists every transactional id with its producer id and state,
//     filtered as Kafka's transaction coordinator filters: by
//     StateFilters (state names; an unknown name is listed in
//     UnknownStateFilters and matches nothing), ProducerIDFilters,
//     (v1+) DurationFilterMillis, and (v2+) TransactionalIDPattern.
//   - DurationFilterMillis >= 0 leaves out the ids whose last
//     transaction started at most that long ago; an id without one
//     (start time -1, Empty since InitProducerId) and completed
//     transactions, which keep their start time, are judged like any
//     other, so a filter of 0 lists every id, as with Kafka.
//   - TransactionalIDPattern, when not null or empty, must match the
//     whole transactional id (RE2 syntax); an invalid pattern gets
//     INVALID_REGULAR_EXPRESSION.
//   - Authorization: only transactional ids the principal may DESCRIBE
//     are listed.

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/txn"
)

func init() { register(kmsg.ListTransactions.Int16(), 0, 2, handleListTransactions) }

func handleListTransactions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	tc, err := r.b.txnCoordinator()
	if err != nil {
		resp.ErrorCode = codeOf(err)
		return resp, nil
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile(`^(?:` + *req.TransactionalIDPattern + `)$`)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp, nil
		}
		pattern = re
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
		if req.Version >= 1 && req.DurationFilterMillis >= 0 && now-t.StartMs <= req.DurationFilterMillis {
			continue
		}
		if pattern != nil && !pattern.MatchString(t.ID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = t.ID, t.PID, t.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
