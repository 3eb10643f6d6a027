package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
)

// TestCompactedTopicClients writes updates of a few keys to a compacted
// topic, lets the broker's cleaner compact it (which leaves empty filler
// batches where whole batches were removed), then reads it from the
// start with sarama, kafka-go and kcat: each sees every key's latest value
// at its produced offset, offsets increasing, and fewer records than were
// written.
func TestCompactedTopicClients(t *testing.T) {
	n := startNode(t, broker.CleanerInterval(20*time.Millisecond))
	ctx := ctxT(t, 60*time.Second)
	compact, seg, ratio := "compact", "2048", "0.01"
	if _, err := kadmClient(t, n.addr).CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": &compact, "segment.bytes": &seg, "min.cleanable.dirty.ratio": &ratio,
	}, "tbl"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("tbl"), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const total, keys = 400, 8
	latest := map[string]string{}
	for i := 0; i < total; i++ {
		k, v := fmt.Sprintf("k%d", i%keys), fmt.Sprintf("v%d", i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		latest[k] = v
	}
	// A keyless record is refused.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err == nil || !strings.Contains(err.Error(), "INVALID_RECORD") {
		t.Fatalf("keyless record: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); n.b.CleanerStats().RecordsRemoved < total/2; {
		if time.Now().After(deadline) {
			t.Fatalf("the cleaner removed %d records", n.b.CleanerStats().RecordsRemoved)
		}
		time.Sleep(10 * time.Millisecond)
	}
	check := func(client string, got []rec) {
		t.Helper()
		m := map[string]string{}
		for i, r := range got {
			if i > 0 && r.offset <= got[i-1].offset {
				t.Fatalf("%s: offset %d after %d", client, r.offset, got[i-1].offset)
			}
			if want := fmt.Sprintf("v%d", r.offset); r.value != want {
				t.Fatalf("%s: offset %d holds %q, %q was produced there", client, r.offset, r.value, want)
			}
			m[r.key] = r.value
		}
		for k, v := range latest {
			if m[k] != v {
				t.Fatalf("%s: key %s reads %q, latest is %q", client, k, m[k], v)
			}
		}
		if len(got) >= total {
			t.Fatalf("%s: %d records, nothing compacted", client, len(got))
		}
	}
	hw := int64(total - 1) // the last offset

	// sarama
	consumer, err := sarama.NewConsumer([]string{n.addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition("tbl", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	var sg []rec
	for len(sg) == 0 || sg[len(sg)-1].offset < hw {
		select {
		case m := <-pc.Messages():
			sg = append(sg, rec{key: string(m.Key), value: string(m.Value), offset: m.Offset})
		case err := <-pc.Errors():
			t.Fatalf("sarama: %v", err)
		case <-ctx.Done():
			t.Fatalf("sarama: read %d records", len(sg))
		}
	}
	pc.Close()
	check("sarama", sg)

	// kafka-go
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{n.addr}, Topic: "tbl", Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	var kg []rec
	for len(kg) == 0 || kg[len(kg)-1].offset < hw {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go after %d records: %v", len(kg), err)
		}
		kg = append(kg, rec{key: string(m.Key), value: string(m.Value), offset: m.Offset})
	}
	check("kafka-go", kg)

	// kcat
	if kcat := kcatPath(t); kcat != "" {
		out := runKcat(t, kcat, "", "-b", n.addr, "-C", "-t", "tbl", "-p", "0", "-o", "beginning", "-e", "-f", "%o %k %s\n")
		var kc []rec
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r rec
			if _, err := fmt.Sscanf(line, "%d %s %s", &r.offset, &r.key, &r.value); err != nil {
				t.Fatalf("kcat line %q: %v", line, err)
			}
			kc = append(kc, r)
		}
		check("kcat", kc)
	}
}
