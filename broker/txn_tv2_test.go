package broker

import (
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicedb/sluice/internal/txn"
)

// TestTxnVersion2: the broker finalizes transaction.version 2, so a
// franz-go transactional producer uses Produce v12 (implicit partition
// adds) and EndTxn v5 (one epoch per transaction); a client held to
// older request versions keeps the classic protocol and one epoch. Both
// give read_committed consumers the committed records only.
func TestTxnVersion2(t *testing.T) {
	tb := startTest(t)
	ctx := txnCtx(t)
	plain := tb.client()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "sluice-test", "1"
	resp, err := req.RequestWith(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	level := int16(-1)
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			level = f.MaxVersionLevel
		}
	}
	if resp.FinalizedFeaturesEpoch < 0 || level != 2 {
		t.Fatalf("finalized features epoch %d, transaction.version %d; want 2", resp.FinalizedFeaturesEpoch, level)
	}

	for _, tc := range []struct {
		name  string
		opts  []kgo.Opt
		bumps bool
	}{
		{"tv2", nil, true},
		{"classic", []kgo.Opt{kgo.MaxVersions(kversion.V3_7_0())}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic, id := "tv-"+tc.name, "tx-"+tc.name
			cl := tb.client(append(tc.opts, kgo.TransactionalID(id), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))...)
			defer cl.Close()
			// franz-go learns the feature on its first connection: its
			// first transaction may run classic, then it re-initializes.
			produceTxn(t, cl, topic, true, "c1")
			produceTxn(t, cl, topic, false, "a1")
			coord, err := tb.b.txnCoordinator()
			if err != nil {
				t.Fatal(err)
			}
			e0 := coord.Describe([]string{id})[0].Epoch
			// An open transaction: its partition lists it, with the
			// epoch of its batches (what recovery adopts).
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("c2")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			st := coord.Describe([]string{id})[0]
			open := tb.b.partition(topic, 0).OpenTransactions()
			if len(open) != 1 || open[0].PID != st.PID || open[0].Epoch != st.Epoch || open[0].TP != (txn.TopicPartition{Topic: topic}) {
				t.Fatalf("open transactions %+v, want producer %d epoch %d", open, st.PID, st.Epoch)
			}
			if st.State != txn.Ongoing || len(st.Partitions) != 1 || st.Since[0] != open[0].First {
				t.Fatalf("coordinator state %+v, partition's open transaction %+v", st, open[0])
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			produceTxn(t, cl, topic, true, "end")
			want := e0
			if tc.bumps {
				want = e0 + 2
			}
			if got := coord.Describe([]string{id})[0].Epoch; got != want {
				t.Fatalf("epoch after two more transactions %d, want %d", got, want)
			}
			if got := readUntil(t, tb, topic, true, "end"); !equal(got, []string{"c1", "c2", "end"}) {
				t.Fatalf("read_committed got %v", got)
			}
			if got := readUntil(t, tb, topic, false, "end"); !equal(got, []string{"c1", "a1", "c2", "end"}) {
				t.Fatalf("read_uncommitted got %v", got)
			}
		})
	}
}

