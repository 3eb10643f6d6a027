package groups

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinSyncReachesStable(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 3)
	if gen < 1 {
		t.Fatalf("generation %d, want >= 1", gen)
	}
	if got := h.state("g"); got != "Stable" {
		t.Fatalf("state %s, want Stable", got)
	}
	for _, id := range ids {
		if code := h.heartbeat("g", id, gen, ""); code != 0 {
			t.Fatalf("heartbeat of %s: code %d", id, code)
		}
		s := h.sync("g", id, gen, nil).get()
		if s.ErrorCode != 0 || string(s.MemberAssignment) != "a-"+id {
			t.Fatalf("SyncGroup in Stable for %s: %+v", id, s)
		}
	}
	d := h.c.DescribeGroups(nil, &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g"}}).Groups[0]
	if len(d.Members) != 3 || d.Protocol != "range" || d.ProtocolType != "consumer" {
		t.Fatalf("DescribeGroups: %+v", d)
	}
}

func TestMemberIDRequiredOnlyFromV4(t *testing.T) {
	h := newHarness(t, nil)
	for _, v := range []int16{0, 1, 2, 3} {
		req := mkJoinReq("old", "", joinOpt{})
		req.Version = v
		j := &joinCall{}
		h.c.join(Client{ID: "c"}, req, j.reply)
		r := j.get()
		// A v0-3 join goes straight into the rebalance: the first member of
		// an empty group completes it at once; later ones wait.
		if r != nil && r.ErrorCode != 0 {
			t.Fatalf("v%d JoinGroup: code %d", v, r.ErrorCode)
		}
	}
	r := h.join("new", "", joinOpt{version: 4}).get()
	if r == nil || r.ErrorCode != errMemberIDRequired || r.MemberID == "" {
		t.Fatalf("v4 JoinGroup: %+v", r)
	}
	// The handed-out id holds the group's rebalance open until it joins or
	// its session times out.
	if got := h.state("new"); got != "Empty" {
		t.Fatalf("state after MEMBER_ID_REQUIRED: %s", got)
	}
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t, nil)
	_, _ = h.stableGroup("g", 1)
	tests := []struct {
		name  string
		group string
		mod   func(*kmsg.JoinGroupRequest)
		want  int16
	}{
		{"empty group id", "", nil, errInvalidGroupID},
		{"session too short", "x", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 10 }, errInvalidSessionTimeout},
		{"session too long", "x", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 1 << 30 }, errInvalidSessionTimeout},
		{"no protocols", "x", func(r *kmsg.JoinGroupRequest) { r.Protocols = nil }, errInconsistentGroupProto},
		{"other protocol type", "g", func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "connect" }, errInconsistentGroupProto},
		{"no common protocol", "g", func(r *kmsg.JoinGroupRequest) {
			r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "sticky"}}
		}, errInconsistentGroupProto},
		{"unknown member", "g", func(r *kmsg.JoinGroupRequest) { r.MemberID = "nobody" }, errUnknownMemberID},
		{"unknown member, unknown group", "nogroup", func(r *kmsg.JoinGroupRequest) { r.MemberID = "nobody" }, errUnknownMemberID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := mkJoinReq(tt.group, "", joinOpt{})
			if tt.mod != nil {
				tt.mod(req)
			}
			j := &joinCall{}
			h.c.join(Client{ID: "c"}, req, j.reply)
			if r := j.get(); r == nil || r.ErrorCode != tt.want {
				t.Fatalf("got %+v, want code %d", r, tt.want)
			}
		})
	}
}

