package broker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

func (tb *testBroker) admin() *kadm.Client {
	return kadm.NewClient(tb.client())
}

func sp(s string) *string { return &s }

// topicConfigOf describes one topic config through kadm.
func topicConfigOf(t *testing.T, adm *kadm.Client, topic, name string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(context.Background(), topic)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs: %v", err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("DescribeTopicConfigs %s: %v / %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("%s: config %s not described", topic, name)
	return kadm.Config{}
}

// TestAlterAndDescribeTopicConfigs creates a compacted topic, alters its
// configs incrementally and wholesale, and checks values, sources,
// persistence across a restart and the effect on a live partition.
func TestAlterAndDescribeTopicConfigs(t *testing.T) {
	tb := startTest(t, AutoCreateTopics(false))
	ctx := context.Background()
	adm := tb.admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": sp("compact")}, "cfg"); err != nil {
		t.Fatal(err)
	}
	if c := topicConfigOf(t, adm, "cfg", "cleanup.policy"); c.MaybeValue() != "compact" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("cleanup.policy = %q from %v", c.MaybeValue(), c.Source)
	}
	if c := topicConfigOf(t, adm, "cfg", "retention.ms"); c.Source != kmsg.ConfigSourceDefaultConfig || c.MaybeValue() != "604800000" ||
		len(c.Synonyms) == 0 || c.Synonyms[len(c.Synonyms)-1].Key != "log.retention.ms" {
		t.Fatalf("retention.ms = %q from %v, synonyms %+v", c.MaybeValue(), c.Source, c.Synonyms)
	}

	// Incremental: set a small segment size, append to the list config.
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: sp("1024")},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: sp("delete")},
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: sp("2000")},
	}, "cfg")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("AlterTopicConfigs: %v / %v %s", err, rs[0].Err, rs[0].ErrMessage)
	}
	if c := topicConfigOf(t, adm, "cfg", "cleanup.policy"); c.MaybeValue() != "compact,delete" {
		t.Fatalf("after APPEND cleanup.policy = %q", c.MaybeValue())
	}
	// The new segment size applies to the running partition.
	cl := tb.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 20; i++ {
		r := &kgo.Record{Topic: "cfg", Key: []byte{byte(i)}, Value: make([]byte, 200)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if n := tb.b.lookup("cfg").parts[0].Log().Segments(); n < 3 {
		t.Fatalf("segment.bytes=1024 left %d segments", n)
	}
	// max.message.bytes too.
	big := &kgo.Record{Topic: "cfg", Key: []byte("k"), Value: make([]byte, 5000)}
	if err := cl.ProduceSync(ctx, big).FirstErr(); !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Fatalf("produce above the altered max.message.bytes: %v", err)
	}

	// Bad values and unknown configs are refused and change nothing.
	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: sp("soon")}}, "cfg")
	if err != nil || !errorsIs(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("bad retention.ms: %v / %v", err, rs[0].Err)
	}
	rs, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: sp("1")}}, "cfg")
	if !errorsIs(rs[0].Err, kerr.InvalidConfig) {
		t.Fatalf("APPEND to a non-list config: %v", rs[0].Err)
	}
	rs, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: sp("1")}}, "nope")
	if !errorsIs(rs[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", rs[0].Err)
	}
	if c := topicConfigOf(t, adm, "cfg", "segment.bytes"); c.MaybeValue() != "1024" {
		t.Fatalf("segment.bytes = %q after refused alters", c.MaybeValue())
	}

	// Survives a restart.
	tb.restart()
	adm = tb.admin()
	if c := topicConfigOf(t, adm, "cfg", "segment.bytes"); c.MaybeValue() != "1024" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("after restart segment.bytes = %q from %v", c.MaybeValue(), c.Source)
	}

	// Non-incremental: the state given replaces everything.
	rs, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: sp("3600000")}}, "cfg")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("AlterTopicConfigsState: %v / %v", err, rs[0].Err)
	}
	if c := topicConfigOf(t, adm, "cfg", "segment.bytes"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes kept %q from %v after a whole-state alter without it", c.MaybeValue(), c.Source)
	}
	if c := topicConfigOf(t, adm, "cfg", "cleanup.policy"); c.MaybeValue() != "delete" {
		t.Fatalf("cleanup.policy = %q after a whole-state alter without it", c.MaybeValue())
	}
	// DELETE returns a config to its default.
	rs, _ = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "cfg")
	if rs[0].Err != nil {
		t.Fatal(rs[0].Err)
	}
	if c := topicConfigOf(t, adm, "cfg", "retention.ms"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms from %v after DELETE", c.Source)
	}
}