// TestTxnMarkerSkipsNewerEpoch: a marker for a transaction whose batches
// carry epoch E is not written over a partition's open transaction of
// the same producer at a later epoch (what recovery meets when it
// finishes a decided transaction whose producer had already started the
// next one, KIP-890); a marker for that epoch closes it.
func TestTxnMarkerSkipsNewerEpoch(t *testing.T) {
	tb := startTest(t)
	ctx := txnCtx(t)
	const topic, id = "tv-skip", "tx-skip"
	cl := tb.client(kgo.TransactionalID(id), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	produceTxn(t, cl, topic, true, "c1")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := tb.b.partition(topic, 0)
	open := p.OpenTransactions()
	if len(open) != 1 {
		t.Fatalf("open transactions %+v", open)
	}
	o := open[0]
	parts := []txn.TopicPartition{o.TP}
	end := p.Log().NextOffset()
	if err := tb.b.writeMarkers(o.PID, o.Epoch, false, parts, o.Epoch-1); err != nil {
		t.Fatal(err)
	}
	if p.Log().NextOffset() != end || len(p.OpenTransactions()) != 1 {
		t.Fatal("an older transaction's marker closed the open transaction of a newer epoch")
	}
	if err := tb.b.writeMarkers(o.PID, o.Epoch+1, false, parts, o.Epoch); err != nil {
		t.Fatal(err)
	}
	if p.Log().NextOffset() != end+1 || len(p.OpenTransactions()) != 0 {
		t.Fatalf("the transaction's own marker did not close it (end %d -> %d)", end, p.Log().NextOffset())
	}
}

// TestAddPartitionsToTxnV4: the batched form (v4+) adds partitions per
// transaction, and VerifyOnly reports whether they are in the ongoing
// transaction without adding them.
func TestAddPartitionsToTxnV4(t *testing.T) {
	tb := startTest(t)
	ctx := txnCtx(t)
	const topic, id = "tv-v4", "tx-v4"
	raw := dialRaw(t, tb.b.Addr())
	if _, err := tb.admin().CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	coord, err := tb.b.txnCoordinator()
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, code := coord.InitProducerID(id, 60000, -1, -1)
	if code != 0 {
		t.Fatal(code)
	}
	send := func(verify bool, parts ...int32) []int16 {
		t.Helper()
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 4
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, verify
		rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		rt.Topic, rt.Partitions = topic, parts
		tx.Topics = append(tx.Topics, rt)
		req.Transactions = append(req.Transactions, tx)
		resp := raw.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
		if resp.ErrorCode != 0 || len(resp.Transactions) != 1 || resp.Transactions[0].TransactionalID != id {
			t.Fatalf("response v%d: %+v", resp.Version, resp)
		}
		var codes []int16
		for _, rt := range resp.Transactions[0].Topics {
			for _, p := range rt.Partitions {
				codes = append(codes, p.ErrorCode)
			}
		}
		return codes
	}
	if codes := send(true, 0); len(codes) != 1 || codes[0] != kerr.InvalidTxnState.Code {
		t.Fatalf("verify before any add: %v", codes)
	}
	if codes := send(false, 0); len(codes) != 1 || codes[0] != 0 {
		t.Fatalf("add: %v", codes)
	}
	if codes := send(true, 0, 1); len(codes) != 2 || codes[0] != 0 || codes[1] != kerr.InvalidTxnState.Code {
		t.Fatalf("verify after adding partition 0: %v", codes)
	}
	if st := coord.Describe([]string{id})[0]; len(st.Partitions) != 1 {
		t.Fatalf("verify added partitions: %+v", st.Partitions)
	}
}

// TestLoneMarkerSyncedOnReadLoop: the COMMIT marker of a transaction
// over one partition, whose EndTxn waits for it at once, is written and
// made durable on the connection's read loop, which leads the WAL round
// (partition.EnqueueMarkerInline) instead of handing it to the WAL's
// flusher, when the partition's goroutine and the WAL are idle; the
// markers of a transaction over two partitions are queued together as
// before. Transactional batches never are (their check takes the
// coordinator's locks), so the inline-synced count is the markers'.
func TestLoneMarkerSyncedOnReadLoop(t *testing.T) {
	tb := startTest(t)
	const topic = "lone-marker"
	if err := tb.b.CreateTopic(t.Context(), topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	synced := func() int {
		t.Helper()
		var d dto.Metric
		if err := tb.b.accM.InlineSynced.Write(&d); err != nil {
			t.Fatal(err)
		}
		return int(d.GetCounter().GetValue())
	}
	cl := tb.client(kgo.TransactionalID("lone-marker"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx := txnCtx(t)
	txnOver := func(i int, parts ...int32) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "v%d-%d", i, p)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	txnOver(-1, 0, 1) // the producer's id, the coordinator's log, both partitions' first writes
	const n = 30
	before := synced()
	for i := range n {
		txnOver(i, 0)
	}
	// A marker finding the partition's goroutine busy (kicked for its
	// idle work after a round) or a round running is queued as before.
	lone := synced() - before
	if lone < n/2 || lone > n {
		t.Fatalf("%d of %d lone markers written and synced on the read loop", lone, n)
	}
	before = synced()
	for i := range 10 {
		txnOver(n+i, 0, 1)
	}
	if got := synced() - before; got != 0 {
		t.Fatalf("%d markers of two-partition transactions synced on the read loop", got)
	}
	last := fmt.Sprintf("v%d-0", n-1)
	got := readUntil(t, tb, topic, true, last)
	if len(got) < n {
		t.Fatalf("read_committed got %d records up to %s", len(got), last)
	}
}
