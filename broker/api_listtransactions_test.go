package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListTransactionsFilters: completed transactions are listed with
// their start time kept, DurationFilterMillis 0 lists them (as Kafka's
// coordinator does), a long duration leaves them out, and v2's
// TransactionalIDPattern must match the whole id.
func TestListTransactionsFilters(t *testing.T) {
	tb := startTest(t)
	ctx := t.Context()
	if err := tb.b.CreateTopic(ctx, "tx-topic", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl := tb.client(kgo.TransactionalID("orders-tx"), kgo.DefaultProduceTopic("tx-topic"))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	admin := tb.client()
	list := func(version int16, duration int64, pattern *string) (*kmsg.ListTransactionsResponse, []string) {
		t.Helper()
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version, req.DurationFilterMillis, req.TransactionalIDPattern = version, duration, pattern
		resp := dialRaw(t, tb.addr).roundTrip(req).(*kmsg.ListTransactionsResponse)
		var ids []string
		for _, s := range resp.TransactionStates {
			ids = append(ids, s.TransactionalID+"="+s.TransactionState)
		}
		return resp, ids
	}
	if _, ids := list(1, 0, nil); len(ids) != 1 || ids[0] != "orders-tx=CompleteCommit" {
		t.Fatalf("duration 0: %v", ids)
	}
	if _, ids := list(1, 3_600_000, nil); len(ids) != 0 {
		t.Fatalf("duration 1h: %v", ids)
	}
	for pat, want := range map[string]int{"orders-.*": 1, "orders": 0, ".*-tx": 1, "": 1} {
		p := pat
		if _, ids := list(2, -1, &p); len(ids) != want {
			t.Errorf("pattern %q: %v, want %d", pat, ids, want)
		}
	}
	bad := "("
	if resp, _ := list(2, -1, &bad); resp.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("pattern %q: %v", bad, kerr.ErrorForCode(resp.ErrorCode))
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"orders-tx"}
	resp, err := dt.RequestWith(ctx, admin)
	if err != nil || len(resp.TransactionStates) != 1 || resp.TransactionStates[0].StartTimestamp <= 0 || resp.TransactionStates[0].State != "CompleteCommit" {
		t.Fatalf("DescribeTransactions: %+v, %v", resp, err)
	}
}
