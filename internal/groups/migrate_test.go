package groups

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/vfs"
)

// classicMember joins group as a one-member classic group with consumer
// protocol metadata subscribing to topics, and syncs with all of part
// 0..n-1 of the first topic; it returns the member id and generation.
func classicMember(t *testing.T, h *harness, group string, parts int32, topics ...string) (string, int32) {
	t.Helper()
	md := kmsg.ConsumerMemberMetadata{Topics: topics}
	o := joinOpt{meta: md.AppendTo(nil)}
	id, j := h.newMember(group, o)
	r := j.get()
	if r == nil || r.ErrorCode != 0 {
		t.Fatalf("classic join: %+v", r)
	}
	a := assignment{}
	for p := range parts {
		a.add(topics[0], p)
	}
	if s := h.sync(group, id, r.Generation, map[string]string{id: string(encodeAssignment(a))}).get(); s == nil || s.ErrorCode != 0 {
		t.Fatalf("classic sync: %+v", s)
	}
	return id, r.Generation
}

// TestMigrationPolicy: a classic group upgrades only when the policy
// allows it, keeping its members' assignments at their generation; a
// group whose last consumer-protocol member leaves downgrades only when
// the policy allows it.
func TestMigrationPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy            string
		upgrade, downgrde bool
	}{
		{MigrationBidirectional, true, true},
		{MigrationUpgrade, true, false},
		{MigrationDowngrade, false, false},
		{MigrationDisabled, false, false},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			ts := &topicSet{}
			ts.set("t", 4)
			h := newHarness(t, func(c *Config) {
				consumerCfg(ts)(c)
				c.Consumer.MigrationPolicy = tc.policy
			})
			old, gen := classicMember(t, h, "g", 4, "t")
			a := newCmem(t, h.c, ts, "g", "a", "t")
			code := a.send(a.req(0))
			if !tc.upgrade {
				r := h.c.ConsumerGroupHeartbeat(nil, Client{}, a.req(0), nil)
				if code != errGroupIDNotFound || r.ErrorMessage == nil || *r.ErrorMessage != "Cannot upgrade classic group g to consumer group because online upgrade is disabled." {
					t.Fatalf("consumer join with policy %s: code %d %v, want GROUP_ID_NOT_FOUND saying the upgrade is disabled", tc.policy, code, r.ErrorMessage)
				}
				if h.state("g") != "Stable" {
					t.Fatalf("classic group after a refused upgrade: %s", h.state("g"))
				}
				return
			}
			if code != 0 {
				t.Fatalf("consumer join: code %d", code)
			}
			// The classic member is in the consumer group at its
			// generation with its assignment; it must join again.
			d := describe(t, h.c, "g")
			if len(d.Members) != 2 {
				t.Fatalf("members after the upgrade: %s", descString(d))
			}
			for _, m := range d.Members {
				if m.MemberID == old && (m.MemberType != 0 || m.MemberEpoch != gen || len(m.Assignment.TopicPartitions) != 1) {
					t.Fatalf("converted member: %+v", m)
				}
			}
			if code := h.heartbeat("g", old, gen, ""); code != errRebalanceInProgress {
				t.Fatalf("classic heartbeat after the upgrade: %d, want REBALANCE_IN_PROGRESS", code)
			}
			// It rejoins (eagerly, owning nothing) and gets its half.
			md := kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}
			r := h.join("g", old, joinOpt{meta: md.AppendTo(nil)}).get()
			if r == nil || r.ErrorCode != 0 || r.Generation <= gen {
				t.Fatalf("classic rejoin: %+v", r)
			}
			s := h.sync("g", old, r.Generation, nil).get()
			if got := decodeAssignment(s.MemberAssignment).count(); s.ErrorCode != 0 || got != 2 {
				t.Fatalf("classic sync in the consumer group: code %d, %d partitions, want 2", s.ErrorCode, got)
			}
			if code := h.heartbeat("g", old, r.Generation, ""); code != 0 {
				t.Fatalf("classic heartbeat at its epoch: %d", code)
			}
			if code := h.heartbeat("g", old, r.Generation-1, ""); code != errIllegalGeneration {
				t.Fatalf("classic heartbeat at an old generation: %d", code)
			}
			// The consumer-protocol member leaves.
			a.send(a.req(-1))
			lg := h.c.ListGroups(nil, &kmsg.ListGroupsRequest{Version: 5})
			typ := lg.Groups[0].GroupType
			if tc.downgrde {
				if typ != "classic" || h.state("g") != "PreparingRebalance" {
					t.Fatalf("after the last consumer member left: %s group in %s, want a classic group rebalancing", typ, h.state("g"))
				}
				// The classic member carries on in the classic group.
				r := h.join("g", old, joinOpt{meta: md.AppendTo(nil)}).get()
				if r == nil || r.ErrorCode != 0 || r.LeaderID != old {
					t.Fatalf("classic rejoin after the downgrade: %+v", r)
				}
				return
			}
			if typ != "consumer" {
				t.Fatalf("policy %s downgraded the group (%s)", tc.policy, typ)
			}
		})
	}
}

