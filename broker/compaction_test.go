package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompactedTopicRefusesKeylessRecords: INVALID_RECORD with a message,
// and a keyed record in the same topic goes through.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	tb := startTest(t)
	ctx := context.Background()
	if _, err := tb.admin().CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": sp("compact")}, "ck"); err != nil {
		t.Fatal(err)
	}
	cl := tb.client(kgo.RecordRetries(1))
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ck", Value: []byte("no key")}).FirstErr()
	if err == nil || !strings.Contains(err.Error(), "INVALID_RECORD") {
		t.Fatalf("keyless record on a compacted topic: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ck", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("keyed record: %v", err)
	}
	// The same record goes to a delete-policy topic.
	if err := tb.client(kgo.AllowAutoTopicCreation()).ProduceSync(ctx, &kgo.Record{Topic: "plain", Value: []byte("no key")}).FirstErr(); err != nil {
		t.Fatalf("keyless record on a delete topic: %v", err)
	}
}

// TestBackgroundCompaction produces many updates of a few keys to a
// compacted topic; the broker's cleaner compacts the sealed segments in
// the background, and a consumer from the start reads every key's latest
// value at its original offset, in fewer records than were produced.
func TestBackgroundCompaction(t *testing.T) {
	tb := startTest(t, CleanerInterval(20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard, generous for loaded machines
	defer cancel()
	if _, err := tb.admin().CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": sp("compact"), "segment.bytes": sp("2048"), "min.cleanable.dirty.ratio": sp("0.01"),
	}, "table"); err != nil {
		t.Fatal(err)
	}
	cl := tb.client(kgo.DefaultProduceTopic("table"), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	const n, keys = 600, 10
	latest := map[string]string{}
	offsetOf := map[string]int64{}
	for i := 0; i < n; i++ {
		k, v := fmt.Sprintf("key-%d", i%keys), fmt.Sprintf("value-%d", i)
		r := &kgo.Record{Key: []byte(k), Value: []byte(v)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		latest[k], offsetOf[k] = v, r.Offset
	}
	WaitFor(t, "the cleaner to remove records", func() bool { return tb.b.CleanerStats().RecordsRemoved > 0 })

	got := map[string]string{}
	count := 0
	cons := tb.client(kgo.ConsumeTopics("table"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	last := int64(-1)
	for last < n-1 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed up to offset %d of %d", last, n-1)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			count++
			if want := fmt.Sprintf("value-%d", r.Offset); string(r.Value) != want {
				t.Fatalf("offset %d holds %q, %q was produced there", r.Offset, r.Value, want)
			}
			got[string(r.Key)] = string(r.Value)
		})
	}
	for k, v := range latest {
		if got[k] != v {
			t.Errorf("key %s reads %q, latest is %q (offset %d)", k, got[k], v, offsetOf[k])
		}
	}
	if count >= n {
		t.Fatalf("read %d records of %d produced: nothing compacted", count, n)
	}
	t.Logf("%d of %d records remain; cleaner %+v", count, n, tb.b.CleanerStats())
}

// TestCompactionWithTransactions: on a compacted topic, a committed
// transaction's record is kept as its key's latest value, an aborted
// transaction's records are removed by the cleaner (never taken for a
// latest value), and the markers stay readable in order.
func TestCompactionWithTransactions(t *testing.T) {
	tb := startTest(t, CleanerInterval(20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard, generous for loaded machines
	defer cancel()
	if _, err := tb.admin().CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": sp("compact"), "segment.bytes": sp("1024"), "min.cleanable.dirty.ratio": sp("0.01"),
	}, "txc"); err != nil {
		t.Fatal(err)
	}
	txn := tb.client(kgo.TransactionalID("txc-1"), kgo.DefaultProduceTopic("txc"))
	plain := tb.client(kgo.DefaultProduceTopic("txc"))
	write := func(commit bool, key, value string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	write(true, "k", "committed")
	write(false, "k", "aborted") // later, but must never win
	write(true, "j", "j1")
	write(false, "j", "j-aborted")
	// Seal those segments with plain updates of other keys.
	for i := 0; i < 40; i++ {
		if err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint("f", i%3)), Value: make([]byte, 100)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	WaitFor(t, "a compaction pass over the transactions' segments", func() bool {
		st := tb.b.CleanerStats()
		return st.RecordsRemoved >= 20
	})
	for _, level := range []kgo.IsolationLevel{kgo.ReadUncommitted(), kgo.ReadCommitted()} {
		cons := tb.client(kgo.ConsumeTopics("txc"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(100*time.Millisecond))
		got := map[string]string{}
		var values []string
		for len(got) < 5 {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %v", got)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got[string(r.Key)] = string(r.Value)
				values = append(values, string(r.Value))
			})
		}
		if got["k"] != "committed" || got["j"] != "j1" {
			t.Fatalf("latest values k=%q j=%q (records %q)", got["k"], got["j"], values)
		}
		for _, v := range values {
			if strings.Contains(v, "aborted") {
				t.Fatalf("an aborted record survived compaction: %q", values)
			}
		}
		cons.Close()
	}
}