func errorsIs(err error, target *kerr.Error) bool {
	ke, ok := err.(*kerr.Error)
	if !ok {
		return false
	}
	return ke.Code == target.Code
}

// TestBrokerConfigs describes broker 0, alters a cluster-wide default
// and checks that topics inherit it with Kafka's sources and synonyms,
// and that read-only configs are refused.
func TestBrokerConfigs(t *testing.T) {
	tb := startTest(t)
	ctx := context.Background()
	adm := tb.admin()
	rcs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kadm.Config{}
	for _, c := range rcs[0].Configs {
		got[c.Key] = c
	}
	for _, k := range []string{"inter.broker.protocol.version", "broker.id", "log.dirs", "log.retention.ms", "log.cleanup.policy", "message.max.bytes", "num.partitions", "log.cleaner.io.max.bytes.per.second"} {
		if _, ok := got[k]; !ok {
			t.Errorf("broker config %s not described", k)
		}
	}
	if c := got["inter.broker.protocol.version"]; !strings.HasPrefix(c.MaybeValue(), KafkaVersion) {
		t.Errorf("inter.broker.protocol.version = %q", c.MaybeValue())
	}

	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "inherit"); err != nil {
		t.Fatal(err)
	}
	// Cluster default ("" resource: kadm with no brokers).
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: sp("7200000")}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("AlterBrokerConfigs default: %v / %v", err, rs[0].Err)
	}
	c := topicConfigOf(t, adm, "inherit", "retention.ms")
	if c.MaybeValue() != "7200000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("inherited retention.ms = %q from %v", c.MaybeValue(), c.Source)
	}
	// Per broker wins over the cluster default.
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: sp("3600000")}}, 0)
	if err != nil || rs[0].Err != nil {
		t.Fatalf("AlterBrokerConfigs 0: %v / %v", err, rs[0].Err)
	}
	c = topicConfigOf(t, adm, "inherit", "retention.ms")
	if c.MaybeValue() != "3600000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || len(c.Synonyms) != 3 {
		t.Fatalf("retention.ms = %q from %v, synonyms %+v", c.MaybeValue(), c.Source, c.Synonyms)
	}
	if tb.b.lookup("inherit").conf.retentionMs != 3600000 {
		t.Fatal("the topic in effect did not take the broker default")
	}
	// Read-only and unknown configs, bad values.
	for _, tc := range []struct {
		name, value string
		code        *kerr.Error
	}{
		{"broker.id", "3", kerr.InvalidRequest},
		{"no.such.config", "1", kerr.InvalidConfig},
		{"log.segment.bytes", "12", kerr.InvalidConfig},
	} {
		rs, _ := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: tc.name, Value: sp(tc.value)}}, 0)
		if !errorsIs(rs[0].Err, tc.code) || rs[0].ErrMessage == "" {
			t.Errorf("%s=%s: %v %q; want %v", tc.name, tc.value, rs[0].Err, rs[0].ErrMessage, tc.code)
		}
	}
	tb.restart()
	adm = tb.admin()
	if c := topicConfigOf(t, adm, "inherit", "retention.ms"); c.MaybeValue() != "3600000" {
		t.Fatalf("after restart retention.ms = %q", c.MaybeValue())
	}
	rcs, err = adm.DescribeBrokerConfigs(ctx)
	if err != nil || len(rcs) != 1 || len(rcs[0].Configs) != 1 || rcs[0].Configs[0].Key != "log.retention.ms" {
		t.Fatalf("cluster-default describe: %v %+v", err, rcs)
	}
}

