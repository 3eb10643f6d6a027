package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSimpleCommitAndFetchVersions(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.PartitionExists = func(topic string, p int32) bool { return topic != "missing" }
	})
	md := "note"
	big := string(make([]byte, DefaultMaxMetadataBytes+1))
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation = "solo", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: 0, Offset: 5, LeaderEpoch: 3, Metadata: &md},
			{Partition: 1, Offset: 7, Metadata: &big},
		}},
		{Topic: "missing", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
	}
	resp := h.c.OffsetCommit(nil, req)
	want := [][]int16{{0, errOffsetMetadataTooLarge}, {errUnknownTopicOrPartition}}
	for i, rt := range resp.Topics {
		for k, rp := range rt.Partitions {
			if rp.ErrorCode != want[i][k] {
				t.Fatalf("topic %d partition %d: code %d, want %d", i, k, rp.ErrorCode, want[i][k])
			}
		}
	}

	// v1: per-partition offsets, no top-level error field.
	f := h.c.OffsetFetch(nil, &kmsg.OffsetFetchRequest{Version: 1, Group: "solo",
		Topics: []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}})
	ps := f.Topics[0].Partitions
	if ps[0].Offset != 5 || *ps[0].Metadata != "note" || ps[1].Offset != -1 {
		t.Fatalf("v1 fetch: %+v", f)
	}
	// v5: leader epoch; v2+ nil topics means all.
	f = h.c.OffsetFetch(nil, &kmsg.OffsetFetchRequest{Version: 5, Group: "solo"})
	if len(f.Topics) != 1 || len(f.Topics[0].Partitions) != 1 || f.Topics[0].Partitions[0].LeaderEpoch != 3 {
		t.Fatalf("v5 fetch all: %+v", f)
	}
	// v8: many groups at once, unknown groups give -1.
	f = h.c.OffsetFetch(nil, &kmsg.OffsetFetchRequest{Version: 8, Groups: []kmsg.OffsetFetchRequestGroup{
		{Group: "solo", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}},
		{Group: "other", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}},
		{Group: ""},
	}})
	if len(f.Groups) != 3 || f.Groups[0].Topics[0].Partitions[0].Offset != 5 ||
		f.Groups[1].Topics[0].Partitions[0].Offset != -1 || f.Groups[2].ErrorCode != errInvalidGroupID {
		t.Fatalf("v8 fetch: %+v", f)
	}
	// A commit with a generation to a group that does not exist is stale.
	if got := h.commit("nogroup", "m", 3, "t", 0, 1); got != errIllegalGeneration {
		t.Fatalf("commit to unknown group with generation: %d", got)
	}
	// A failed write is reported and changes nothing.
	h.st.mu.Lock()
	h.st.failNext = errInjected
	h.st.mu.Unlock()
	if got := h.commit("solo", "", -1, "t", 0, 99); got != errCoordinatorNotAvailable {
		t.Fatalf("commit with a failing store: %d", got)
	}
	if got := h.fetch("solo", "t", 0); got != 5 {
		t.Fatalf("offset after a failed commit: %d", got)
	}
}