func TestFencing(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	leader, follower := ids[0], ids[1]
	tests := []struct {
		name   string
		member string
		gen    int32
		want   int16
	}{
		{"current member and generation", follower, gen, 0},
		{"stale generation", follower, gen - 1, errIllegalGeneration},
		{"future generation", follower, gen + 1, errIllegalGeneration},
		{"unknown member", "ghost", gen, errUnknownMemberID},
		{"simple commit while the group has members", "", -1, errUnknownMemberID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.commit("g", tt.member, tt.gen, "t", 0, 10); got != tt.want {
				t.Fatalf("OffsetCommit: code %d, want %d", got, tt.want)
			}
			if tt.member != "" {
				if got := h.heartbeat("g", tt.member, tt.gen, ""); got != tt.want {
					t.Fatalf("Heartbeat: code %d, want %d", got, tt.want)
				}
			}
		})
	}

	// A new member makes the group prepare a rebalance: heartbeats say so,
	// commits of the current generation are still accepted (members
	// commit before revoking), SyncGroup is refused.
	newID, newJoin := h.newMember("g", joinOpt{})
	if got := h.heartbeat("g", follower, gen, ""); got != errRebalanceInProgress {
		t.Fatalf("heartbeat while preparing: %d", got)
	}
	if got := h.commit("g", follower, gen, "t", 0, 11); got != 0 {
		t.Fatalf("commit while preparing: %d", got)
	}
	if r := h.sync("g", follower, gen, nil).get(); r.ErrorCode != errRebalanceInProgress {
		t.Fatalf("sync while preparing: %+v", r)
	}
	lj := h.join("g", leader, joinOpt{})
	fj := h.join("g", follower, joinOpt{})
	r := newJoin.get()
	if r == nil || r.ErrorCode != 0 || r.Generation != gen+1 {
		t.Fatalf("new member's join: %+v", r)
	}
	if lj.get().Generation != gen+1 || fj.get().Generation != gen+1 {
		t.Fatal("rejoined members did not get the new generation")
	}
	// CompletingRebalance: commits are refused until the leader syncs;
	// the old generation is fenced.
	if got := h.commit("g", follower, gen+1, "t", 0, 12); got != errRebalanceInProgress {
		t.Fatalf("commit while completing: %d", got)
	}
	if got := h.heartbeat("g", follower, gen, ""); got != errIllegalGeneration {
		t.Fatalf("old-generation heartbeat while completing: %d", got)
	}
	ns := h.sync("g", newID, gen+1, nil)
	if ns.get() != nil {
		t.Fatal("follower's SyncGroup answered before the leader's")
	}
	h.sync("g", lj.get().LeaderID, gen+1, map[string]string{newID: "mine"})
	if r := ns.get(); r == nil || r.ErrorCode != 0 || string(r.MemberAssignment) != "mine" {
		t.Fatalf("new member's assignment: %+v", r)
	}
	if got := h.commit("g", follower, gen, "t", 0, 13); got != errIllegalGeneration {
		t.Fatalf("stale-generation commit after the rebalance: %d", got)
	}
	if got := h.fetch("g", "t", 0); got != 11 {
		t.Fatalf("committed offset %d, want 11", got)
	}
}

func TestSessionTimeoutRemovesMember(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	leader, follower := ids[0], ids[1]
	// The leader keeps heartbeating; the follower goes silent.
	for i := 0; i < 3; i++ {
		h.clock.Advance(3 * time.Second)
		if code := h.heartbeat("g", leader, gen, ""); code != 0 {
			t.Fatalf("leader heartbeat %d: code %d", i, code)
		}
	}
	h.clock.Advance(time.Second + time.Millisecond) // the 10 s session has run out
	if got := h.heartbeat("g", follower, gen, ""); got != errUnknownMemberID {
		t.Fatalf("expired member's heartbeat: %d, want UNKNOWN_MEMBER_ID", got)
	}
	if got := h.heartbeat("g", leader, gen, ""); got != errRebalanceInProgress {
		t.Fatalf("survivor's heartbeat: %d, want REBALANCE_IN_PROGRESS", got)
	}
	r := h.join("g", leader, joinOpt{}).get()
	if r == nil || r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin after expiry: %+v", r)
	}
}

func TestRebalanceTimeoutDropsLaggards(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 3)
	_, nj := h.newMember("g", joinOpt{})
	lj := h.join("g", ids[0], joinOpt{})
	// ids[1] and ids[2] never rejoin; they still heartbeat until they learn
	// of the rebalance, but the rebalance timeout (30 s) ends the wait.
	for i := 0; i < 5; i++ {
		h.clock.Advance(5 * time.Second)
		for _, id := range ids[1:] {
			if got := h.heartbeat("g", id, gen, ""); got != errRebalanceInProgress {
				t.Fatalf("laggard heartbeat during the rebalance: %d", got)
			}
		}
	}
	h.clock.Advance(4 * time.Second)
	if nj.get() != nil {
		t.Fatal("rebalance completed before its timeout")
	}
	h.clock.Advance(2 * time.Second)
	r := lj.get()
	if r == nil || r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 2 {
		t.Fatalf("leader's join after the rebalance timeout: %+v", r)
	}
	if got := h.heartbeat("g", ids[1], gen, ""); got != errUnknownMemberID {
		t.Fatalf("laggard heartbeat: %d", got)
	}
}

