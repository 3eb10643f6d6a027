package broker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/vfs"
)

// waitStable waits until p's last stable offset reaches its high
// watermark and the watermark is at least hw (woken by each advance).
func waitStable(ctx context.Context, t *testing.T, p *partition.Partition, hw int64) {
	t.Helper()
	w := partition.NewWaiter()
	w.Watch(p)
	defer w.Stop()
	for {
		cur := p.HighWatermark()
		if cur >= hw && p.LastStableOffsetAt(cur) == cur {
			return
		}
		select {
		case <-w.C():
		case <-ctx.Done():
			t.Fatalf("the last stable offset stays at %d below the high watermark %d", p.LastStableOffsetAt(cur), cur)
		}
	}
}

// readCommitted reads topic from the start with read_committed until it
// has read the value last, and returns the values read.
func readCommitted(ctx context.Context, t *testing.T, addr, topic, last string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read_committed read %v and never %q: %v", got, last, err)
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

// TestPowerCutMidTransaction: a broker with a transactional producer in
// the middle of a transaction loses power (the crash FS keeps only what
// was fsynced, directory entries included). After the restart the open
// transaction is aborted, so the last stable offset moves past it, and
// every committed transaction, and the plain records after the open
// one, are readable with read_committed, with the shared WAL and without
// (the coordinator's log then fsyncs itself: before its directory entry
// was synced, the cut took the whole log). With the coordinator's log
// kept, the coordinator aborts it at its timeout; with the coordinator's
// state gone (its directory lost), the partition's safeguard aborts it
// as a hanging transaction once TransactionMaxTimeout passed.
func TestPowerCutMidTransaction(t *testing.T) {
	for _, c := range []struct {
		name      string
		wal       bool
		loseCoord bool
	}{
		{"coordinator kept", true, false},
		{"coordinator kept, WAL off", false, false},
		{"coordinator state lost", true, true},
		{"coordinator state lost, WAL off", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			b := newBroker(t, "/data", withFS(mem), WAL(c.wal))
			ctx := txnCtx(t)
			const topic = "cut-txn"
			if err := b.CreateTopic(ctx, topic, 1, nil); err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("tx-cut"), kgo.DefaultProduceTopic(topic),
				kgo.TransactionTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var want []string
			for _, v := range []string{"c1", "c2", "c3"} {
				produceTxn(t, cl, topic, true, v)
				want = append(want, v)
			}
			produceTxn(t, cl, topic, false, "aborted")
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			plain, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(topic))
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			want = append(want, "after")
			hw := b.partition(topic, 0).HighWatermark()
			if lso := b.partition(topic, 0).LastStableOffsetAt(hw); lso >= hw {
				t.Fatalf("the open transaction does not hold the last stable offset (%d, high watermark %d)", lso, hw)
			}

			crashed := mem.CrashClone(vfs.CrashOptions{})
			if c.loseCoord {
				if err := vfs.RemoveAllDurable(crashed, "/data/transactions"); err != nil {
					t.Fatal(err)
				}
			}
			rb := newBroker(t, "/data", withFS(crashed), WAL(c.wal), TransactionSweepInterval(20*time.Millisecond),
				TransactionMaxTimeout(2*time.Second))
			p := rb.partition(topic, 0)
			if p == nil {
				t.Fatalf("topic %s lost in the power cut", topic)
			}
			if p.HighWatermark() < hw {
				t.Fatalf("the restarted partition ends at %d, acknowledged up to %d", p.HighWatermark(), hw)
			}
			waitStable(ctx, t, p, hw)
			if got := readCommitted(ctx, t, rb.Addr(), topic, "after"); !equal(got, want) {
				t.Fatalf("read_committed after the power cut read %v, want %v", got, want)
			}
			if c.loseCoord {
				// The sweep counts an abort once its marker is durable,
				// which is also when the last stable offset moves: the
				// count may follow the read above by a moment.
				WaitFor(t, "the hanging transaction counted", func() bool { return counterValue(t, rb.metrics.hangingAborted) >= 1 })
			}
			aborted := counterValue(t, rb.metrics.hangingAborted)
			if c.loseCoord && aborted != 1 {
				t.Fatalf("hanging transactions aborted: %v, want 1", aborted)
			}
			if !c.loseCoord && aborted != 0 {
				t.Fatalf("the safeguard aborted %v transactions the coordinator knew", aborted)
			}
		})
	}
}

// TestHangingTransactionShown: a transaction whose coordinator state is
// gone is shown by DescribeProducers (with when it was seen open) and
// not by ListTransactions; StuckPartitions lists its partition once it
// is older than TransactionMaxTimeout, and the safeguard then aborts it.
func TestHangingTransactionShown(t *testing.T) {
	mem := vfs.NewMem()
	b := newBroker(t, "/data", withFS(mem))
	ctx := txnCtx(t)
	const topic = "hang"
	if err := b.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("tx-hang"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	crashed := mem.CrashClone(vfs.CrashOptions{})
	if err := vfs.RemoveAllDurable(crashed, "/data/transactions"); err != nil {
		t.Fatal(err)
	}
	// A sweep far apart (the test runs the safeguard itself) and a
	// clock the test moves.
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	rb := newBroker(t, "/data", withFS(crashed), TransactionSweepInterval(time.Hour), TransactionMaxTimeout(time.Minute),
		withHangingClock(now))
	adm := kadm.NewClient(mustClient(t, rb.Addr()))
	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	ps.EachProducer(func(p kadm.DescribedProducer) {
		if p.CurrentTxnStartOffset == 0 && p.LastTimestamp > 0 {
			found = true
		}
	})
	if !found {
		t.Fatalf("DescribeProducers does not show the hanging producer: %+v", ps)
	}
	txns, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(txns) != 0 {
		t.Fatalf("ListTransactions shows %v: the coordinator has no state", txns)
	}
	rb.abortHanging() // younger than the bound: kept
	if s := rb.StuckPartitions(); len(s) != 0 {
		t.Fatalf("stuck before the bound passed: %+v", s)
	}
	if got := counterValue(t, rb.metrics.hangingAborted); got != 0 {
		t.Fatalf("aborted %v transactions younger than the bound", got)
	}
	clock.Add(time.Minute.Milliseconds())
	if s := rb.StuckPartitions(); len(s) != 1 || s[0].Topic != topic || s[0].LastStable != 0 || s[0].HighWatermark != 1 || s[0].CoordinatorLive {
		t.Fatalf("StuckPartitions = %+v, want %s/0 stable at 0 below 1, no coordinator state", s, topic)
	}
	rb.abortHanging()
	p := rb.partition(topic, 0)
	waitStable(ctx, t, p, 1)
	if s := rb.StuckPartitions(); len(s) != 0 {
		t.Fatalf("still stuck after the abort: %+v", s)
	}
	if got := counterValue(t, rb.metrics.hangingAborted); got != 1 {
		t.Fatalf("hanging transactions aborted: %v, want 1", got)
	}
}

func mustClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// counterValue reads a counter's value.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
