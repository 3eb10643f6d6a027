package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
