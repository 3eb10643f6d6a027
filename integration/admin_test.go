package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/internal/batch"
)

func kadmClient(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// describedTopicConfig reads one topic config back through kadm, as an
// independent reader.
func describedTopicConfig(t *testing.T, addr, topic, name string) string {
	t.Helper()
	rcs, err := kadmClient(t, addr).DescribeTopicConfigs(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c.MaybeValue()
		}
	}
	t.Fatalf("%s: %s not described", topic, name)
	return ""
}

// TestCreateCompactedTopic creates a compacted topic with each admin
// client and reads the policy back.
func TestCreateCompactedTopic(t *testing.T) {
	n := startNode(t, broker.AutoCreateTopics(false))
	ctx := ctxT(t, 20*time.Second)
	compact := "compact"

	// franz-go kadm
	if _, err := kadmClient(t, n.addr).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "c-kadm"); err != nil {
		t.Fatalf("kadm: %v", err)
	}
	// sarama ClusterAdmin
	adm, err := sarama.NewClusterAdmin([]string{n.addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic("c-sarama", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &compact}}, false); err != nil {
		t.Fatalf("sarama: %v", err)
	}
	// segmentio/kafka-go
	kc := &kafkago.Client{Addr: kafkago.TCP(n.addr), Timeout: 10 * time.Second}
	res, err := kc.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{
		Topic: "c-kafkago", NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafkago.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}}})
	if err != nil || res.Errors["c-kafkago"] != nil {
		t.Fatalf("kafka-go: %v %v", err, res)
	}
	for _, topic := range []string{"c-kadm", "c-sarama", "c-kafkago"} {
		if v := describedTopicConfig(t, n.addr, topic, "cleanup.policy"); v != "compact" {
			t.Errorf("%s: cleanup.policy %q", topic, v)
		}
	}
}

// TestAlterConfigsClients alters and describes topic and broker configs
// with sarama's ClusterAdmin and kafka-go, checking each change with the
// other clients.
func TestAlterConfigsClients(t *testing.T) {
	n := startNode(t)
	ctx := ctxT(t, 20*time.Second)
	createTopic(t, n, "alt", 1)
	adm, err := sarama.NewClusterAdmin([]string{n.addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()

	// sarama: non-incremental, then incremental.
	v := "3600000"
	if err := adm.AlterConfig(sarama.TopicResource, "alt", map[string]*string{"retention.ms": &v}, false); err != nil {
		t.Fatalf("sarama AlterConfig: %v", err)
	}
	if got := describedTopicConfig(t, n.addr, "alt", "retention.ms"); got != v {
		t.Fatalf("retention.ms after sarama AlterConfig: %q", got)
	}
	seg := "4096"
	if err := adm.IncrementalAlterConfig(sarama.TopicResource, "alt", map[string]sarama.IncrementalAlterConfigsEntry{
		"segment.bytes": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &seg},
	}, false); err != nil {
		t.Fatalf("sarama IncrementalAlterConfig: %v", err)
	}
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "alt"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		got[e.Name] = e
	}
	if got["segment.bytes"].Value != "4096" || got["retention.ms"].Value != "3600000" || got["retention.ms"].Source != sarama.SourceTopic {
		t.Fatalf("sarama DescribeConfig: segment.bytes %+v retention.ms %+v", got["segment.bytes"], got["retention.ms"])
	}
	bad := "x"
	if err := adm.AlterConfig(sarama.TopicResource, "alt", map[string]*string{"retention.ms": &bad}, false); err == nil || !strings.Contains(err.Error(), "retention.ms") {
		t.Fatalf("sarama AlterConfig with a bad value: %v", err)
	}
	// sarama: the broker resource.
	bentries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "0"})
	if err != nil {
		t.Fatal(err)
	}
	var ibp string
	for _, e := range bentries {
		if e.Name == "inter.broker.protocol.version" {
			ibp = e.Value
		}
	}
	if ibp != broker.KafkaVersion+"-IV0" {
		t.Fatalf("sarama: inter.broker.protocol.version %q", ibp)
	}

	// kafka-go: incremental APPEND, then describe.
	kc := &kafkago.Client{Addr: kafkago.TCP(n.addr), Timeout: 10 * time.Second}
	ir, err := kc.IncrementalAlterConfigs(ctx, &kafkago.IncrementalAlterConfigsRequest{Resources: []kafkago.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: "alt",
		Configs: []kafkago.IncrementalAlterConfigsRequestConfig{{Name: "cleanup.policy", Value: "compact", ConfigOperation: kafkago.ConfigOperationAppend}},
	}}})
	if err != nil || ir.Resources[0].Error != nil {
		t.Fatalf("kafka-go IncrementalAlterConfigs: %v %+v", err, ir)
	}
	dr, err := kc.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: "alt", ConfigNames: []string{"cleanup.policy"},
	}}})
	if err != nil || len(dr.Resources) != 1 || len(dr.Resources[0].ConfigEntries) != 1 || dr.Resources[0].ConfigEntries[0].ConfigValue != "delete,compact" {
		t.Fatalf("kafka-go DescribeConfigs: %v %+v", err, dr)
	}
	// kafka-go: the cluster-default broker resource.
	ar, err := kc.AlterConfigs(ctx, &kafkago.AlterConfigsRequest{Resources: []kafkago.AlterConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeBroker, ResourceName: "0",
		Configs: []kafkago.AlterConfigRequestConfig{{Name: "log.retention.bytes", Value: "1000000"}},
	}}})
	if err != nil || ar.Errors[kafkago.AlterConfigsResponseResource{Type: int8(kafkago.ResourceTypeBroker), Name: "0"}] != nil {
		t.Fatalf("kafka-go AlterConfigs broker: %v %+v", err, ar)
	}
	if got := describedTopicConfig(t, n.addr, "alt", "retention.bytes"); got != "1000000" {
		t.Fatalf("retention.bytes inherited from broker 0: %q", got)
	}
	// Everything persists.
	n.restart()
	if got := describedTopicConfig(t, n.addr, "alt", "cleanup.policy"); got != "delete,compact" {
		t.Fatalf("after restart cleanup.policy %q", got)
	}
	if got := describedTopicConfig(t, n.addr, "alt", "retention.bytes"); got != "1000000" {
		t.Fatalf("after restart retention.bytes %q", got)
	}
}