// TestUpgradeRefusedMessages: the heartbeat says why a classic group
// cannot upgrade.
func TestUpgradeRefusedMessages(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 2)
	h := newHarness(t, consumerCfg(ts))
	h.stableGroup("g", 1) // metadata that is not the consumer protocol's
	a := newCmem(t, h.c, ts, "g", "a", "t")
	r := h.c.ConsumerGroupHeartbeat(nil, Client{}, a.req(0), nil)
	if r.ErrorCode != errGroupIDNotFound || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "the embedded consumer protocol is malformed") {
		t.Fatalf("upgrade of a group with undecodable subscriptions: %d %v", r.ErrorCode, r.ErrorMessage)
	}
}

// TestClassicJoinsConsumerGroup: a classic member joins a consumer group
// with members (a mixed group) and, under the downgrade policy, the
// group turns classic when the consumer-protocol member leaves.
func TestClassicJoinsConsumerGroup(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 4)
	h := newHarness(t, func(c *Config) {
		consumerCfg(ts)(c)
		c.Consumer.MigrationPolicy = MigrationDowngrade
	})
	a := newCmem(t, h.c, ts, "g", "a", "t")
	a.join()
	md := kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}
	o := joinOpt{meta: md.AppendTo(nil)}
	first := h.join("g", "", o).get()
	if first.ErrorCode != errMemberIDRequired {
		t.Fatalf("first classic join: %+v", first)
	}
	r := h.join("g", first.MemberID, o).get()
	if r.ErrorCode != 0 || r.LeaderID != "" {
		t.Fatalf("classic join to a consumer group: %+v", r)
	}
	// a still holds every partition: the classic member gets none until
	// a revokes.
	if s := h.sync("g", r.MemberID, r.Generation, nil).get(); s.ErrorCode != 0 || decodeAssignment(s.MemberAssignment).count() != 0 {
		t.Fatalf("classic sync before a revoked: %+v", s)
	}
	settle(t, a)
	r = h.join("g", r.MemberID, o).get()
	s := h.sync("g", r.MemberID, r.Generation, nil).get()
	if n := decodeAssignment(s.MemberAssignment).count(); n != 2 || a.count() != 2 {
		t.Fatalf("after a revoked: classic member has %d, a has %d, want 2 each", n, a.count())
	}
	// The mixed group survives a reopen: the classic member is still
	// classic, at its epoch, with its session.
	h.reopen()
	a.c = h.c
	if c, k := countTypes(describe(t, h.c, "g")); c != 1 || k != 1 {
		t.Fatalf("after reopen: %d classic, %d consumer members", c, k)
	}
	if code := h.heartbeat("g", r.MemberID, r.Generation, ""); code != 0 {
		t.Fatalf("classic heartbeat after reopen: %d", code)
	}
	a.send(a.req(-1))
	if lg := h.c.ListGroups(nil, &kmsg.ListGroupsRequest{Version: 5}); lg.Groups[0].GroupType != "classic" {
		t.Fatalf("after the consumer member left: %+v", lg.Groups)
	}
}

func countTypes(d kmsg.ConsumerGroupDescribeResponseGroup) (classic, consumer int) {
	for _, m := range d.Members {
		if m.MemberType == 0 {
			classic++
		} else {
			consumer++
		}
	}
	return classic, consumer
}

