package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/storage/storagetest"
)

// kafka40Min is the lowest version Kafka 4.0 and 4.1 serve of each API
// Sluice serves (KIP-896 removed the older ones). Sluice's minimum must be
// at or below it, so that any client that works with Kafka 4.x works
// here; every served API must have a row (TestVersionRanges).
var kafka40Min = map[kmsg.Key]int16{
	kmsg.Produce: 3, kmsg.Fetch: 4, kmsg.ListOffsets: 1, kmsg.Metadata: 0,
	kmsg.OffsetCommit: 2, kmsg.OffsetFetch: 1, kmsg.FindCoordinator: 0,
	kmsg.JoinGroup: 0, kmsg.Heartbeat: 0, kmsg.LeaveGroup: 0, kmsg.SyncGroup: 0,
	kmsg.DescribeGroups: 0, kmsg.ListGroups: 0, kmsg.ApiVersions: 0,
	kmsg.ConsumerGroupHeartbeat: 0, kmsg.ConsumerGroupDescribe: 0,
	kmsg.CreateTopics: 2, kmsg.DeleteTopics: 1, kmsg.DeleteRecords: 0,
	kmsg.InitProducerID: 0, kmsg.OffsetForLeaderEpoch: 2, kmsg.DescribeConfigs: 1,
	kmsg.AlterConfigs: 0, kmsg.DescribeLogDirs: 1, kmsg.CreatePartitions: 0,
	kmsg.DeleteGroups: 0, kmsg.ElectLeaders: 0, kmsg.IncrementalAlterConfigs: 0,
	kmsg.AlterPartitionAssignments: 0, kmsg.ListPartitionReassignments: 0,
	kmsg.OffsetDelete: 0, kmsg.DescribeClientQuotas: 0, kmsg.AlterClientQuotas: 0,
	kmsg.DescribeCluster: 0,
	// Served since Kafka 4.1's versions were matched (issue 23); their
	// minimums in Kafka 4.1.
	kmsg.AlterReplicaLogDirs: 1, kmsg.CreateDelegationToken: 1, kmsg.RenewDelegationToken: 1,
	kmsg.ExpireDelegationToken: 1, kmsg.DescribeDelegationToken: 1, kmsg.DescribeQuorum: 0,
	kmsg.UpdateFeatures: 0, kmsg.UnregisterBroker: 0, kmsg.ListConfigResources: 0,
	kmsg.DescribeTopicPartitions: 0, kmsg.AddRaftVoter: 0, kmsg.RemoveRaftVoter: 0,
	kmsg.CreateACLs: 1, kmsg.DescribeACLs: 1, kmsg.DeleteACLs: 1, kmsg.DescribeProducers: 0,
	kmsg.DescribeTransactions: 0, kmsg.ListTransactions: 0, kmsg.SASLHandshake: 0,
	kmsg.SASLAuthenticate: 0, kmsg.DescribeUserSCRAMCredentials: 0, kmsg.AlterUserSCRAMCredentials: 0,
	kmsg.AddPartitionsToTxn: 0, kmsg.AddOffsetsToTxn: 0, kmsg.EndTxn: 0, kmsg.TxnOffsetCommit: 0,
	kmsg.WriteTxnMarkers: 1,
	// Client telemetry (KIP-714).
	kmsg.GetTelemetrySubscriptions: 0, kmsg.PushTelemetry: 0,
	// Share groups (KIP-932): Kafka 4.1 removed the early-access v0.
	kmsg.ShareGroupHeartbeat: 1, kmsg.ShareGroupDescribe: 1, kmsg.ShareFetch: 1, kmsg.ShareAcknowledge: 1,
	kmsg.DescribeShareGroupOffsets: 0, kmsg.AlterShareGroupOffsets: 0, kmsg.DeleteShareGroupOffsets: 0,
}

// clientRange is a span of versions a client can send of one API; the
// client and Sluice must share at least one.
type clientRange struct {
	client string
	key    kmsg.Key
	lo, hi int16
}

