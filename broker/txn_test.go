package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/meta"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/txn"
	"github.com/sluicedb/sluice/internal/vfs"
)

func txnCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard, generous for loaded machines
	t.Cleanup(cancel)
	return ctx
}

// produceTxn produces values to topic in one transaction of cl and ends
// it with commit.
func produceTxn(t *testing.T, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	ctx := txnCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end (commit=%v): %v", commit, err)
	}
}

// readUntil consumes topic from the start with the isolation level and
// returns the values read before (and including) the value last.
func readUntil(t *testing.T, tb *testBroker, topic string, committed bool, last string) []string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := tb.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	ctx := txnCtx(t)
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %v before %q: %v", got, last, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			got = append(got, string(r.Value))
			if string(r.Value) == last {
				return got
			}
		}
	}
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// TestTxnCommitAbortIsolation: committed transactions are visible to
// read_committed consumers, aborted ones only to read_uncommitted ones,
// and control batches to neither, before and after a restart.
func TestTxnCommitAbortIsolation(t *testing.T) {
	tb := startTest(t)
	const topic = "txn-iso"
	cl := tb.client(kgo.TransactionalID("tx-iso"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	produceTxn(t, cl, topic, true, "c1", "c2", "c3")
	produceTxn(t, cl, topic, false, "a1", "a2")
	produceTxn(t, cl, topic, true, "c4")
	produceTxn(t, cl, topic, false, "a3")
	produceTxn(t, cl, topic, true, "end")
	wantCommitted := []string{"c1", "c2", "c3", "c4", "end"}
	wantAll := []string{"c1", "c2", "c3", "a1", "a2", "c4", "a3", "end"}
	check := func(when string) {
		if got := readUntil(t, tb, topic, true, "end"); !equal(got, wantCommitted) {
			t.Fatalf("%s: read_committed got %v, want %v", when, got, wantCommitted)
		}
		if got := readUntil(t, tb, topic, false, "end"); !equal(got, wantAll) {
			t.Fatalf("%s: read_uncommitted got %v, want %v", when, got, wantAll)
		}
	}
	check("running")
	// 8 records and 5 markers.
	if hw := tb.b.partition(topic, 0).HighWatermark(); hw != 13 {
		t.Fatalf("high watermark %d, want 13 (8 records, 5 markers)", hw)
	}
	cl.Close()
	tb.restart()
	check("after restart")
}

// TestTxnOpenTransactionHoldsLSO: records of an open transaction are
// invisible to read_committed (ListOffsets and Fetch stop at the LSO)
// until it commits.
func TestTxnOpenTransactionHoldsLSO(t *testing.T) {
	tb := startTest(t)
	const topic = "txn-lso"
	plain := tb.client(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	ctx := txnCtx(t)
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("p0")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl := tb.client(kgo.TransactionalID("tx-lso"), kgo.DefaultProduceTopic(topic))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("t1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("p1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	latest := func(iso int8) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = iso
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, plain)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].Offset
	}
	if got, hw := latest(1), latest(0); got != 1 || hw != 3 {
		t.Fatalf("latest read_committed %d, read_uncommitted %d; want 1 and 3", got, hw)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got, want := readUntil(t, tb, topic, true, "end"), []string{"p0", "t1", "p1", "end"}; !equal(got, want) {
		t.Fatalf("read_committed got %v, want %v", got, want)
	}
	if got, hw := latest(1), latest(0); got != 5 || hw != 5 {
		t.Fatalf("after commit: latest read_committed %d, read_uncommitted %d; want 5 and 5", got, hw)
	}
}

// TestTxnZombieFenced: a second producer with the same transactional id
// aborts the first one's open transaction and fences it.
func TestTxnZombieFenced(t *testing.T) {
	tb := startTest(t)
	const topic = "txn-zombie"
	ctx := txnCtx(t)
	zombie := tb.client(kgo.TransactionalID("tx-z"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := tb.client(kgo.TransactionalID("tx-z"), kgo.DefaultProduceTopic(topic))
	produceTxn(t, fresh, topic, true, "fresh-1")

	// The zombie's next write and its commit fail as fenced.
	err := zombie.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-2")}).FirstErr()
	if err == nil {
		err = zombie.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("zombie not fenced: %v", err)
	}
	produceTxn(t, fresh, topic, true, "end")
	if got, want := readUntil(t, tb, topic, true, "end"), []string{"fresh-1", "end"}; !equal(got, want) {
		t.Fatalf("read_committed got %v, want %v", got, want)
	}
}

// TestTxnTimeoutAborts: a transaction left open past its timeout is
// aborted by the sweep, its producer fenced.
func TestTxnTimeoutAborts(t *testing.T) {
	tb := startTest(t, TransactionSweepInterval(20*time.Millisecond))
	const topic = "txn-timeout"
	ctx := txnCtx(t)
	cl := tb.client(kgo.TransactionalID("tx-t"), kgo.TransactionTimeout(200*time.Millisecond),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Wait for the abort marker: the LSO reaches the high watermark.
	p := tb.b.partition(topic, 0)
	w := partition.NewWaiter()
	w.Watch(p)
	defer w.Stop()
	for {
		hw := p.HighWatermark()
		if hw == 2 && p.LastStableOffsetAt(hw) == 2 {
			break
		}
		select {
		case <-w.C():
		case <-ctx.Done():
			t.Fatalf("transaction not aborted: hw %d lso %d", hw, p.LastStableOffsetAt(hw))
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("commit after the timeout abort succeeded")
	}
	other := tb.client(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err := other.ProduceSync(ctx, &kgo.Record{Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got, want := readUntil(t, tb, topic, true, "end"), []string{"end"}; !equal(got, want) {
		t.Fatalf("read_committed got %v, want %v", got, want)
	}
}

// TestTxnAdminAPIs: DescribeTransactions, ListTransactions and
// DescribeProducers show an open transaction; WriteTxnMarkers aborts it
// on its partition (a hanging transaction ended by an admin).
func TestTxnAdminAPIs(t *testing.T) {
	tb := startTest(t)
	const topic = "txn-admin"
	ctx := txnCtx(t)
	cl := tb.client(kgo.TransactionalID("tx-admin"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// The record's own timestamp (CreateTime), far from the broker's
	// clock: DescribeProducers' LastTimestamp is the batch's max
	// timestamp, as Kafka's.
	const recTs = 1700000000123
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hanging"), Timestamp: time.UnixMilli(recTs)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(tb.client())
	desc, err := adm.DescribeTransactions(ctx, "tx-admin", "nope")
	if err != nil {
		t.Fatal(err)
	}
	d := desc["tx-admin"]
	if d.Err != nil || d.State != "Ongoing" || d.StartTimestamp <= 0 || len(d.Topics[topic]) != 1 {
		t.Fatalf("DescribeTransactions: %+v", d)
	}
	if !errors.Is(desc["nope"].Err, kerr.TransactionalIDNotFound) {
		t.Fatalf("unknown id: %+v", desc["nope"])
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed["tx-admin"]; !ok || l.ProducerID != d.ProducerID || l.State != "Ongoing" {
		t.Fatalf("ListTransactions: %+v", listed)
	}
	if listed, _ := adm.ListTransactions(ctx, nil, []string{"CompleteCommit"}); len(listed) != 0 {
		t.Fatalf("ListTransactions CompleteCommit: %+v", listed)
	}
	prods, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var found *kadm.DescribedProducer
	prods.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID == d.ProducerID {
			found = &p
		}
	})
	if found == nil || found.CurrentTxnStartOffset != 0 || found.LastSequence != 0 || found.CoordinatorEpoch != -1 || found.LastTimestamp != recTs {
		t.Fatalf("DescribeProducers: %+v; want start offset 0, last sequence 0, coordinator epoch -1, last timestamp %d (the batch's)", found, recTs)
	}
	res, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch, Commit: false, CoordinatorEpoch: 3, Topics: kadm.TopicsSet{topic: {0: {}}}})
	if err != nil {
		t.Fatal(err)
	}
	res.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
		if p.Err != nil {
			t.Fatalf("WriteTxnMarkers %s/%d: %v", p.Topic, p.Partition, p.Err)
		}
	})
	p := tb.b.partition(topic, 0)
	if hw := p.HighWatermark(); hw != 2 || p.LastStableOffsetAt(hw) != 2 {
		t.Fatalf("after the admin abort: hw %d lso %d, want 2 and 2", hw, p.LastStableOffsetAt(hw))
	}
	// DescribeProducers reports the coordinator epoch of the last marker:
	// the admin's 3, later the broker's coordinator's 0; its last
	// timestamp is the marker's (the broker's clock, past the record's).
	var markerTs int64
	coordEpochs := func() []int32 {
		prods, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		prods.EachProducer(func(p kadm.DescribedProducer) {
			if p.ProducerID == d.ProducerID {
				out = append(out, p.CoordinatorEpoch)
				markerTs = p.LastTimestamp
			}
		})
		return out
	}
	if got := coordEpochs(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("coordinator epochs after the admin's marker: %v, want [3]", got)
	}
	if markerTs <= recTs {
		t.Fatalf("last timestamp after the admin's marker: %d, want the marker's, past the record's %d", markerTs, recTs)
	}
	// The client's commit changes nothing on the partition: the record
	// stays aborted.
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, cl, topic, true, "end")
	if got, want := readUntil(t, tb, topic, true, "end"), []string{"end"}; !equal(got, want) {
		t.Fatalf("read_committed got %v, want %v", got, want)
	}
	if got := coordEpochs(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("coordinator epochs after the coordinator's commit: %v, want [0]", got)
	}
}

// TestInternalTopics: __consumer_offsets is listed as internal,
// __transaction_state (which does not exist) not at all; both are skipped
// by regex subscriptions and refuse produce and creation.
func TestInternalTopics(t *testing.T) {
	tb := startTest(t)
	ctx := txnCtx(t)
	cl := tb.client()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	internal := map[string]bool{}
	for _, mt := range resp.Topics {
		if mt.IsInternal {
			internal[*mt.Topic] = true
		}
	}
	if !internal["__consumer_offsets"] || len(internal) != 1 {
		t.Fatalf("internal topics listed: %v", internal)
	}
	for _, mt := range resp.Topics {
		if *mt.Topic == "__transaction_state" {
			t.Fatal("__transaction_state listed")
		}
	}
	named := kmsg.NewPtrMetadataRequest()
	ts := "__transaction_state"
	named.Topics = []kmsg.MetadataRequestTopic{{Topic: &ts}}
	named.AllowAutoTopicCreation = true
	if nr, err := named.RequestWith(ctx, cl); err != nil || nr.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("__transaction_state by name: %+v, %v", nr, err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to __consumer_offsets: %v", err)
	}
	if err := tb.b.CreateTopic(ctx, "__transaction_state", 1, nil); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("create __transaction_state: %v", err)
	}
	// A regex subscription skips internal topics.
	plain := tb.client(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("regex-visible"))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := tb.client(kgo.ConsumeRegex(), kgo.ConsumeTopics(".*"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	for _, r := range fs.Records() {
		if r.Topic != "regex-visible" {
			t.Fatalf("regex consumer read %s", r.Topic)
		}
	}
	if len(fs.Records()) != 1 {
		t.Fatalf("regex consumer read %d records, want 1 (errors %v)", len(fs.Records()), fs.Errors())
	}
}

// TestProducerSnapshot: a clean restart loads the producer state and the
// transaction index from the snapshot, equal to what a scan of the log
// rebuilds; an open transaction stays open across it; a snapshot that
// does not match the log is ignored.
func TestProducerSnapshot(t *testing.T) {
	tb := startTest(t)
	const topic = "txn-snap"
	ctx := txnCtx(t)
	cl := tb.client(kgo.TransactionalID("tx-snap"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	produceTxn(t, cl, topic, true, "c1", "c2")
	produceTxn(t, cl, topic, false, "a1")
	plain := tb.client(kgo.DefaultProduceTopic(topic))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("p1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		return tb.b.partition(topic, 0).DescribeState()
	}
	before := state()
	tb.restart()
	if !fromSnap(tb.b.partition(topic, 0)) {
		t.Fatal("clean restart did not use the producer snapshot")
	}
	loaded := state()
	if loaded != before {
		t.Fatalf("state from the snapshot %s, before the restart %s", loaded, before)
	}
	// A snapshot whose offsets do not match the log is ignored.
	tb.stop()
	dir := meta.Layout{Root: tb.dir}.PartitionDir(topic, 0)
	moveSnapshotsPastEnd(t, vfs.OS(), dir)
	tb.start()
	if fromSnap(tb.b.partition(topic, 0)) {
		t.Fatal("a snapshot that does not match the log was used")
	}
	if scanned := state(); scanned != before {
		t.Fatalf("state from a scan %s, before %s", scanned, before)
	}
	// The transaction left open is still open: the same client
	// reconnects and commits it.
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, cl, topic, true, "end")
	if got, want := readUntil(t, tb, topic, true, "end"), []string{"c1", "c2", "p1", "open", "end"}; !equal(got, want) {
		t.Fatalf("read_committed got %v, want %v", got, want)
	}
}

// TestTxnCommittedSince: the transaction coordinator's recovery asks a
// partition whether it holds a COMMIT marker of a producer at or past an
// offset; ABORT markers and markers before the offset do not count, nor
// does anything while the producer has a transaction open there.
func TestTxnCommittedSince(t *testing.T) {
	tb := startTest(t)
	const topic = "txn-since"
	cl := tb.client(kgo.TransactionalID("tx-since"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	produceTxn(t, cl, topic, true, "c1")
	tc, err := tb.b.txnCoordinator()
	if err != nil {
		t.Fatal(err)
	}
	pid := tc.Describe([]string{"tx-since"})[0].PID
	tp := txn.TopicPartition{Topic: topic, Partition: 0}
	p := tb.b.partition(topic, 0)
	ask := func(from int64) bool {
		t.Helper()
		_, found, err := tb.b.committedSince(pid, tp, from)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	end := p.Log().NextOffset() // past c1 and its COMMIT marker
	if !ask(0) || !ask(end-1) {
		t.Fatalf("COMMIT marker at %d not found", end-1)
	}
	if ask(end) {
		t.Fatalf("a COMMIT marker found at or past %d, the log's end", end)
	}
	if _, found, err := tb.b.committedSince(pid+1, tp, 0); err != nil || found {
		t.Fatalf("another producer's marker counted: %v %v", found, err)
	}
	ctx := txnCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if ask(0) {
		t.Fatal("a marker counted while the producer's transaction is open on the partition")
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if ask(end) {
		t.Fatal("an ABORT marker counted as a COMMIT")
	}
	if !ask(0) {
		t.Fatal("the first transaction's COMMIT marker no longer found")
	}
}
