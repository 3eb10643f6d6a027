package broker

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPerGroupEpochMetrics: /metrics carries each group's epoch (a
// classic group's generation, a consumer group's group epoch), a
// consumer group's assignment epoch, and each group's rebalances.
func TestPerGroupEpochMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := newBroker(t, t.TempDir(), Registerer(reg))
	if err := b.CreateTopic(t.Context(), "t", 2, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, b.Addr())

	// A classic group: one member joins (JoinGroup v3 takes it at once)
	// and the leader syncs.
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version = 3
	j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = "old", 10000, 10000, "consumer"
	j.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0}}}
	jr := c.roundTrip(j).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		t.Fatalf("JoinGroup: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version = 2
	s.Group, s.Generation, s.MemberID = "old", jr.Generation, jr.MemberID
	s.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte{0}}}
	if sr := c.roundTrip(s).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		t.Fatalf("SyncGroup: %v", kerr.ErrorForCode(sr.ErrorCode))
	}

	// A consumer group: two members join.
	for _, id := range []string{"m1", "m2"} {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Version = 1
		hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "new", id, 10000
		hb.SubscribedTopicNames = []string{"t"}
		hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if r := c.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
			t.Fatalf("heartbeat %s: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
	}

	want := `
# HELP sluice_group_assignment_epoch The epoch of a consumer group's (KIP-848) target assignment.
# TYPE sluice_group_assignment_epoch gauge
sluice_group_assignment_epoch{group="new"} 2
# HELP sluice_group_epoch The group's epoch: a classic group's generation, a consumer group's (KIP-848) group epoch.
# TYPE sluice_group_epoch gauge
sluice_group_epoch{group="new",type="consumer"} 2
sluice_group_epoch{group="old",type="classic"} 1
# HELP sluice_group_rebalances_per_group_total The group's rebalances since the broker started: classic rebalances begun, consumer-group epoch bumps.
# TYPE sluice_group_rebalances_per_group_total counter
sluice_group_rebalances_per_group_total{group="new",type="consumer"} 1
sluice_group_rebalances_per_group_total{group="old",type="classic"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"sluice_group_epoch", "sluice_group_assignment_epoch", "sluice_group_rebalances_per_group_total"); err != nil {
		t.Fatal(err)
	}
}