// clientRanges records what common clients send. librdkafka's rows are
// its feature checks (rdkafka_feature.c): a feature is on only when the
// broker's range overlaps each of them, and MsgVer2, ZSTD, LZ4, the
// balanced consumer, time-based offsets and the idempotent producer must
// stay on.
var clientRanges = []clientRange{
	{"librdkafka MsgVer2", kmsg.Produce, 3, 3},
	{"librdkafka MsgVer2", kmsg.Fetch, 4, 4},
	{"librdkafka ZSTD", kmsg.Produce, 7, 7},
	{"librdkafka ZSTD", kmsg.Fetch, 10, 10},
	{"librdkafka LZ4", kmsg.FindCoordinator, 0, 0},
	{"librdkafka BrokerBalancedConsumer", kmsg.OffsetCommit, 1, 2},
	{"librdkafka BrokerBalancedConsumer", kmsg.OffsetFetch, 1, 1},
	{"librdkafka BrokerBalancedConsumer", kmsg.JoinGroup, 0, 0},
	{"librdkafka BrokerBalancedConsumer", kmsg.SyncGroup, 0, 0},
	{"librdkafka BrokerBalancedConsumer", kmsg.Heartbeat, 0, 0},
	{"librdkafka BrokerBalancedConsumer", kmsg.LeaveGroup, 0, 0},
	{"librdkafka OffsetTime", kmsg.ListOffsets, 1, 1},
	{"librdkafka IdempotentProducer", kmsg.InitProducerID, 0, 0},
	{"librdkafka ApiVersion", kmsg.ApiVersions, 0, 0},
	// sarama picks versions from Config.Version (no negotiation):
	// V0_10_0_0 sends ListOffsets v0 and JoinGroup v0; V2_1_0_0 (its
	// default) Produce v7 and Fetch v10.
	{"sarama V0_10_0_0", kmsg.ListOffsets, 0, 0},
	{"sarama V0_10_0_0", kmsg.JoinGroup, 0, 0},
	{"sarama V0_10_0_0", kmsg.Metadata, 0, 1},
	{"sarama V2_1_0_0", kmsg.Produce, 7, 7},
	{"sarama V2_1_0_0", kmsg.Fetch, 10, 10},
	{"sarama V2_1_0_0", kmsg.DescribeConfigs, 1, 2},
	{"sarama V2_1_0_0", kmsg.AlterConfigs, 0, 1},
	{"sarama V2_1_0_0", kmsg.DeleteRecords, 0, 1},
	{"sarama V2_1_0_0", kmsg.DescribeLogDirs, 0, 1},
	// kafka-go picks among fixed versions by what the broker advertises.
	{"kafka-go", kmsg.Fetch, 2, 10},
	{"kafka-go", kmsg.Produce, 2, 7},
	{"kafka-go", kmsg.ListOffsets, 1, 1},
	{"kafka-go", kmsg.Metadata, 1, 6},
	{"kafka-go", kmsg.JoinGroup, 1, 2},
	{"kafka-go", kmsg.OffsetFetch, 1, 1},
	// kafkajs negotiates the highest common version up to its own max.
	{"kafkajs", kmsg.Produce, 0, 7},
	{"kafkajs", kmsg.Fetch, 0, 11},
	{"kafkajs", kmsg.ListOffsets, 0, 3},
	{"kafkajs", kmsg.Metadata, 0, 6},
	{"kafkajs", kmsg.JoinGroup, 0, 5},
	{"kafkajs", kmsg.DescribeConfigs, 0, 2},
	{"kafkajs", kmsg.AlterConfigs, 0, 1},
	{"kafkajs", kmsg.DeleteRecords, 0, 1},
	{"kafkajs", kmsg.CreatePartitions, 0, 1},
	{"kafkajs", kmsg.DeleteGroups, 0, 1},
	// kafka-python 2.x for a 0.11+ broker.
	{"kafka-python", kmsg.Produce, 3, 7},
	{"kafka-python", kmsg.Fetch, 4, 10},
	{"kafka-python", kmsg.ListOffsets, 1, 4},
	{"kafka-python", kmsg.JoinGroup, 0, 2},
}

// TestVersionRanges audits the advertised version ranges: minimums at or
// below Kafka 4.0's, every API Kafka's admin tools call present, and an
// overlap with every client range above.
func TestVersionRanges(t *testing.T) {
	for key := range apis {
		if _, ok := kafka40Min[kmsg.Key(key)]; !ok {
			t.Errorf("%s is served but has no row in kafka40Min", kmsg.NameForKey(key))
		}
	}
	for key, min40 := range kafka40Min {
		e, ok := apis[key.Int16()]
		if !ok {
			t.Errorf("%s is not served", key.Name())
			continue
		}
		if e.min > min40 {
			t.Errorf("%s min v%d is above Kafka 4.0's v%d", key.Name(), e.min, min40)
		}
	}
	for _, c := range clientRanges {
		e, ok := apis[c.key.Int16()]
		if !ok || c.hi < e.min || c.lo > e.max {
			t.Errorf("%s: %s v%d-%d shares no version with Sluice's v%d-%d", c.client, c.key.Name(), c.lo, c.hi, e.min, e.max)
		}
	}
}

// TestListOffsetsV0 answers the old-style offsets list that clients
// configured for Kafka 0.10.0 read.
func TestListOffsetsV0(t *testing.T) {
	tb := startTest(t)
	if err := tb.b.CreateTopic(t.Context(), "old", 1, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := tb.b.AppendBatch(t.Context(), "old", 0, storagetest.MakeBatch(2, 10, 1), -1); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, tb.addr)
	for _, tc := range []struct {
		ts   int64
		max  int32
		want []int64
	}{{-1, 1, []int64{6}}, {-2, 1, []int64{0}}, {-1, 0, nil}} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 0
		req.ReplicaID = -1
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "old", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: tc.ts, MaxNumOffsets: tc.max}}}}
		p := c.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || !slices.Equal(p.OldStyleOffsets, tc.want) {
			t.Fatalf("ts %d max %d: code %d offsets %v, want %v", tc.ts, tc.max, p.ErrorCode, p.OldStyleOffsets, tc.want)
		}
	}
}
