package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// addConsumerGroupSamples adds the KIP-848 APIs' requests to authzSamples.
func addConsumerGroupSamples(add func(kmsg.Request, int16, bool)) {
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "g", "m-authz", 10000
	hb.SubscribedTopicRegex = kmsg.StringPtr("t.*")
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	add(hb, 1, true)
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"g"}
	add(d, 1, true)
}

// TestConsumerGroupAPIsAdvertised: ApiVersions carries the KIP-848 APIs
// and the offset APIs at the versions that carry member epochs.
func TestConsumerGroupAPIsAdvertised(t *testing.T) {
	b := newBroker(t, t.TempDir())
	resp := dialRaw(t, b.Addr()).roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	want := map[int16][2]int16{
		kmsg.ConsumerGroupHeartbeat.Int16(): {0, 1},
		kmsg.ConsumerGroupDescribe.Int16():  {0, 1},
		kmsg.OffsetCommit.Int16():           {0, 9},
		kmsg.OffsetFetch.Int16():            {0, 9},
	}
	for _, k := range resp.ApiKeys {
		if r, ok := want[k.ApiKey]; ok {
			if r != [2]int16{k.MinVersion, k.MaxVersion} {
				t.Errorf("%s: v%d-%d, want v%d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, r[0], r[1])
			}
			delete(want, k.ApiKey)
		}
	}
	for k := range want {
		t.Errorf("%s not advertised", kmsg.NameForKey(k))
	}
	// A join to a topic that exists answers with its assignment by id.
	if err := b.CreateTopic(t.Context(), "t", 3, nil); err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version = 1
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "g", "m1", 10000
	hb.SubscribedTopicNames = []string{"t"}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r := dialRaw(t, b.Addr()).roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || r.Assignment == nil || len(r.Assignment.Topics) != 1 || len(r.Assignment.Topics[0].Partitions) != 3 {
		t.Fatalf("join: %+v (%v)", r, kerr.ErrorForCode(r.ErrorCode))
	}
	if r.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("heartbeat interval %d, want Kafka's default 5000", r.HeartbeatIntervalMillis)
	}
}
