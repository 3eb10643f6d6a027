package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// confluent-kafka-python (librdkafka underneath) runs
// integration/testdata/confluent_kafka_compat.py.

// needConfluentKafka returns a python3 that imports confluent_kafka.
func needConfluentKafka(t *testing.T) string {
	t.Helper()
	return needPythonModule(t, "confluent_kafka", "python3-confluent-kafka")
}

// needPythonModule returns a python3 that imports module, preferring
// Debian's (where the Debian package pkg installs it) over whatever
// python3 comes first in PATH.
func needPythonModule(t *testing.T, module, pkg string) string {
	t.Helper()
	candidates := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		if err := exec.Command(p, "-c", "import "+module).Run(); err == nil {
			return p
		}
	}
	needTool(t, "no python3 imports "+module+": install Debian's "+pkg)
	return ""
}

func confluentCmd(t *testing.T, python, addr, name string, args map[string]any) *exec.Cmd {
	t.Helper()
	args["bootstrap"] = addr
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, filepath.Join("testdata", "confluent_kafka_compat.py"), name, string(b))
	cmd.Env = os.Environ()
	return cmd
}

// TestConfluentKafkaProducer produces with acks=all and idempotence, with
// each codec librdkafka has, and reads the records back with franz-go:
// same keys, values, headers and offsets, written by an idempotent
// producer (a producer ID on every batch).
func TestConfluentKafkaProducer(t *testing.T) {
	python := needConfluentKafka(t)
	n := startNode(t)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			topic := "confluent-" + codec
			createTopic(t, n, topic, 1)
			const count = 60
			want := records(topic, count)
			lines := runScript(t, "confluent-kafka produce", 90*time.Second,
				confluentCmd(t, python, n.addr, "produce", map[string]any{"topic": topic, "compression": codec, "records": recordsJSON(want)}), nil)
			if len(lines) != count {
				t.Fatalf("%d delivery reports, want %d", len(lines), count)
			}
			for i, l := range lines {
				if l["offset"] != float64(i) || l["key"] != want[i].key {
					t.Fatalf("delivery report %d = %v, want %s at offset %d", i, l, want[i].key, i)
				}
			}
			checkRecords(t, "kgo reading confluent-kafka "+codec, want, consumeKgo(t, n.addr, topic, count))
			requireIdempotent(t, n.addr, topic, count)
		})
	}
}

// requireIdempotent fails unless every record of partition 0 of topic
// carries a producer ID, as an idempotent producer's batches do.
func requireIdempotent(t *testing.T, addr, topic string, count int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 20*time.Second)
	seen := 0
	for seen < count {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", seen, count)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if r.ProducerID < 0 || r.ProducerEpoch < 0 {
				t.Fatalf("record at %d has producer id %d epoch %d: not written by an idempotent producer", r.Offset, r.ProducerID, r.ProducerEpoch)
			}
		})
	}
}

// TestConfluentKafkaConsumerGroup runs two confluent-kafka Consumers
// (committing each record synchronously) through testTwoMemberGroup, with
// the eager range assignor and with the cooperative-sticky one.
func TestConfluentKafkaConsumerGroup(t *testing.T) {
	python := needConfluentKafka(t)
	n := startNode(t)
	for _, strategy := range []string{"range", "cooperative-sticky"} {
		t.Run(strategy, func(t *testing.T) {
			topic, group := "confluent-group-"+strategy, "confluent-g-"+strategy
			testTwoMemberGroup(t, n, topic, func(who string) *script {
				return startScript(t, "confluent-kafka "+who, confluentCmd(t, python, n.addr, "member",
					map[string]any{"topic": topic, "group": group, "strategy": strategy}))
			}, group)
		})
	}
}

