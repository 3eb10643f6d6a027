package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

// *broker.Broker is what InProcessSink appends to.
var _ Appender = (*broker.Broker)(nil)

const itTopic = "producer-it"

func startKfake(t testing.TB) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, itTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func startSluice(t testing.TB) *broker.Broker {
	t.Helper()
	b := brokertest.Start(t)
	if err := b.CreateTopic(context.Background(), itTopic, 1, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

func newClient(t testing.TB, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceAndCheck produces distinct values from many goroutines, closes the
// producer, reads the partition back from the start and checks that every
// status is the offset its record was read at.
func produceAndCheck(t *testing.T, p *BatchProducer[Record, int64], seeds []string) {
	const goroutines, each = 16, 40
	var mu sync.Mutex
	status := make(map[string]int64)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, v := range vals(fmt.Sprintf("g%d", g), each) {
				off, err := p.Produce(context.Background(), Record{Key: []byte(v), Value: []byte(v), Headers: []RecordHeader{{"h", []byte(v)}}})
				if err != nil {
					t.Errorf("Produce(%s): %v", v, err)
					return
				}
				mu.Lock()
				status[v] = off
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		return
	}

	cons := newClient(t, seeds, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{itTopic: {0: kgo.NewOffset().AtStart()}}))
	read := 0
	for read < goroutines*each {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", read, goroutines*each, err)
		}
		fs.EachError(func(topic string, part int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, part, err) })
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			off, ok := status[v]
			if !ok {
				t.Fatalf("read %q, which was never produced", v)
			}
			if off != r.Offset || string(r.Key) != v || len(r.Headers) != 1 || string(r.Headers[0].Value) != v {
				t.Fatalf("%q: status %d, read at offset %d with key %q headers %v", v, off, r.Offset, r.Key, r.Headers)
			}
			read++
		})
	}
	if read != len(status) {
		t.Fatalf("read %d records, produced %d", read, len(status))
	}
}

// kafkaSinkClients are the two ways a KafkaSink produces: through
// ProduceSync for a client that lingers (kgo's default), through Produce
// with its own promise (direct) for one that does not.
var kafkaSinkClients = []struct {
	name   string
	opts   []kgo.Opt
	direct bool
}{
	{"lingering client", nil, false},
	{"client without linger", []kgo.Opt{kgo.ProducerLinger(0)}, true},
}

func TestKafkaSinkKfake(t *testing.T) {
	for _, c := range kafkaSinkClients {
		t.Run(c.name, func(t *testing.T) {
			seeds := startKfake(t)
			sink := NewKafkaSink(newClient(t, seeds, c.opts...), itTopic, 0)
			if sink.direct != c.direct {
				t.Fatalf("sink.direct = %v, want %v", sink.direct, c.direct)
			}
			p, err := NewRecordProducer(WithSink(sink), Linger(time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			produceAndCheck(t, p, seeds)
		})
	}
}

func TestKafkaSinkSluice(t *testing.T) {
	for _, c := range kafkaSinkClients {
		t.Run(c.name, func(t *testing.T) {
			b := startSluice(t)
			seeds := []string{b.Addr()}
			sink := NewKafkaSink(newClient(t, seeds, c.opts...), itTopic, 0)
			if sink.direct != c.direct {
				t.Fatalf("sink.direct = %v, want %v", sink.direct, c.direct)
			}
			p, err := NewRecordProducer(WithSink(sink), Linger(time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			produceAndCheck(t, p, seeds)
		})
	}
}

// A record the client fails fails its batch, whichever way the sink
// produces, and the sink keeps working for the next batch.
func TestKafkaSinkRecordFails(t *testing.T) {
	for _, c := range kafkaSinkClients {
		t.Run(c.name, func(t *testing.T) {
			seeds := startKfake(t)
			// The client refuses a record above its batch size.
			opts := append([]kgo.Opt{kgo.ProducerBatchMaxBytes(1 << 10)}, c.opts...)
			sink := NewKafkaSink(newClient(t, seeds, opts...), itTopic, 0)
			big := make([]byte, 2<<10)
			recs := []Record{{Value: []byte("a")}, {Value: big}, {Value: []byte("c")}}
			if _, err := sink.Produce(context.Background(), Batch{Records: recs}); !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("batch with an oversized record: %v, want kerr.MessageTooLarge", err)
			}
			offsets, err := sink.Produce(context.Background(), Batch{Records: []Record{{Value: []byte("d")}, {Value: []byte("e")}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(offsets) != 2 || offsets[1] != offsets[0]+1 {
				t.Fatalf("next batch: offsets %v, want two consecutive", offsets)
			}
		})
	}
}

func TestInProcessSinkSluice(t *testing.T) {
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression()} {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			b := startSluice(t)
			p, err := NewRecordProducer(WithSink(NewInProcessSink(b, itTopic, 0, -1)), Compression(codec), Linger(time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			produceAndCheck(t, p, []string{b.Addr()})
		})
	}
}

// A client that does not partition manually is caught, not trusted.
func TestKafkaSinkWrongPartitioner(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, itTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sink := NewKafkaSink(cl, itTopic, 0)
	recs := []Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}
	if _, err := sink.Produce(context.Background(), Batch{Records: recs}); err == nil {
		t.Fatal("records spread over partitions were reported as written to partition 0")
	}
}
