package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// eosWorker is one member of an exactly-once consume→transform→produce
// pipeline (franz-go's GroupTransactSession): it reads the input topic
// read_committed, writes each value (prefixed "out-") to the output
// topic, and commits the consumed offsets in the same transaction. A
// session that fails is replaced by a new one (which fences the old
// incarnation). committed counts records of committed transactions.
type eosWorker struct {
	addr, txnID, group, in, out string
	committed                   *atomic.Int64
	ends                        *atomic.Int64 // if set: transactions ended (commit or abort) with an answer
	logf                        func(format string, args ...any)
}

func (w *eosWorker) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := w.session(ctx); err != nil && ctx.Err() == nil {
			w.logf("%s: session ended: %v; starting a new one", w.txnID, err)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

func (w *eosWorker) session(ctx context.Context) error {
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(w.addr),
		kgo.TransactionalID(w.txnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(w.group),
		kgo.ConsumeTopics(w.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(w.out),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.SessionTimeout(6*time.Second),
		kgo.RetryTimeout(30*time.Second),
	)
	if err != nil {
		return err
	}
	defer s.Close()
	for ctx.Err() == nil {
		fs := s.PollRecords(ctx, 50)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil && !errors.Is(ferr, context.Canceled) {
			return fmt.Errorf("fetch: %w", ferr)
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var wg sync.WaitGroup
		var perr atomic.Value
		for _, r := range recs {
			wg.Add(1)
			s.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, func(_ *kgo.Record, err error) {
				if err != nil {
					perr.Store(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		commit := kgo.TryCommit
		if perr.Load() != nil {
			commit = kgo.TryAbort
		}
		ok, err := s.End(ctx, commit)
		if err != nil {
			return fmt.Errorf("end: %w", err)
		}
		if w.ends != nil {
			w.ends.Add(1)
		}
		if ok && commit == kgo.TryCommit {
			w.committed.Add(int64(len(recs)))
		}
	}
	return nil
}

// readCommittedOutput reads the whole output topic (one partition)
// read_committed, up to a plain sentinel record it first writes, and
// returns how often each value appears.
func readCommittedOutput(t *testing.T, addr, topic string) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 60*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("sentinel")}).FirstErr(); err != nil {
		t.Fatalf("sentinel: %v", err)
	}
	seen := map[string]int{}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v (read %d values)", topic, err, len(seen))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			if string(r.Value) == "sentinel" {
				return seen
			}
			seen[string(r.Value)]++
		}
	}
}

// checkExactlyOnce checks that the output holds out-v0..out-v(n-1) once
// each and nothing else, and that the group's committed offsets are the
// input's end offsets.
func checkExactlyOnce(t *testing.T, addr, group, in, out string, n int) {
	t.Helper()
	seen := readCommittedOutput(t, addr, out)
	var dups, missing []string
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("out-v%d", i)
		switch seen[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			dups = append(dups, fmt.Sprintf("%s×%d", v, seen[v]))
		}
		delete(seen, v)
	}
	if len(dups) > 0 || len(missing) > 0 || len(seen) > 0 {
		t.Fatalf("output not exactly once: %d duplicated %v, %d missing %v, %d unexpected",
			len(dups), head(dups), len(missing), head(missing), len(seen))
	}
	requireNoLag(t, "eos group", committedLag(t, addr, group, in))
}

func head(s []string) []string { return s[:min(len(s), 10)] }

// TestEOSGroupTransactSession runs a consume→transform→produce pipeline
// with franz-go's GroupTransactSession: one member, then a second one
// joins (a rebalance), then the first leaves (another); the output read
// read_committed holds every input exactly once and the group's offsets
// cover the whole input.
func TestEOSGroupTransactSession(t *testing.T) {
	n := startNode(t)
	const in, out, group, step = "eos-in", "eos-out", "eos-group", 1000
	createTopic(t, n, in, 4)
	createTopic(t, n, out, 1)

	ctx := ctxT(t, 120*time.Second)
	start := func(id string, mine *atomic.Int64) (stop func()) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		w := &eosWorker{addr: n.addr, txnID: id, group: group, in: in, out: out, committed: mine, logf: t.Logf}
		go func() { defer close(done); w.run(wctx) }()
		return func() { cancel(); <-done }
	}
	var c1, c2 atomic.Int64
	sum := func() int64 { return c1.Load() + c2.Load() }
	wait := func(want int64) {
		t.Helper()
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for sum() < want {
			select {
			case <-ctx.Done():
				t.Fatalf("pipeline committed %d of %d records", sum(), want)
			case <-tk.C:
			}
		}
	}
	stop1 := start("eos-member-1", &c1)
	produceValues(t, n.addr, in, 0, step)
	wait(step)
	stop2 := start("eos-member-2", &c2) // a rebalance: the partitions are split
	produceValues(t, n.addr, in, step, step)
	wait(2 * step)
	stop1() // another: member 2 takes every partition
	produceValues(t, n.addr, in, 2*step, step)
	wait(3 * step)
	stop2()
	if c2.Load() == 0 {
		t.Fatalf("member 2 committed nothing (member 1: %d)", c1.Load())
	}
	checkExactlyOnce(t, n.addr, group, in, out, 3*step)

	// After a restart the committed output and offsets are the same.
	n.restart()
	checkExactlyOnce(t, n.addr, group, in, out, 3*step)
}

// readUntil reads topic from the start with franz-go, read_committed or
// not, until the value last, and returns the values joined by spaces.
func readUntil(t *testing.T, addr, topic string, committed bool, last string) string {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 30*time.Second)
	var got []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %v before %q: %v", got, last, err)
		}
		for _, r := range fs.Records() {
			got = append(got, string(r.Value))
			if string(r.Value) == last {
				return strings.Join(got, " ")
			}
		}
	}
}
