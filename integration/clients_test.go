package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func createTopic(t *testing.T, n *node, topic string, partitions int32) {
	t.Helper()
	if err := n.b.CreateTopic(ctxT(t, 10*time.Second), topic, partitions, nil); err != nil {
		t.Fatalf("CreateTopic %s: %v", topic, err)
	}
}

// consumeKgo reads n records of partition 0 from the start with a
// franz-go client, as a reader independent of the client under test.
func consumeKgo(t *testing.T, addr, topic string, n int) []rec {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 20*time.Second)
	var got []rec
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("kgo consumer: got %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("kgo fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			got = append(got, rec{key: string(r.Key), value: string(r.Value), headers: h, offset: r.Offset})
		})
	}
	return got
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "sluice-integration"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Flush.Frequency = 2 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	return cfg
}

func saramaMsg(topic string, r rec, i int) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Partition: 0, Key: sarama.StringEncoder(r.key), Value: sarama.StringEncoder(r.value), Metadata: i}
	for k, v := range r.headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
	}
	return m
}

// TestSarama produces half the records with sarama's SyncProducer and half
// with its AsyncProducer, restarting the broker in between, and reads them
// back with sarama's partition consumer before and after another restart.
func TestSarama(t *testing.T) {
	n := startNode(t)
	const topic = "sarama"
	createTopic(t, n, topic, 1)
	want := records("sarama", 200)
	half := len(want) / 2

	sp, err := sarama.NewSyncProducer([]string{n.addr}, saramaConfig())
	if err != nil {
		t.Fatalf("sarama sync producer: %v", err)
	}
	for i := 0; i < half; i++ {
		part, off, err := sp.SendMessage(saramaMsg(topic, want[i], i))
		if err != nil {
			t.Fatalf("SendMessage %d: %v", i, err)
		}
		if part != 0 || off != want[i].offset {
			t.Fatalf("SendMessage %d: partition %d offset %d, want 0/%d", i, part, off, want[i].offset)
		}
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}

	n.restart()

	ap, err := sarama.NewAsyncProducer([]string{n.addr}, saramaConfig())
	if err != nil {
		t.Fatalf("sarama async producer: %v", err)
	}
	go func() {
		for i := half; i < len(want); i++ {
			ap.Input() <- saramaMsg(topic, want[i], i)
		}
	}()
	offsets := map[int64]bool{}
	for len(offsets) < len(want)-half {
		select {
		case m := <-ap.Successes():
			offsets[m.Offset] = true
		case e := <-ap.Errors():
			t.Fatalf("async produce: %v", e.Err)
		case <-time.After(20 * time.Second):
			t.Fatalf("async produce: %d of %d acknowledged", len(offsets), len(want)-half)
		}
	}
	if err := ap.Close(); err != nil {
		t.Fatal(err)
	}
	for i := half; i < len(want); i++ {
		if !offsets[int64(i)] {
			t.Fatalf("async produce: offset %d never acknowledged (got %v)", i, offsets)
		}
	}

	consume := func() []rec {
		c, err := sarama.NewConsumer([]string{n.addr}, saramaConfig())
		if err != nil {
			t.Fatalf("sarama consumer: %v", err)
		}
		defer c.Close()
		pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("ConsumePartition: %v", err)
		}
		defer pc.Close()
		var got []rec
		for len(got) < len(want) {
			select {
			case m := <-pc.Messages():
				h := map[string]string{}
				for _, x := range m.Headers {
					h[string(x.Key)] = string(x.Value)
				}
				got = append(got, rec{key: string(m.Key), value: string(m.Value), headers: h, offset: m.Offset})
			case e := <-pc.Errors():
				t.Fatalf("sarama consume: %v", e)
			case <-time.After(20 * time.Second):
				t.Fatalf("sarama consume: %d of %d records", len(got), len(want))
			}
		}
		if hwm := pc.HighWaterMarkOffset(); hwm != int64(len(want)) {
			t.Errorf("high watermark %d, want %d", hwm, len(want))
		}
		return got
	}
	checkRecords(t, "sarama", want, consume())
	n.restart()
	checkRecords(t, "sarama after restart", want, consume())
}

