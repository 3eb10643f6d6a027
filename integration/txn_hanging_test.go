package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// lastStable returns partition 0's last stable offset and high watermark
// (ListOffsets latest, read_committed and read_uncommitted).
func lastStable(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) (lso, hw int64) {
	t.Helper()
	at := func(iso int8) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = iso
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("ListOffsets %s: error %d", topic, p.ErrorCode)
		}
		return p.Offset
	}
	return at(1), at(0)
}

// TestHangingTransactionFoundAndAborted: a producer writes transactional
// records and is never ended, and its coordinator state is removed (the
// broker stopped, the transactions directory deleted): the transaction
// hangs, holding the last stable offset, so a transaction committed
// after it is invisible to read_committed consumers. The documented
// commands (docs/admin.md) find it with sluice txn find-hanging and end
// it with sluice txn abort; read_committed consumers then read on.
func TestHangingTransactionFoundAndAborted(t *testing.T) {
	n := startNode(t)
	ctx := ctxT(t, 2*time.Minute)
	const topic = "orders"
	seed := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := seed(kgo.TransactionalID("hangs"), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("never-ended")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close() // no EndTxn

	n.stop()
	if err := os.RemoveAll(filepath.Join(n.dir, "transactions")); err != nil {
		t.Fatal(err)
	}
	n.start()

	after := seed(kgo.TransactionalID("after"), kgo.DefaultProduceTopic(topic))
	defer after.Close()
	if err := after.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := after.ProduceSync(ctx, &kgo.Record{Value: []byte("committed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := after.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	admin := seed()
	defer admin.Close()
	if lso, hw := lastStable(ctx, t, admin, topic); lso != 0 || hw != 3 {
		t.Fatalf("last stable offset %d, high watermark %d: want 0 (held by the hanging transaction) and 3", lso, hw)
	}

	out := runDocCommands(t, n, docBlock(t, "docs/admin.md", "txn-doc-commands"))
	for _, want := range []string{
		"after", "CompleteCommit", // txn list
		"TXN-START-OFFSET",                    // describe-producers
		"aborted the transaction of producer", // abort
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the documented commands' output lacks %q:\n%s", want, out)
		}
	}
	// find-hanging ran twice: the first lists orders/0 at offset 0, the
	// second (after the abort) nothing.
	var found []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[0] == topic && f[1] == "0" && f[4] == "0" {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Errorf("find-hanging listed orders/0 from offset 0 %d times, want once (before the abort):\n%s", len(found), out)
	}

	if lso, hw := lastStable(ctx, t, admin, topic); lso != hw || hw != 4 {
		t.Fatalf("after the abort: last stable offset %d, high watermark %d; want both 4", lso, hw)
	}
	cons := seed(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	defer cons.Close()
	for {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read_committed never read the committed record: %v", err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		for _, r := range fs.Records() {
			if string(r.Value) == "never-ended" {
				t.Fatal("read_committed read the aborted hanging transaction's record")
			}
			if string(r.Value) == "committed" {
				return
			}
		}
	}
}

// TestHangingTransactionBesideLiveOne: one producer id has transactions
// open on two partitions, and the coordinator's live transaction of
// that producer id includes only the first. The coordinator's state is
// rolled back to a copy taken when the transactional id had its producer
// id and no transaction; the producer, restarted, gets the same producer
// id and epoch it wrote orders/1 with, and opens a transaction on
// orders/0. sluice txn find-hanging reports orders/1, which nothing
// will end, and not orders/0, though both are open under the same
// producer id and epoch.
func TestHangingTransactionBesideLiveOne(t *testing.T) {
	n := startNode(t)
	ctx := ctxT(t, 2*time.Minute)
	const topic = "orders"
	createTopic(t, n, topic, 2)
	seed := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	txnClient := func() *kgo.Client {
		return seed(kgo.TransactionalID("t1"), kgo.TransactionTimeout(5*time.Minute), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}

	// The transactional id gets its producer id, at epoch 0, and no
	// transaction; keep a copy of the coordinator's state as it is.
	admin := seed()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr("t1")
	req.TransactionTimeoutMillis = 300000
	resp, err := req.RequestWith(ctx, admin)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("InitProducerID: %v %+v", err, resp)
	}
	pid := resp.ProducerID
	admin.Close()
	n.stop()
	txnDir, saved := filepath.Join(n.dir, "transactions"), t.TempDir()
	if err := os.CopyFS(saved, os.DirFS(txnDir)); err != nil {
		t.Fatal(err)
	}
	n.start()

	// The producer, at epoch 1, writes to orders/1 and never ends its
	// transaction.
	first := txnClient()
	if err := first.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := first.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("never-ended")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	first.Close() // no EndTxn

	// The coordinator's state goes back to the copy: the transaction on
	// orders/1 is forgotten (at epoch 0 the state does not match the
	// records' epoch 1, so recovery does not add the partition back).
	n.stop()
	if err := os.RemoveAll(txnDir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(txnDir, os.DirFS(saved)); err != nil {
		t.Fatal(err)
	}
	n.start()

	// The producer again: the same producer id, at epoch 1 again, with a
	// live transaction on orders/0.
	second := txnClient()
	defer second.Close()
	if err := second.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := second.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("live")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	adm := kadm.NewClient(seed())
	defer adm.Close()
	ds, err := adm.DescribeTransactions(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	d := ds["t1"]
	if d.Err != nil || d.ProducerID != pid || d.State != "Ongoing" || fmt.Sprint(d.Topics.Sorted()) != fmt.Sprint(kadm.TopicsSet{topic: {0: {}}}.Sorted()) {
		t.Fatalf("DescribeTransactions t1 = %+v (topics %v), want producer id %d Ongoing on %s/0 only", d, d.Topics.Sorted(), pid, topic)
	}
	dps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	open := map[int32]int64{}
	dps.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID == pid && p.CurrentTxnStartOffset >= 0 {
			open[p.Partition] = p.CurrentTxnStartOffset
		}
	})
	if len(open) != 2 || open[0] != 0 || open[1] != 0 {
		t.Fatalf("transactions of producer id %d open at %v, want on both partitions from offset 0", pid, open)
	}

	out := runDocCommands(t, n, "go run ./cmd/sluice txn find-hanging --topic "+topic+" --max-transaction-timeout 0s -b 127.0.0.1:9092")
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[0] == topic {
			rows = append(rows, f[0]+"/"+f[1]+" pid "+f[2]+" from "+f[4])
		}
	}
	if want := fmt.Sprintf("%s/1 pid %d from 0", topic, pid); len(rows) != 1 || rows[0] != want {
		t.Errorf("find-hanging listed %q, want only %q:\n%s", rows, want, out)
	}
}
