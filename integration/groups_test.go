package integration

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceValues writes values v0..v(n-1) (starting at from) spread over
// the topic's partitions with a franz-go client, acks=all, and opts.
func produceValues(t *testing.T, addr, topic string, from, n int, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctxT(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// committedLag returns, per partition, end offset minus committed offset
// for group on topic (a partition with no commit counts its whole length).
func committedLag(t *testing.T, addr, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := ctxT(t, 10*time.Second)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	lag := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		c, ok := committed.Lookup(topic, o.Partition)
		at := int64(0)
		if ok && c.At >= 0 {
			at = c.At
		}
		lag[o.Partition] = o.Offset - at
	})
	return lag
}

func requireNoLag(t *testing.T, who string, lag map[int32]int64) {
	t.Helper()
	for p, l := range lag {
		if l != 0 {
			t.Fatalf("%s: partition %d lag %d after consuming everything (lags %v)", who, p, l, lag)
		}
	}
}

// valueSet collects consumed values and counts duplicates.
type valueSet struct {
	mu   sync.Mutex // guards seen
	seen map[string]int
}

func (s *valueSet) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	s.seen[v]++
}

func (s *valueSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

func (s *valueSet) check(t *testing.T, who string, from, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := from; i < from+n; i++ {
		if s.seen[fmt.Sprintf("v%d", i)] == 0 {
			t.Fatalf("%s: value v%d never consumed (%d distinct seen)", who, i, len(s.seen))
		}
	}
	if len(s.seen) != n {
		t.Fatalf("%s: %d distinct values consumed, want %d", who, len(s.seen), n)
	}
}

type saramaHandler struct {
	got *valueSet
}

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		h.got.add(string(m.Value))
		sess.MarkMessage(m, "")
	}
	return nil
}

// TestSaramaConsumerGroup runs two sarama ConsumerGroup members over a
// three-partition topic; together they consume every record, the group's
// committed offsets reach the end offsets, and they survive a restart.
func TestSaramaConsumerGroup(t *testing.T) {
	n := startNode(t)
	const topic, group, count = "sarama-group", "sarama-g", 300
	createTopic(t, n, topic, 3)
	produceValues(t, n.addr, topic, 0, count)

	cfg := saramaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 50 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	got := &valueSet{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var groups []sarama.ConsumerGroup
	for i := 0; i < 2; i++ {
		cg, err := sarama.NewConsumerGroup([]string{n.addr}, group, cfg)
		if err != nil {
			t.Fatalf("sarama consumer group: %v", err)
		}
		groups = append(groups, cg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, saramaHandler{got}); err != nil && ctx.Err() == nil {
					t.Errorf("sarama Consume: %v", err)
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for got.len() < count && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	// Let the auto-commit interval pass, then leave: Close commits too.
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()
	for _, cg := range groups {
		if err := cg.Close(); err != nil {
			t.Errorf("sarama group close: %v", err)
		}
	}
	got.check(t, "sarama group", 0, count)
	requireNoLag(t, "sarama group", committedLag(t, n.addr, group, topic))
	n.restart()
	requireNoLag(t, "sarama group after restart", committedLag(t, n.addr, group, topic))
}

// TestKafkaGoGroupReader consumes with segmentio/kafka-go's Reader in a
// group, commits, restarts the broker, and checks a new reader in the same
// group resumes after the committed records.
func TestKafkaGoGroupReader(t *testing.T) {
	n := startNode(t)
	const topic, group = "kafkago-group", "kafkago-g"
	createTopic(t, n, topic, 2)
	produceValues(t, n.addr, topic, 0, 100)

	read := func(want int) *valueSet {
		r := kafkago.NewReader(kafkago.ReaderConfig{
			Brokers:           []string{n.addr},
			GroupID:           group,
			Topic:             topic,
			MinBytes:          1,
			MaxBytes:          10 << 20,
			MaxWait:           100 * time.Millisecond,
			StartOffset:       kafkago.FirstOffset,
			HeartbeatInterval: 200 * time.Millisecond,
			SessionTimeout:    6 * time.Second,
			RebalanceTimeout:  5 * time.Second,
		})
		defer r.Close()
		got := &valueSet{}
		ctx := ctxT(t, 40*time.Second)
		for got.len() < want {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("kafka-go FetchMessage after %d: %v", got.len(), err)
			}
			got.add(string(m.Value))
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatalf("kafka-go CommitMessages: %v", err)
			}
		}
		return got
	}
	read(100).check(t, "kafka-go group", 0, 100)
	requireNoLag(t, "kafka-go group", committedLag(t, n.addr, group, topic))

	n.restart()
	produceValues(t, n.addr, topic, 100, 40)
	// Only the 40 new records: the group resumes at its committed offsets.
	read(40).check(t, "kafka-go group after restart", 100, 40)
	requireNoLag(t, "kafka-go group after restart", committedLag(t, n.addr, group, topic))
}

// TestKcatBalancedConsumer consumes with kcat's balanced consumer (-G),
// which joins a group, consumes to the end and commits on exit; a second
// run after a restart finds nothing left to consume.
func TestKcatBalancedConsumer(t *testing.T) {
	kcat := needKcat(t)
	n := startNode(t)
	const topic, group, count = "kcat-group", "kcat-g", 90
	createTopic(t, n, topic, 3)
	produceValues(t, n.addr, topic, 0, count)

	consume := func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, "-b", n.addr, "-G", group, "-e", "-X", "auto.offset.reset=earliest",
			"-X", "auto.commit.interval.ms=100", "-X", "session.timeout.ms=6000", "-f", "%s\n", topic)
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("kcat -G: %v\n%s", err, stderr)
		}
		s := strings.TrimSpace(string(out))
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}
	got := &valueSet{}
	for _, v := range consume() {
		got.add(v)
	}
	got.check(t, "kcat -G", 0, count)
	requireNoLag(t, "kcat -G", committedLag(t, n.addr, group, topic))

	n.restart()
	requireNoLag(t, "kcat -G after restart", committedLag(t, n.addr, group, topic))
	if again := consume(); len(again) != 0 {
		t.Fatalf("kcat -G after restart re-consumed %d records; committed offsets were lost", len(again))
	}
}