func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	h := newHarness(t, nil)
	o := joinOpt{instance: "inst-1"}
	id1, j1 := h.newMember("g", o)
	r := j1.get()
	if r.ErrorCode != 0 {
		t.Fatalf("static join: %+v", r)
	}
	id2, j2 := h.newMember("g", joinOpt{})
	h.join("g", id1, o) // the leader rejoins for the new member
	gen := j2.get().Generation
	h.sync("g", id2, gen, nil)
	h.sync("g", id1, gen, map[string]string{id1: "A", id2: "B"})
	if h.state("g") != "Stable" {
		t.Fatal("not stable")
	}

	// The static member restarts: a JoinGroup with no member id and the
	// same instance id takes its place in the same generation.
	r = h.join("g", "", o).get()
	if r == nil || r.ErrorCode != 0 || r.Generation != gen || r.MemberID == id1 {
		t.Fatalf("static rejoin: %+v", r)
	}
	if h.state("g") != "Stable" {
		t.Fatalf("static rejoin caused a rebalance: %s", h.state("g"))
	}
	if !r.SkipAssignment || r.LeaderID != r.MemberID {
		t.Fatalf("the rejoined static leader must skip assignment: %+v", r)
	}
	s := h.sync("g", r.MemberID, gen, map[string]string{"x": "y"}).get()
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "A" {
		t.Fatalf("static member's assignment after restart: %+v", s)
	}
	if got := h.heartbeat("g", id2, gen, ""); got != 0 {
		t.Fatalf("other member disturbed: %d", got)
	}
	// The old incarnation is fenced.
	if got := h.heartbeat("g", id1, gen, "inst-1"); got != errFencedInstanceID {
		t.Fatalf("old static member's heartbeat: %d", got)
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation, req.InstanceID = "g", id1, gen, &o.instance
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if got := h.c.OffsetCommit(nil, req).Topics[0].Partitions[0].ErrorCode; got != errFencedInstanceID {
		t.Fatalf("old static member's commit: %d", got)
	}
}

func TestLeaveGroup(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	// v0-2 name one member and report its error at the top level.
	r := h.c.LeaveGroup(nil, &kmsg.LeaveGroupRequest{Version: 1, Group: "g", MemberID: "ghost"})
	if r.ErrorCode != errUnknownMemberID {
		t.Fatalf("leave of unknown member: %+v", r)
	}
	r = h.c.LeaveGroup(nil, &kmsg.LeaveGroupRequest{Version: 1, Group: "g", MemberID: ids[1]})
	if r.ErrorCode != 0 {
		t.Fatalf("leave: %+v", r)
	}
	if got := h.heartbeat("g", ids[0], gen, ""); got != errRebalanceInProgress {
		t.Fatalf("after a leave the group must rebalance; heartbeat %d", got)
	}
	// v3+ list members; per-member codes.
	inst := "nope"
	r = h.c.LeaveGroup(nil, &kmsg.LeaveGroupRequest{Version: 5, Group: "g", Members: []kmsg.LeaveGroupRequestMember{
		{MemberID: ids[0]}, {InstanceID: &inst},
	}})
	if r.ErrorCode != 0 || len(r.Members) != 2 || r.Members[0].ErrorCode != 0 || r.Members[1].ErrorCode != errUnknownMemberID {
		t.Fatalf("v5 leave: %+v", r)
	}
	if got := h.state("g"); got != "Empty" {
		t.Fatalf("state after everyone left: %s", got)
	}
}