// TestDeleteRecords moves the start offset into the middle of the log,
// checks ListOffsets, Fetch below it, a consumer from the start, and
// that it survives a restart.
func TestDeleteRecords(t *testing.T) {
	tb := startTest(t)
	ctx := context.Background()
	cl := tb.client(kgo.AllowAutoTopicCreation())
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(ctx, testRecord("dr", i)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := tb.admin()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 6})
	rs, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := rs.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 6 {
		t.Fatalf("DeleteRecords dr: %+v", r)
	}
	c := dialRaw(t, tb.addr)
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Version = 2
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "missing", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if p := c.roundTrip(dr).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DeleteRecords missing: %+v", p)
	}
	past := kadm.Offsets{}
	past.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 11})
	rs, _ = adm.DeleteRecords(ctx, past)
	if r, _ := rs.Lookup("dr", 0); !errorsIs(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("DeleteRecords past the HW: %+v", r)
	}
	// A produce response reports the log start offset beside the base
	// offset (the partition's writer reads it as it handles the append).
	if p := produceOne(dialRaw(t, tb.addr), "dr", storagetest.MakeBatch(1, 10, 1000)); p.ErrorCode != 0 || p.BaseOffset != 10 || p.LogStartOffset != 6 {
		t.Fatalf("produce after DeleteRecords: %v, base offset %d, log start %d; want 10 and 6", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, p.LogStartOffset)
	}
	check := func(when string) {
		t.Helper()
		so, err := tb.admin().ListStartOffsets(ctx, "dr")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := so.Lookup("dr", 0); o.Offset != 6 {
			t.Fatalf("%s: earliest offset %d, want 6", when, o.Offset)
		}
		c := dialRaw(t, tb.addr)
		resp := c.roundTrip(fetchReq(12, "dr", [16]byte{}, 5, 0)).(*kmsg.FetchResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 6 {
			t.Fatalf("%s: fetch below the start: %v, log start %d", when, kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
		}
		got := consumeAll(t, tb, "dr", 5)
		if got[0].Offset != 6 || string(got[0].Value) != string(testRecord("dr", 6).Value) {
			t.Fatalf("%s: consumer from the start got offset %d first", when, got[0].Offset)
		}
	}
	check("live")
	tb.restart()
	check("after restart")
}

// TestDescribeLogDirs checks partition sizes against the segment files.
func TestDescribeLogDirs(t *testing.T) {
	// No zeros written ahead: after a clean shutdown the active
	// segment's file then holds exactly its data, as sealed ones always
	// do (the reported size is the data, as in Kafka). While the broker
	// runs, the newest bytes may still be in memory (the write-behind
	// tail), so the files are measured after Close.
	tb := startTest(t, withPreallocate(-1))
	ctx := context.Background()
	cl := tb.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := tb.admin()
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"segment.bytes": sp("1024")}, "ld"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		r := testRecord("ld", i)
		r.Partition = int32(i % 2)
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[int32]int64{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Fatalf("log dir %s: %v", d.Dir, d.Err)
		}
		abs, _ := filepath.Abs(tb.dir)
		if d.Dir != abs || d.TotalBytes <= 0 {
			t.Errorf("dir %q total %d; want %q", d.Dir, d.TotalBytes, abs)
		}
		for _, p := range d.Topics["ld"] {
			sizes[p.Partition] = p.Size
		}
	})
	if len(sizes) != 2 {
		t.Fatalf("described %d partitions of ld, want 2", len(sizes))
	}
	cl.Close()
	tb.stop()
	for p, size := range sizes {
		var onDisk int64
		files, _ := filepath.Glob(filepath.Join(tb.dir, "topics", "ld", strconv.Itoa(int(p)), "*.log"))
		for _, f := range files {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			onDisk += st.Size()
		}
		if len(files) < 2 || size != onDisk || size == 0 {
			t.Errorf("partition %d: size %d, %d bytes in %d segment files", p, size, onDisk, len(files))
		}
	}
}