// TestKafkaGo writes with segmentio/kafka-go's Writer (RequiredAcks all),
// restarts the broker, and reads back with its Reader (no group).
func TestKafkaGo(t *testing.T) {
	n := startNode(t)
	const topic = "kafkago"
	createTopic(t, n, topic, 1)
	want := records("kafkago", 150)

	w := &kafkago.Writer{
		Addr:         kafkago.TCP(n.addr),
		Topic:        topic,
		RequiredAcks: kafkago.RequireAll,
		Balancer:     &kafkago.RoundRobin{},
		BatchTimeout: 5 * time.Millisecond,
	}
	msgs := make([]kafkago.Message, len(want))
	for i, r := range want {
		msgs[i] = kafkago.Message{Key: []byte(r.key), Value: []byte(r.value)}
		for k, v := range r.headers {
			msgs[i].Headers = append(msgs[i].Headers, kafkago.Header{Key: k, Value: []byte(v)})
		}
	}
	ctx := ctxT(t, 60*time.Second)
	// Two calls so that the data spans more than one produce request.
	if err := w.WriteMessages(ctx, msgs[:50]...); err != nil {
		t.Fatalf("kafka-go WriteMessages: %v", err)
	}
	if err := w.WriteMessages(ctx, msgs[50:]...); err != nil {
		t.Fatalf("kafka-go WriteMessages: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	n.restart()

	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:   []string{n.addr},
		Topic:     topic,
		Partition: 0,
		MinBytes:  1,
		MaxBytes:  10 << 20,
		MaxWait:   100 * time.Millisecond,
	})
	defer r.Close()
	var got []rec
	for len(got) < len(want) {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go ReadMessage after %d records: %v", len(got), err)
		}
		h := map[string]string{}
		for _, x := range m.Headers {
			h[x.Key] = string(x.Value)
		}
		got = append(got, rec{key: string(m.Key), value: string(m.Value), headers: h, offset: m.Offset})
	}
	checkRecords(t, "kafka-go", want, got)
	// An independent reader agrees.
	checkRecords(t, "kgo reading kafka-go's records", want, consumeKgo(t, n.addr, topic, len(want)))
}

func runKcat(t *testing.T, kcat string, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// TestKcat lists metadata, produces keyed records with headers and acks=all,
// restarts the broker and consumes them back, all with kcat (librdkafka).
func TestKcat(t *testing.T) {
	kcat := needKcat(t)
	n := startNode(t)
	const topic = "kcat"
	createTopic(t, n, topic, 1)

	meta := runKcat(t, kcat, "", "-b", n.addr, "-L", "-t", topic)
	if !strings.Contains(meta, `topic "kcat" with 1 partitions`) {
		t.Fatalf("kcat -L does not list the topic:\n%s", meta)
	}
	if !strings.Contains(meta, "partition 0, leader 0") && !strings.Contains(meta, "partition 0, leader") {
		t.Fatalf("kcat -L shows no leader for partition 0:\n%s", meta)
	}

	const count = 120
	var in strings.Builder
	want := make([]rec, count)
	for i := range want {
		want[i] = rec{key: fmt.Sprintf("k%d", i), value: fmt.Sprintf("value %d", i), offset: int64(i),
			headers: map[string]string{"client": "kcat", "trace": "abc"}}
		fmt.Fprintf(&in, "%s:%s\n", want[i].key, want[i].value)
	}
	runKcat(t, kcat, in.String(), "-b", n.addr, "-P", "-t", topic, "-p", "0", "-K", ":",
		"-H", "client=kcat", "-H", "trace=abc", "-X", "acks=all")

	n.restart()

	out := runKcat(t, kcat, "", "-b", n.addr, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
		"-f", "%o\t%k\t%s\t%h\n")
	var got []rec
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("kcat -C line %q: want 4 tab-separated fields", line)
		}
		off, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("kcat offset %q: %v", f[0], err)
		}
		h := map[string]string{}
		for _, kv := range strings.Split(f[3], ",") {
			k, v, _ := strings.Cut(kv, "=")
			h[k] = v
		}
		got = append(got, rec{offset: off, key: f[1], value: f[2], headers: h})
	}
	sort.Slice(got, func(i, j int) bool { return got[i].offset < got[j].offset })
	checkRecords(t, "kcat", want, got)
	checkRecords(t, "kgo reading kcat's records", want, consumeKgo(t, n.addr, topic, count))
}