func TestDeleteGroupsAndOffsetDelete(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("busy", 1)
	if got := h.commit("busy", ids[0], gen, "t", 0, 3); got != 0 {
		t.Fatalf("commit: %d", got)
	}
	h.commit("idle", "", -1, "t", 0, 4)
	h.commit("idle", "", -1, "u", 0, 5)

	r := h.c.DeleteGroups(nil, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"busy", "idle", "ghost"}})
	want := []int16{errNonEmptyGroup, 0, errGroupIDNotFound}
	for i, g := range r.Groups {
		if g.ErrorCode != want[i] {
			t.Fatalf("DeleteGroups %s: %d, want %d", g.Group, g.ErrorCode, want[i])
		}
	}
	if h.fetch("idle", "t", 0) != -1 {
		t.Fatal("deleted group's offsets remain")
	}

	// The member's group subscribes to "range" metadata that is not a
	// consumer subscription, so it is subscribed to nothing it can name:
	// give it a real subscription first.
	od := h.c.OffsetDelete(nil, &kmsg.OffsetDeleteRequest{Group: "busy", Topics: []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}})
	if od.ErrorCode != 0 || od.Topics[0].Partitions[0].ErrorCode != 0 || h.fetch("busy", "t", 0) != -1 {
		t.Fatalf("OffsetDelete of an unsubscribed topic: %+v", od)
	}
	sub := kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}
	h2 := newHarness(t, nil)
	req := mkJoinReq("sub", "", joinOpt{version: 3})
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub.AppendTo(nil)}}
	j := &joinCall{}
	h2.c.join(Client{ID: "c"}, req, j.reply)
	jr := j.get()
	h2.sync("sub", jr.MemberID, jr.Generation, nil)
	h2.commit("sub", jr.MemberID, jr.Generation, "t", 0, 1)
	od = h2.c.OffsetDelete(nil, &kmsg.OffsetDeleteRequest{Group: "sub", Topics: []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}})
	if od.Topics[0].Partitions[0].ErrorCode != errGroupSubscribedToTopic || h2.fetch("sub", "t", 0) != 1 {
		t.Fatalf("OffsetDelete of a subscribed topic: %+v", od)
	}
}

func TestOffsetsRetention(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetention = time.Hour
		c.RetentionCheckInterval = time.Minute
	})
	ids, gen := h.stableGroup("managed", 1)
	h.commit("managed", ids[0], gen, "t", 0, 10)
	h.commit("simple", "", -1, "t", 0, 20)

	// A group with members keeps its offsets however old they are.
	for i := 0; i < 200; i++ { // 30 minutes of heartbeats
		h.clock.Advance(9 * time.Second)
		if got := h.heartbeat("managed", ids[0], gen, ""); got != 0 {
			t.Fatalf("heartbeat %d: %d", i, got)
		}
	}
	if h.fetch("managed", "t", 0) != 10 {
		t.Fatal("offsets of a group with members expired")
	}
	h.c.LeaveGroup(nil, &kmsg.LeaveGroupRequest{Version: 1, Group: "managed", MemberID: ids[0]})
	if h.state("managed") != "Empty" {
		t.Fatal("group not empty after its member left")
	}
	// The simple commit is now 30+ minutes old: it expires an hour after
	// the commit; the managed group's offsets an hour after it emptied.
	h.clock.Advance(35 * time.Minute)
	if h.fetch("simple", "t", 0) != -1 {
		t.Fatal("simple commit outlived the retention")
	}
	if h.fetch("managed", "t", 0) != 10 {
		t.Fatal("managed group's offsets expired before an hour of emptiness")
	}
	h.clock.Advance(30 * time.Minute)
	if h.fetch("managed", "t", 0) != -1 {
		t.Fatal("managed group's offsets outlived the retention")
	}
	lg := h.c.ListGroups(nil, &kmsg.ListGroupsRequest{Version: 4})
	if len(lg.Groups) != 0 {
		t.Fatalf("expired groups still listed: %+v", lg.Groups)
	}
	// Tombstones reached the store: a reopened coordinator agrees.
	h.reopen()
	if h.fetch("managed", "t", 0) != -1 || h.fetch("simple", "t", 0) != -1 {
		t.Fatal("expired offsets came back after reopen")
	}
}