// TestOneNodeAdminAPIs covers the replication-shaped APIs and quotas.
func TestOneNodeAdminAPIs(t *testing.T) {
	tb := startTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := tb.admin()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "one"); err != nil {
		t.Fatal(err)
	}
	cl := tb.client()
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, testRecord("one", i)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	hw := tb.b.lookup("one").parts[0].HighWatermark() + tb.b.lookup("one").parts[1].HighWatermark()

	// OffsetForLeaderEpoch: epoch 0 ends at the high watermark.
	c := dialRaw(t, tb.addr)
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version = 4
	oe.ReplicaID = -1
	oe.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "one", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{
		{Partition: 0, CurrentLeaderEpoch: 0, LeaderEpoch: 0},
		{Partition: 1, CurrentLeaderEpoch: -1, LeaderEpoch: 0},
		{Partition: 0, CurrentLeaderEpoch: 5, LeaderEpoch: 0},
		{Partition: 1, CurrentLeaderEpoch: -1, LeaderEpoch: 3},
		{Partition: 9, CurrentLeaderEpoch: -1, LeaderEpoch: 0},
	}}}
	ps := c.roundTrip(oe).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions
	if ps[0].ErrorCode != 0 || ps[0].LeaderEpoch != 0 || ps[1].ErrorCode != 0 || ps[0].EndOffset+ps[1].EndOffset != hw {
		t.Fatalf("epoch 0: %+v %+v (hw sum %d)", ps[0], ps[1], hw)
	}
	if ps[2].ErrorCode != kerr.UnknownLeaderEpoch.Code || ps[3].LeaderEpoch != -1 || ps[3].EndOffset != -1 || ps[4].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("bad epochs: %+v %+v %+v", ps[2], ps[3], ps[4])
	}

	// ElectLeaders: nothing to elect.
	set := kadm.TopicsSet{}
	set.Add("one", 0, 1)
	set.Add("ghost", 0)
	er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	if r := er["one"][0]; !errorsIs(r.Err, kerr.ElectionNotNeeded) {
		t.Fatalf("ElectLeaders one/0: %+v", r)
	}
	if r := er["ghost"][0]; !errorsIs(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("ElectLeaders ghost/0: %+v", r)
	}

	// Reassignments: [0] is the only assignment; none is ever listed.
	ar := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	ar.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "one", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{
		{Partition: 0, Replicas: []int32{0}}, {Partition: 1, Replicas: []int32{1, 2}}, {Partition: 0},
	}}}
	aps := c.roundTrip(ar).(*kmsg.AlterPartitionAssignmentsResponse).Topics[0].Partitions
	if aps[0].ErrorCode != 0 || aps[1].ErrorCode != kerr.InvalidReplicaAssignment.Code || aps[2].ErrorCode != kerr.NoReassignmentInProgress.Code {
		t.Fatalf("AlterPartitionAssignments: %+v", aps)
	}
	lr, err := adm.ListPartitionReassignments(ctx, nil)
	if err != nil || len(lr) != 0 {
		t.Fatalf("ListPartitionReassignments: %v %+v", err, lr)
	}

	// Quotas: none described; a set one is described; a bad one is
	// refused with its reason (the quota tests cover the rest).
	dq, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 1}})
	if err != nil || len(dq) != 0 {
		t.Fatalf("DescribeClientQuotas: %v %+v", err, dq)
	}
	aq, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: sp("x")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1000}},
	}, {
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id", Name: sp("y")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: -1}},
	}})
	if err != nil || len(aq) != 2 || aq[0].Err != nil || !errorsIs(aq[1].Err, kerr.InvalidRequest) || !strings.Contains(aq[1].ErrMessage, "positive") {
		t.Fatalf("AlterClientQuotas: %v %+v", err, aq)
	}
	dq, err = adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 2}})
	if err != nil || len(dq) != 1 || len(dq[0].Values) != 1 || dq[0].Values[0].Value != 1000 {
		t.Fatalf("DescribeClientQuotas after the alter: %v %+v", err, dq)
	}
}