func TestProtocolSelection(t *testing.T) {
	h := newHarness(t, nil)
	a, aj := h.newMember("g", joinOpt{protocols: []string{"range", "roundrobin"}})
	_ = aj.get()
	b, bj := h.newMember("g", joinOpt{protocols: []string{"roundrobin", "sticky"}})
	c, cj := h.newMember("g", joinOpt{protocols: []string{"sticky", "roundrobin", "range"}})
	_ = b
	_ = c
	aj = h.join("g", a, joinOpt{protocols: []string{"range", "roundrobin"}})
	bj = h.join("g", b, joinOpt{protocols: []string{"roundrobin", "sticky"}})
	for _, j := range []*joinCall{aj, bj, cj} {
		r := j.get()
		if r == nil || r.ErrorCode != 0 || *r.Protocol != "roundrobin" {
			t.Fatalf("want roundrobin (the only protocol all support), got %+v", r)
		}
	}
}

func TestSyncFailureRebalances(t *testing.T) {
	h := newHarness(t, nil)
	id, j := h.newMember("g", joinOpt{})
	gen := j.get().Generation
	h.st.mu.Lock()
	h.st.failNext = errInjected
	h.st.mu.Unlock()
	s := h.sync("g", id, gen, map[string]string{id: "x"}).get()
	if s == nil || s.ErrorCode != errCoordinatorNotAvailable {
		t.Fatalf("sync with a failing store: %+v", s)
	}
	if got := h.state("g"); got != "PreparingRebalance" {
		t.Fatalf("state after a failed persist: %s", got)
	}
}

func TestCloseReleasesWaiters(t *testing.T) {
	h := newHarness(t, nil)
	ids, _ := h.stableGroup("g", 2)
	j := h.join("g", ids[0], joinOpt{}) // waits for ids[1]
	if j.get() != nil {
		t.Fatal("join should wait for the other member")
	}
	if err := h.c.Close(); err != nil {
		t.Fatal(err)
	}
	if r := j.get(); r == nil || r.ErrorCode != errCoordinatorNotAvailable {
		t.Fatalf("blocked join after Close: %+v", r)
	}
	if err := h.c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := h.heartbeat("g", ids[0], 1, ""); got != errCoordinatorNotAvailable {
		t.Fatalf("heartbeat after Close: %d", got)
	}
}

func TestPendingMemberIDExpires(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 1)
	// A new member gets its id but never comes back; the leader rejoins.
	r := h.join("g", "", joinOpt{}).get()
	if r.ErrorCode != errMemberIDRequired {
		t.Fatalf("first join: %+v", r)
	}
	h.c.LeaveGroup(nil, &kmsg.LeaveGroupRequest{Version: 1, Group: "g", MemberID: "x"}) // no effect
	lj := h.join("g", ids[0], joinOpt{})
	// The leader's rejoin of a Stable group rebalances; the pending id
	// holds the join open for its session timeout (10 s).
	if lj.get() != nil {
		t.Fatal("rebalance completed while a member id was pending")
	}
	h.clock.Advance(10 * time.Second)
	if r := lj.get(); r == nil || r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("join after the pending id expired: %+v", r)
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.InitialRebalanceDelay = 3 * time.Second })
	_, a := h.newMember("g", joinOpt{})
	h.clock.Advance(time.Second)
	_, b := h.newMember("g", joinOpt{})
	if a.get() != nil || b.get() != nil {
		t.Fatal("an empty group's first rebalance completed before its initial delay")
	}
	h.clock.Advance(2 * time.Second)
	ra, rb := a.get(), b.get()
	if ra == nil || rb == nil || ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("after the delay both members share generation 1: %+v %+v", ra, rb)
	}
}

func TestEmptiedGroupPersistsEmpty(t *testing.T) {
	h := newHarness(t, nil)
	ids, gen := h.stableGroup("g", 2)
	if got := h.commit("g", ids[0], gen, "t", 0, 42); got != 0 {
		t.Fatal(got)
	}
	// Reopened while Stable, the group keeps its members.
	h.reopen()
	if got := h.state("g"); got != "Stable" {
		t.Fatalf("state after reopen: %s", got)
	}
	for _, id := range ids {
		h.c.LeaveGroup(nil, &kmsg.LeaveGroupRequest{Version: 1, Group: "g", MemberID: id})
	}
	// Close waits for the background write of the emptied group.
	h.reopen()
	if got := h.state("g"); got != "Empty" {
		t.Fatalf("state of an emptied group after reopen: %s", got)
	}
	if got := h.fetch("g", "t", 0); got != 42 {
		t.Fatalf("offset after reopen: %d", got)
	}
}
