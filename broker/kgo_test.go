package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func testRecord(topic string, i int) *kgo.Record {
	return &kgo.Record{
		Topic: topic,
		Key:   []byte(fmt.Sprintf("key-%d", i)),
		Value: []byte(fmt.Sprintf("value-%d-%s", i, string(make([]byte, i%50)))),
		Headers: []kgo.RecordHeader{
			{Key: "h", Value: []byte(fmt.Sprint(i))},
		},
	}
}

// consumeAll reads n records from topic (one partition) from the start.
func consumeAll(t *testing.T, tb *testBroker, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := tb.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

func checkRecords(t *testing.T, topic string, got []*kgo.Record, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d records, want %d", len(got), n)
	}
	for i, r := range got {
		want := testRecord(topic, i)
		if r.Offset != int64(i) || string(r.Key) != string(want.Key) || string(r.Value) != string(want.Value) ||
			len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != string(want.Headers[0].Value) {
			t.Fatalf("record %d: offset %d key %q value %q headers %v; want offset %d key %q value %q headers %v",
				i, r.Offset, r.Key, r.Value, r.Headers, i, want.Key, want.Value, want.Headers)
		}
	}
}

// TestKgoProduceConsumeRestart produces with kgo's default settings
// (idempotent, acks=all), consumes everything back, restarts the broker,
// produces more and consumes the whole log again.
func TestKgoProduceConsumeRestart(t *testing.T) {
	tb := startTest(t)
	const topic = "kgo-roundtrip"
	produce := func(from, to int) {
		cl := tb.client(kgo.AllowAutoTopicCreation())
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, testRecord(topic, i))
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for i, r := range rs {
			if r.Offset != int64(from+i) {
				t.Fatalf("record %d got offset %d", from+i, r.Offset)
			}
		}
	}
	produce(0, 500)
	checkRecords(t, topic, consumeAll(t, tb, topic, 500), 500)
	tb.restart()
	checkRecords(t, topic, consumeAll(t, tb, topic, 500), 500)
	produce(500, 800)
	tb.restart()
	checkRecords(t, topic, consumeAll(t, tb, topic, 800), 800)
}