// groupSnapshot names what a coordinator holds of group: a consumer
// group's description, or a classic group's state and members.
func groupSnapshot(t *testing.T, c *Coordinator, group string) string {
	t.Helper()
	if d := describe(t, c, group); d.ErrorCode == 0 {
		return "consumer " + descString(d)
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	dg := c.DescribeGroups(nil, req).Groups[0]
	var ids []string
	for _, m := range dg.Members {
		ids = append(ids, m.MemberID)
	}
	return fmt.Sprintf("classic %s %v", dg.State, ids)
}

// TestMigrationCrashAtEveryWrite takes a group through an upgrade, the
// mixed group's classic rejoins and a downgrade over the real internal
// log, and after every step checks that a crash (unsynced data dropped, a
// torn tail) recovers what the step acknowledged: the classic group as
// synced, the consumer group (with its classic member) exactly, and after
// the downgrade no consumer state (the classic rebalance it began starts
// again from the members' next joins, as any unfinished classic rebalance
// does).
func TestMigrationCrashAtEveryWrite(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 4)
	fs, clock := vfs.NewMem(), newFakeClock()
	c := openLog(t, fs, clock, consumerCfg(ts))
	h := &harness{t: t, clock: clock, c: c}
	var old string
	var gen int32
	a := newCmem(t, c, ts, "g", "a", "t")
	md := kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}
	rejoin := func() {
		r := h.join("g", old, joinOpt{meta: md.AppendTo(nil)}).get()
		if r == nil || r.ErrorCode != 0 {
			t.Fatalf("classic rejoin: %+v", r)
		}
		gen = r.Generation
		if s := h.sync("g", old, gen, nil).get(); s == nil || s.ErrorCode != 0 {
			t.Fatalf("classic sync: %+v", s)
		}
	}
	steps := []struct {
		name string
		run  func()
		// exact: the crashed copy holds what memory holds; else it must
		// hold no consumer state.
		exact bool
	}{
		{"classic group", func() { old, gen = classicMember(t, h, "g", 4, "t") }, true},
		{"upgrade", a.join, true},
		{"classic rejoin", rejoin, true},
		{"consumer revokes", func() { settle(t, a) }, true},
		{"classic takes its half", rejoin, true},
		{"downgrade", func() { a.send(a.req(-1)) }, false},
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, s := range steps {
		s.run()
		want := groupSnapshot(t, c, "g")
		crashed := fs.CrashClone(vfs.CrashOptions{Tear: true, Rand: rng})
		c2 := openLog(t, crashed, clock, consumerCfg(ts))
		got := groupSnapshot(t, c2, "g")
		switch {
		case s.exact && got != want:
			t.Fatalf("%s: after crash\n%s\nwant\n%s", s.name, got, want)
		case !s.exact && strings.HasPrefix(got, "consumer"):
			t.Fatalf("%s: after crash the consumer group is back:\n%s", s.name, got)
		}
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if want := "classic PreparingRebalance [" + old + "]"; groupSnapshot(t, c, "g") != want {
		t.Fatalf("after the downgrade: %s, want %s", groupSnapshot(t, c, "g"), want)
	}
}

// TestStaticClassicMemberInConsumerGroup: a static classic member is
// carried into the consumer group by an upgrade; restarted with a new
// member id and its instance id it takes its place and assignment, the
// old id is fenced, and a downgrade keeps it static.
func TestStaticClassicMemberInConsumerGroup(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 4)
	h := newHarness(t, consumerCfg(ts))
	md := kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}
	o := joinOpt{instance: "i1", meta: md.AppendTo(nil)}
	r := h.join("g", "", o).get()
	if r == nil || r.ErrorCode != 0 {
		t.Fatalf("static classic join: %+v", r)
	}
	old := r.MemberID
	all := assignment{}
	for p := range int32(4) {
		all.add("t", p)
	}
	if s := h.sync("g", old, r.Generation, map[string]string{old: string(encodeAssignment(all))}).get(); s.ErrorCode != 0 {
		t.Fatalf("sync: %+v", s)
	}
	a := newCmem(t, h.c, ts, "g", "a", "t")
	if code := a.send(a.req(0)); code != 0 {
		t.Fatalf("upgrade of a group with a static member: %d", code)
	}
	// The static member restarts: a new member id with its instance id.
	r2 := h.join("g", "", o).get()
	if r2 == nil || r2.ErrorCode != 0 || r2.MemberID == old {
		t.Fatalf("static rejoin with a new id: %+v", r2)
	}
	d := describe(t, h.c, "g")
	var inst []string
	for _, m := range d.Members {
		if m.InstanceID != nil {
			inst = append(inst, m.MemberID+"="+*m.InstanceID)
		}
	}
	if len(d.Members) != 2 || len(inst) != 1 || inst[0] != r2.MemberID+"=i1" {
		t.Fatalf("after the static restart: %s", descString(d))
	}
	if code := h.heartbeat("g", old, r.Generation, "i1"); code != errFencedInstanceID {
		t.Fatalf("the old id's heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}
	s := h.sync("g", r2.MemberID, r2.Generation, nil).get()
	if s.ErrorCode != 0 || decodeAssignment(s.MemberAssignment).count() == 0 {
		t.Fatalf("the restarted static member's sync: %+v", s)
	}
	a.send(a.req(-1))
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{"g"}
	dg := h.c.DescribeGroups(nil, req).Groups[0]
	if len(dg.Members) != 1 || dg.Members[0].MemberID != r2.MemberID || dg.Members[0].InstanceID == nil || *dg.Members[0].InstanceID != "i1" {
		t.Fatalf("after the downgrade: %+v", dg.Members)
	}
}