func TestFindCoordinatorAndListGroups(t *testing.T) {
	h := newHarness(t, nil)
	r := h.c.FindCoordinator(nil, &kmsg.FindCoordinatorRequest{Version: 3, CoordinatorKey: "g"})
	if r.ErrorCode != 0 || r.NodeID != 1 || r.Host != "127.0.0.1" || r.Port != 9092 {
		t.Fatalf("v3: %+v", r)
	}
	r = h.c.FindCoordinator(nil, &kmsg.FindCoordinatorRequest{Version: 4, CoordinatorKeys: []string{"a", "b"}})
	if len(r.Coordinators) != 2 || r.Coordinators[1].Key != "b" || r.Coordinators[1].NodeID != 1 {
		t.Fatalf("v4: %+v", r)
	}
	r = h.c.FindCoordinator(nil, &kmsg.FindCoordinatorRequest{Version: 3, CoordinatorKey: "tx", CoordinatorType: 1})
	if r.ErrorCode != 0 || r.NodeID != 1 {
		t.Fatalf("transaction coordinator: %+v", r)
	}
	h.c.cfg.NoTransactions = true
	r = h.c.FindCoordinator(nil, &kmsg.FindCoordinatorRequest{Version: 3, CoordinatorKey: "tx", CoordinatorType: 1})
	h.c.cfg.NoTransactions = false
	if r.ErrorCode != errCoordinatorNotAvailable {
		t.Fatalf("transaction coordinator with NoTransactions: %+v", r)
	}
	h.stableGroup("stable", 1)
	h.commit("empty", "", -1, "t", 0, 1)
	all := h.c.ListGroups(nil, &kmsg.ListGroupsRequest{Version: 3})
	if len(all.Groups) != 2 {
		t.Fatalf("ListGroups: %+v", all)
	}
	f := h.c.ListGroups(nil, &kmsg.ListGroupsRequest{Version: 4, StatesFilter: []string{"stable"}})
	if len(f.Groups) != 1 || f.Groups[0].Group != "stable" || f.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups filtered: %+v", f)
	}
}

func TestCommitVersionFields(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RetentionCheckInterval = time.Minute })
	ids, gen := h.stableGroup("g", 1)
	tests := []struct {
		name    string
		version int16
		member  string
		gen     int32
		want    int16
	}{
		// v0 carries no generation or member: a simple commit, refused
		// while the group has members.
		{"v0 to a group with members", 0, ids[0], gen, errUnknownMemberID},
		{"v1 member commit", 1, ids[0], gen, 0},
		{"v1 stale generation", 1, ids[0], gen - 1, errIllegalGeneration},
		{"v8 member commit", 8, ids[0], gen, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := commitReq("g", tt.member, tt.gen, "t", 1)
			req.Version = tt.version
			if got := h.c.OffsetCommit(nil, req).Topics[0].Partitions[0].ErrorCode; got != tt.want {
				t.Fatalf("code %d, want %d", got, tt.want)
			}
		})
	}
	// v2-v4 retention time sets an explicit expiry.
	req := commitReq("solo", "", -1, "t", 9)
	req.Version = 2
	req.RetentionTimeMillis = (5 * time.Minute).Milliseconds()
	mustCommit(t, h.c, req)
	h.clock.Advance(4 * time.Minute)
	if h.fetch("solo", "t", 0) != 9 {
		t.Fatal("offset expired before its retention time")
	}
	h.clock.Advance(2 * time.Minute)
	if h.fetch("solo", "t", 0) != -1 {
		t.Fatal("offset outlived its retention time")
	}
}

func TestJoinGroupContextCancel(t *testing.T) {
	h := newHarness(t, nil)
	ids, _ := h.stableGroup("g", 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The leader's rejoin waits for the follower; its caller gives up.
	r := h.c.JoinGroup(ctx, Client{ID: "c"}, mkJoinReq("g", ids[0], joinOpt{}))
	if r.ErrorCode != errRebalanceInProgress {
		t.Fatalf("canceled JoinGroup: %+v", r)
	}
	// The member stays in the rebalance: the follower's rejoin completes it.
	f := h.join("g", ids[1], joinOpt{}).get()
	if f == nil || f.ErrorCode != 0 || f.LeaderID != ids[0] {
		t.Fatalf("follower's rejoin: %+v", f)
	}
}
