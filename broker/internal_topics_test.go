package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// offsetsView is what a reader of __consumer_offsets learns: the latest
// committed offset of each group, topic and partition, and the groups
// whose metadata it saw.
type offsetsView struct {
	commits map[string]int64 // "group/topic/partition" -> offset
	groups  map[string]string
}

// waitOffsets consumes __consumer_offsets from its start with a franz-go
// consumer, decoding every record with kmsg, until the view it builds
// satisfies cond (each poll waits for new records: a long-poll fetch).
func waitOffsets(t *testing.T, tb *testBroker, what string, cond func(offsetsView) bool) offsetsView {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	v := offsetsView{commits: map[string]int64{}, groups: map[string]string{}}
	cl := tb.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{offsetsTopic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	for !cond(v) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: never seen in %s; last view %v", what, offsetsTopic, v)
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("consume %s: %v", offsetsTopic, err)
		}
		fs.EachRecord(func(r *kgo.Record) { decodeOffsetsRecord(t, r, v) })
	}
	return v
}

func decodeOffsetsRecord(t *testing.T, r *kgo.Record, v offsetsView) {
	t.Helper()
	if len(r.Key) < 2 {
		t.Fatalf("record at %d: key of %d bytes", r.Offset, len(r.Key))
	}
	switch binary.BigEndian.Uint16(r.Key) {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			t.Fatalf("offset key at %d: %v", r.Offset, err)
		}
		id := fmt.Sprintf("%s/%s/%d", k.Group, k.Topic, k.Partition)
		if r.Value == nil {
			delete(v.commits, id)
			return
		}
		var val kmsg.OffsetCommitValue
		if err := val.ReadFrom(r.Value); err != nil {
			t.Fatalf("offset value at %d: %v", r.Offset, err)
		}
		v.commits[id] = val.Offset
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			t.Fatalf("group key at %d: %v", r.Offset, err)
		}
		if r.Value == nil {
			delete(v.groups, k.Group)
			return
		}
		var val kmsg.GroupMetadataValue
		if err := val.ReadFrom(r.Value); err != nil {
			t.Fatalf("group value at %d: %v", r.Offset, err)
		}
		v.groups[k.Group] = val.ProtocolType
	default:
		t.Fatalf("record at %d: key version %d", r.Offset, binary.BigEndian.Uint16(r.Key))
	}
}

// TestConsumerOffsetsTopic: __consumer_offsets holds the group
// coordinator's commits and group metadata in Kafka's formats, readable
// with Fetch and ListOffsets; a franz-go consumer decoding it with kmsg
// sees every commit, before and after a restart; it is compacted,
// refuses produce, and cannot be deleted.
func TestConsumerOffsetsTopic(t *testing.T) {
	tb := startTest(t)
	ctx := t.Context()
	adm := kadm.NewClient(tb.client())
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	commit := func(group string, part int32, off int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.AddOffset("orders", part, off, -1)
		resp, err := adm.CommitOffsets(ctx, group, os)
		if err != nil || resp.Error() != nil {
			t.Fatalf("commit %s %d@%d: %v %v", group, part, off, err, resp.Error())
		}
		want[fmt.Sprintf("%s/orders/%d", group, part)] = off
	}
	for i := range 3 {
		commit("billing", int32(i), int64(10*i+1))
		commit("audit", int32(i), int64(100+i))
	}
	commit("billing", 0, 42) // a later commit of the same partition

	check := func(when string) {
		t.Helper()
		waitOffsets(t, tb, when+": every commit", func(v offsetsView) bool {
			for k := range v.commits {
				if _, ok := want[k]; !ok && !strings.HasPrefix(k, "members/") {
					t.Fatalf("%s: commit %s in %s, never made", when, k, offsetsTopic)
				}
			}
			for k, off := range want {
				if v.commits[k] != off {
					return false
				}
			}
			return true
		})
	}
	check("before restart")

	// A consumer group's join is recorded as its metadata.
	grp := tb.client(kgo.ConsumerGroup("members"), kgo.ConsumeTopics("orders"))
	go grp.PollFetches(ctx) // joins; returns when the client closes
	waitOffsets(t, tb, "group members' metadata", func(v offsetsView) bool { return v.groups["members"] == "consumer" })
	grp.Close()

	tb.restart()
	check("after restart")
	commit("audit", 2, 555)
	check("after a commit after restart")

	// ListOffsets, DescribeConfigs, produce, delete.
	adm = kadm.NewClient(tb.client())
	starts, err := adm.ListStartOffsets(ctx, offsetsTopic)
	if err != nil || starts.Error() != nil {
		t.Fatalf("start offsets: %v %v", err, starts.Error())
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := rcs.On(offsetsTopic, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range policy.Configs {
		if c.Key == "cleanup.policy" {
			found = c.MaybeValue() == "compact"
		}
	}
	if !found {
		t.Fatalf("%s configs: %+v", offsetsTopic, policy.Configs)
	}
	prod := tb.client(kgo.DefaultProduceTopic(offsetsTopic), kgo.RecordRetries(1))
	if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to %s: %v", offsetsTopic, err)
	}
	if _, err := adm.DeleteTopic(ctx, offsetsTopic); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("delete %s: %v", offsetsTopic, err)
	}
	if _, err := tb.b.AppendBatch(ctx, offsetsTopic, 0, nil, 1); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("AppendBatch to %s: %v", offsetsTopic, err)
	}
}

// TestConsumerOffsetsHidden: with authorization on, a principal without
// DESCRIBE on __consumer_offsets neither sees it listed nor reads it; a
// superuser does.
func TestConsumerOffsetsHidden(t *testing.T) {
	tb := saslTest(t, true)
	ctx := t.Context()
	listed := func(cl *kgo.Client) (bool, int16) {
		t.Helper()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		seen := false
		for _, mt := range resp.Topics {
			seen = seen || *mt.Topic == offsetsTopic
		}
		named := kmsg.NewPtrMetadataRequest()
		name := offsetsTopic
		named.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
		nr, err := named.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return seen, nr.Topics[0].ErrorCode
	}
	admin := saslClient(t, tb, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	if seen, code := listed(admin); !seen || code != 0 {
		t.Fatalf("the superuser: listed %v, by name %v", seen, kerr.ErrorForCode(code))
	}
	alice := saslClient(t, tb, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())
	if seen, code := listed(alice); seen || code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice without ACLs: listed %v, by name %v", seen, kerr.ErrorForCode(code))
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: offsetsTopic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1}}}}
	// kgo maps the request to the partition's leader through Metadata,
	// which already refuses it; either refusal will do.
	resp, err := lo.RequestWith(ctx, alice)
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && (err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code) {
		t.Fatalf("alice's ListOffsets: %+v, %v", resp, err)
	}
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	if resp, err := dtp.RequestWith(ctx, alice); err != nil || len(resp.Topics) != 0 {
		t.Fatalf("alice's DescribeTopicPartitions: %+v, %v", resp, err)
	}
}