// TestDeleteRecordsAndLogDirs deletes records with sarama and kadm,
// consumes from the new start with kcat, sarama and kgo, and compares
// DescribeLogDirs sizes (sarama and kadm) with the segment files.
func TestDeleteRecordsAndLogDirs(t *testing.T) {
	n := startNode(t)
	ctx := ctxT(t, 30*time.Second)
	createTopic(t, n, "dr", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.DefaultProduceTopic("dr"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("v", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm, err := sarama.NewClusterAdmin([]string{n.addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.DeleteRecords("dr", map[int32]int64{0: 5}); err != nil {
		t.Fatalf("sarama DeleteRecords: %v", err)
	}
	dels := kadm.Offsets{}
	dels.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 12})
	if rs, err := kadmClient(t, n.addr).DeleteRecords(ctx, dels); err != nil || rs.Error() != nil {
		t.Fatalf("kadm DeleteRecords: %v %v", err, rs.Error())
	}
	// kgo from the start.
	got := consumeKgo(t, n.addr, "dr", 8)
	if got[0].offset != 12 || got[0].value != "v12" {
		t.Fatalf("kgo from the start: first offset %d value %q", got[0].offset, got[0].value)
	}
	// sarama from the oldest offset.
	client, err := sarama.NewClient([]string{n.addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if off, err := client.GetOffset("dr", 0, sarama.OffsetOldest); err != nil || off != 12 {
		t.Fatalf("sarama oldest offset %d, %v", off, err)
	}
	// kcat from the beginning.
	if kcat := kcatPath(t); kcat != "" {
		out := runKcat(t, kcat, "", "-b", n.addr, "-C", "-t", "dr", "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 8 || lines[0] != "12 v12" {
			t.Fatalf("kcat from the beginning:\n%s", out)
		}
	}

	// DescribeLogDirs against the batches in the files (the active
	// segment may hold zeros written ahead of its data).
	var onDisk int64
	files, _ := filepath.Glob(filepath.Join(n.dir, "topics", "dr", "0", "*.log"))
	for _, f := range files {
		onDisk += batchBytes(t, f)
	}
	dirs, err := adm.DescribeLogDirs([]int32{0})
	if err != nil {
		t.Fatal(err)
	}
	var sarSize int64 = -1
	for _, d := range dirs[0] {
		for _, tp := range d.Topics {
			for _, p := range tp.Partitions {
				if tp.Topic == "dr" && p.PartitionID == 0 {
					sarSize = p.Size
				}
			}
		}
	}
	if sarSize != onDisk || onDisk == 0 {
		t.Fatalf("sarama DescribeLogDirs size %d, files hold %d", sarSize, onDisk)
	}
	kd, err := kadmClient(t, n.addr).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kSize int64 = -1
	kd.Each(func(d kadm.DescribedLogDir) {
		if p, ok := d.Topics["dr"][0]; ok {
			kSize = p.Size
		}
	})
	if kSize != onDisk {
		t.Fatalf("kadm DescribeLogDirs size %d, files hold %d", kSize, onDisk)
	}
}

// TestKcatCompression produces to a compacted topic with kcat using each
// codec librdkafka gates on the broker's API versions (lz4 and zstd), so
// a range that turned a feature off would fail here.
func TestKcatCompression(t *testing.T) {
	kcat := needKcat(t)
	n := startNode(t)
	compact := "compact"
	if _, err := kadmClient(t, n.addr).CreateTopic(ctxT(t, 10*time.Second), 1, 1, map[string]*string{"cleanup.policy": &compact}, "kc"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, codec := range []string{"lz4", "zstd", "snappy", "gzip"} {
		in := ""
		for i := 0; i < 5; i++ {
			line := codec + strconv.Itoa(i) + ":value-" + codec + strconv.Itoa(i)
			in += line + "\n"
			want = append(want, line)
		}
		runKcat(t, kcat, in, "-b", n.addr, "-P", "-t", "kc", "-p", "0", "-K", ":", "-X", "compression.codec="+codec, "-X", "acks=all")
	}
	out := runKcat(t, kcat, "", "-b", n.addr, "-C", "-t", "kc", "-p", "0", "-o", "beginning", "-e", "-f", "%k:%s\n")
	if got := strings.Split(strings.TrimSpace(out), "\n"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("kcat read back:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
}

// kcatPath returns kcat's path, "" when it is absent outside CI.
func kcatPath(t *testing.T) string {
	if _, err := exec.LookPath("kcat"); err != nil && os.Getenv("CI") != "true" {
		return ""
	}
	return needKcat(t)
}

// batchBytes is how many bytes of whole RecordBatches a segment file
// starts with: all of a sealed segment, and the data of the active one,
// which may be followed by zeros written ahead of it.
func batchBytes(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for n < len(b) {
		h, err := batch.ParseHeader(b[n:])
		if err != nil || h.Magic != 2 || h.Size() > len(b)-n {
			break
		}
		n += h.Size()
	}
	for _, c := range b[n:] {
		if c != 0 {
			t.Fatalf("%s: bytes other than zeros after its last batch, at %d", path, n)
		}
	}
	return int64(n)
}