// TestConfluentKafkaAdmin drives AdminClient: create_topics (and again,
// for TOPIC_ALREADY_EXISTS), list_topics, one topic's metadata,
// describe_configs, list_groups and delete_topics.
func TestConfluentKafkaAdmin(t *testing.T) {
	python := needConfluentKafka(t)
	n := startNode(t)
	const topic = "confluent-admin"
	createTopic(t, n, "other", 1)
	produceValues(t, n.addr, "other", 0, 5)
	// A group that only committed offsets: listed as Empty, no members.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "other", Partition: 0, At: 5})
	if err := kadmFor(t, n.addr).CommitAllOffsets(ctxT(t, 10*time.Second), "confluent-admin-g", offs); err != nil {
		t.Fatalf("CommitAllOffsets: %v", err)
	}
	lines := runScript(t, "confluent-kafka admin", 90*time.Second, confluentCmd(t, python, n.addr, "admin", map[string]any{"topic": topic}), nil)
	steps := map[string]map[string]any{}
	var order []string
	for _, l := range lines {
		s := fmt.Sprint(l["step"])
		steps[s] = l
		order = append(order, s)
	}
	wantOrder := "create_topics create_topics_again list_topics describe_topic describe_configs list_groups delete_topics list_topics_after_delete"
	if strings.Join(order, " ") != wantOrder {
		t.Fatalf("steps %v, want %s", order, wantOrder)
	}
	if r := steps["create_topics_again"]["result"]; r != "TOPIC_ALREADY_EXISTS" {
		t.Fatalf("create_topics of an existing topic: %v, want TOPIC_ALREADY_EXISTS", r)
	}
	// userTopics drops the broker's internal topics (__consumer_offsets
	// and the like), which Kafka lists too.
	userTopics := func(list any) string {
		var names []string
		for _, x := range list.([]any) {
			if s := fmt.Sprint(x); !strings.HasPrefix(s, "__") {
				names = append(names, s)
			}
		}
		sort.Strings(names)
		return strings.Join(names, ",")
	}
	lt := steps["list_topics"]
	if got := userTopics(lt["result"]); got != topic+",other" {
		t.Fatalf("list_topics = %v, want %s and other", lt["result"], topic)
	}
	if fmt.Sprint(lt["brokers"]) != "[0]" || lt["controller"] != float64(0) {
		t.Fatalf("list_topics brokers %v controller %v, want node 0 as both", lt["brokers"], lt["controller"])
	}
	dt := steps["describe_topic"]
	ps, _ := dt["partitions"].([]any)
	if dt["error"] != nil || len(ps) != 3 {
		t.Fatalf("topic metadata %v, want 3 partitions and no error", dt)
	}
	for i, p := range ps {
		pm := p.(map[string]any)
		if pm["id"] != float64(i) || pm["leader"] != float64(0) || fmt.Sprint(pm["replicas"]) != "[0]" || fmt.Sprint(pm["isrs"]) != "[0]" || pm["error"] != nil {
			t.Fatalf("partition %d metadata %v, want leader 0, replicas and isrs [0]", i, pm)
		}
	}
	cfg, _ := steps["describe_configs"]["result"].(map[string]any)
	if cfg["retention.ms"] != "7200000" {
		t.Fatalf("describe_configs retention.ms = %v, want the 7200000 the topic was created with", cfg["retention.ms"])
	}
	gs, _ := steps["list_groups"]["result"].([]any)
	if len(gs) != 1 {
		t.Fatalf("list_groups = %v, want the one group", gs)
	}
	if g := gs[0].(map[string]any); g["id"] != "confluent-admin-g" || g["state"] != "Empty" || g["members"] != float64(0) || g["error"] != nil {
		t.Fatalf("list_groups = %v, want confluent-admin-g Empty with no members", g)
	}
	if got := userTopics(steps["list_topics_after_delete"]["result"]); got != "other" {
		t.Fatalf("list_topics after delete_topics = %v, want other", steps["list_topics_after_delete"]["result"])
	}
}

// TestConfluentKafkaTransactions runs a transactional Producer through
// the transactions checkTransactions expects. It runs only where the
// broker serves the transaction APIs.
func TestConfluentKafkaTransactions(t *testing.T) {
	python := needConfluentKafka(t)
	n := startNode(t)
	if missing := missingAPIs(t, n.addr, kmsg.AddPartitionsToTxn.Int16(), kmsg.AddOffsetsToTxn.Int16(), kmsg.TxnOffsetCommit.Int16(), kmsg.EndTxn.Int16()); len(missing) > 0 {
		t.Skipf("Sluice does not serve %s yet; confluent-kafka transactions need them", strings.Join(missing, ", "))
	}
	const topic, group = "confluent-txn", "confluent-txn-g"
	createTopic(t, n, topic, 1)
	lines := runScript(t, "confluent-kafka txn", 90*time.Second, confluentCmd(t, python, n.addr, "txn",
		map[string]any{"topic": topic, "group": group, "transactional_id": "confluent-tx"}), nil)
	if len(lines) != 3 {
		t.Fatalf("confluent-kafka txn printed %v", lines)
	}
	checkTransactions(t, n.addr, topic, group)
}
