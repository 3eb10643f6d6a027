package groups

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/vfs"
)

// topicSet is a mutable set of topics for Config.Topics.
type topicSet struct {
	mu sync.Mutex // guards m
	m  map[string]TopicInfo
}

func (s *topicSet) set(name string, parts int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]TopicInfo{}
	}
	var id [16]byte
	copy(id[:], name)
	id[15] = 0x80
	s.m[name] = TopicInfo{ID: id, Partitions: parts}
}

func (s *topicSet) del(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, name)
}

func (s *topicSet) get() map[string]TopicInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]TopicInfo, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

func (s *topicSet) name(id [16]byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, ti := range s.m {
		if ti.ID == id {
			return n
		}
	}
	return ""
}

func consumerCfg(ts *topicSet) func(*Config) {
	return func(c *Config) {
		c.Topics = ts.get
		c.Consumer.MinSessionTimeout = time.Second
		c.Consumer.SessionTimeout = 3 * time.Second
		c.Consumer.MinHeartbeatInterval = 100 * time.Millisecond
		c.Consumer.HeartbeatInterval = 500 * time.Millisecond
	}
}

// cmem is a simulated consumer-protocol member: it holds what the
// coordinator assigned and reports it back, revoking at once.
type cmem struct {
	t        testing.TB
	c        *Coordinator
	ts       *topicSet
	group    string
	id       string
	instance *string
	epoch    int32
	owned    map[string][]int32
	topics   []string
	regex    *string
	assignor *string
}

func newCmem(t testing.TB, c *Coordinator, ts *topicSet, group, id string, topics ...string) *cmem {
	return &cmem{t: t, c: c, ts: ts, group: group, id: id, topics: topics, owned: map[string][]int32{}}
}

func (m *cmem) req(epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = m.group, m.id, epoch
	r.InstanceID = m.instance
	r.RebalanceTimeoutMillis = 10000
	r.ServerAssignor = m.assignor
	if epoch == 0 {
		r.SubscribedTopicNames = m.topics
		if m.topics == nil && m.regex == nil {
			r.SubscribedTopicNames = []string{}
		}
		r.SubscribedTopicRegex = m.regex
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return r
	}
	r.RebalanceTimeoutMillis = -1
	ids := m.ts.get()
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, tn := range slices.Sorted(mapsKeys(m.owned)) {
		r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: ids[tn].ID, Partitions: slices.Clone(m.owned[tn])})
	}
	return r
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// beat sends one heartbeat and applies its answer; it returns the code.
func (m *cmem) beat() int16 {
	m.t.Helper()
	return m.send(m.req(m.epoch))
}

func (m *cmem) send(req *kmsg.ConsumerGroupHeartbeatRequest) int16 {
	m.t.Helper()
	r := m.c.ConsumerGroupHeartbeat(nil, Client{ID: "cl", Host: "/127.0.0.1"}, req, nil)
	if r.ErrorCode != 0 {
		return r.ErrorCode
	}
	if r.MemberID == nil || *r.MemberID != m.id {
		m.t.Fatalf("member id in answer: %v, want %s", r.MemberID, m.id)
	}
	m.epoch = r.MemberEpoch
	if r.Assignment != nil {
		m.owned = map[string][]int32{}
		for _, at := range r.Assignment.Topics {
			n := m.ts.name(at.TopicID)
			if n == "" {
				m.t.Fatalf("assignment names an unknown topic id %x", at.TopicID)
			}
			m.owned[n] = slices.Sorted(slices.Values(at.Partitions))
		}
	}
	return 0
}

func (m *cmem) join() {
	m.t.Helper()
	if code := m.send(m.req(0)); code != 0 {
		m.t.Fatalf("%s join: code %d", m.id, code)
	}
}

func (m *cmem) mustBeat() {
	m.t.Helper()
	if code := m.beat(); code != 0 {
		m.t.Fatalf("%s heartbeat: code %d", m.id, code)
	}
}

func (m *cmem) count() int {
	n := 0
	for _, ps := range m.owned {
		n += len(ps)
	}
	return n
}

// settle heartbeats every member until a round changes nothing, checking
// after every heartbeat that no partition is owned twice.
func settle(t *testing.T, ms ...*cmem) {
	t.Helper()
	for round := 0; round < 50; round++ {
		changed := false
		for _, m := range ms {
			before := fmt.Sprint(m.epoch, m.owned)
			m.mustBeat()
			changed = changed || fmt.Sprint(m.epoch, m.owned) != before
			noDoubleOwnership(t, ms)
		}
		if !changed {
			return
		}
	}
	t.Fatal("the group did not settle")
}

func noDoubleOwnership(t *testing.T, ms []*cmem) {
	t.Helper()
	seen := map[tp]string{}
	for _, m := range ms {
		for tn, ps := range m.owned {
			for _, p := range ps {
				if o, ok := seen[tp{tn, p}]; ok {
					t.Fatalf("%s/%d owned by %s and %s", tn, p, o, m.id)
				}
				seen[tp{tn, p}] = m.id
			}
		}
	}
}

// descString prints a described group with its pointers followed.
func descString(d kmsg.ConsumerGroupDescribeResponseGroup) string {
	s := fmt.Sprintf("code=%d state=%s epoch=%d assign=%d assignor=%s\n", d.ErrorCode, d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName)
	deref := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return *p
	}
	for _, m := range d.Members {
		s += fmt.Sprintf("  %s inst=%s rack=%s epoch=%d topics=%v regex=%s", m.MemberID, deref(m.InstanceID), deref(m.RackID), m.MemberEpoch, m.SubscribedTopics, deref(m.SubscribedTopicRegex))
		for _, a := range m.Assignment.TopicPartitions {
			s += fmt.Sprintf(" has %s%v", a.Topic, a.Partitions)
		}
		for _, a := range m.TargetAssignment.TopicPartitions {
			s += fmt.Sprintf(" wants %s%v", a.Topic, a.Partitions)
		}
		s += "\n"
	}
	return s
}

func describe(t testing.TB, c *Coordinator, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	r := c.ConsumerGroupDescribe(nil, &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{group}})
	return r.Groups[0]
}

func TestConsumerGroupJoinBalanceLeave(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 12)
	h := newHarness(t, consumerCfg(ts))
	a := newCmem(t, h.c, ts, "g", "a", "t")
	a.join()
	if a.epoch != 1 || a.count() != 12 {
		t.Fatalf("first member: epoch %d, %d partitions", a.epoch, a.count())
	}
	b := newCmem(t, h.c, ts, "g", "b", "t")
	b.join()
	// b's partitions are still a's: b gets the new epoch and nothing yet.
	if b.epoch != 2 || b.count() != 0 {
		t.Fatalf("second member: epoch %d, %d partitions", b.epoch, b.count())
	}
	c := newCmem(t, h.c, ts, "g", "c", "t")
	c.join()
	settle(t, a, b, c)
	for _, m := range []*cmem{a, b, c} {
		if m.count() != 4 || m.epoch != 3 {
			t.Fatalf("%s: %d partitions at epoch %d, want 4 at 3", m.id, m.count(), m.epoch)
		}
	}
	d := describe(t, h.c, "g")
	if d.ErrorCode != 0 || d.State != "Stable" || d.Epoch != 3 || d.AssignmentEpoch != 3 || d.AssignorName != "uniform" || len(d.Members) != 3 {
		t.Fatalf("describe: %+v", d)
	}
	// b leaves: its partitions go to a and c with no revocation from them.
	ownedA := fmt.Sprint(a.owned)
	r := h.c.ConsumerGroupHeartbeat(nil, Client{}, b.req(-1), nil)
	if r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	b.owned = nil
	a.mustBeat()
	if !ownsAll(a.owned, ownedA) {
		t.Fatalf("a lost partitions when b left: before %s, after %v", ownedA, a.owned)
	}
	settle(t, a, c)
	if a.count()+c.count() != 12 || a.count() != 6 {
		t.Fatalf("after leave: a %d, c %d", a.count(), c.count())
	}
	// The member that left is unknown now.
	if code := b.beat(); code != errUnknownMemberID {
		t.Fatalf("heartbeat after leave: %d", code)
	}
}

// ownsAll reports whether now holds, of topic t, every partition listed
// in before (fmt.Sprint of an assignment of topic t alone).
func ownsAll(now map[string][]int32, before string) bool {
	for _, p := range parseInts(before) {
		if !slices.Contains(now["t"], p) {
			return false
		}
	}
	return true
}

func parseInts(s string) []int32 {
	var out []int32
	cur, in := int32(0), false
	for _, r := range s {
		if r >= '0' && r <= '9' {
			cur, in = cur*10+int32(r-'0'), true
			continue
		}
		if in {
			out = append(out, cur)
		}
		cur, in = 0, false
	}
	return out
}

func TestConsumerGroupFencing(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 4)
	h := newHarness(t, consumerCfg(ts))
	a := newCmem(t, h.c, ts, "g", "a", "t")
	a.join()
	// Unknown group and member.
	x := newCmem(t, h.c, ts, "nope", "x", "t")
	x.epoch = 3
	if code := x.beat(); code != errGroupIDNotFound {
		t.Fatalf("unknown group: %d", code)
	}
	y := newCmem(t, h.c, ts, "g", "y", "t")
	y.epoch = 1
	if code := y.beat(); code != errUnknownMemberID {
		t.Fatalf("unknown member: %d", code)
	}
	// An epoch ahead is fenced; one behind is fenced unless it is the
	// previous epoch with owned partitions within the assignment.
	req := a.req(a.epoch + 1)
	if code := a.send(req); code != errFencedMemberEpoch {
		t.Fatalf("epoch ahead: %d", code)
	}
	b := newCmem(t, h.c, ts, "g", "b", "t")
	b.join()
	settle(t, a, b)
	prev := a.epoch - 1
	lost := a.req(prev) // the answer with the new epoch was lost
	if code := a.send(lost); code != 0 || a.epoch != 2 {
		t.Fatalf("previous epoch with owned subset: code %d epoch %d", code, a.epoch)
	}
	bad := a.req(prev)
	bad.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: ts.get()["t"].ID, Partitions: []int32{0, 1, 2, 3}}}
	if code := a.send(bad); code != errFencedMemberEpoch {
		t.Fatalf("previous epoch owning more than assigned: %d", code)
	}
	// A rejoin with the same member id is taken back in place.
	a.owned = map[string][]int32{}
	a.join()
	if a.epoch != 2 || a.count() != 2 {
		t.Fatalf("rejoin in place: epoch %d, %d partitions", a.epoch, a.count())
	}
	// Bad requests.
	for name, mod := range map[string]func(*kmsg.ConsumerGroupHeartbeatRequest){
		"no member id v1": func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" },
		"owned on join":   func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{}} },
		"no rebalance":    func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 },
		"no subscription": func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil },
		"epoch below -2":  func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 },
		"empty instance":  func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = kmsg.StringPtr("") },
	} {
		r := newCmem(t, h.c, ts, "g", "z", "t").req(0)
		mod(r)
		if code := h.c.ConsumerGroupHeartbeat(nil, Client{}, r, nil).ErrorCode; code != errInvalidRequest {
			t.Errorf("%s: code %d, want INVALID_REQUEST", name, code)
		}
	}
	r := newCmem(t, h.c, ts, "g", "z", "t").req(0)
	r.SubscribedTopicRegex = kmsg.StringPtr("(")
	if code := h.c.ConsumerGroupHeartbeat(nil, Client{}, r, nil).ErrorCode; code != errInvalidRegex {
		t.Errorf("bad regex: %d", code)
	}
	r = newCmem(t, h.c, ts, "g", "z", "t").req(0)
	r.ServerAssignor = kmsg.StringPtr("sticky")
	if code := h.c.ConsumerGroupHeartbeat(nil, Client{}, r, nil).ErrorCode; code != errUnsupportedAssignor {
		t.Errorf("unknown assignor: %d", code)
	}
	// v0: the coordinator names the member.
	r = newCmem(t, h.c, ts, "g", "", "t").req(0)
	r.Version = 0
	resp := h.c.ConsumerGroupHeartbeat(nil, Client{}, r, nil)
	if resp.ErrorCode != 0 || resp.MemberID == nil || *resp.MemberID == "" {
		t.Fatalf("v0 join: %+v", resp)
	}
}

func TestConsumerGroupRevokeBeforeReassign(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 6)
	h := newHarness(t, consumerCfg(ts))
	a := newCmem(t, h.c, ts, "g", "a", "t")
	a.join()
	b := newCmem(t, h.c, ts, "g", "b", "t")
	b.join()
	// a is asked to revoke three partitions; it keeps its epoch until it
	// reports them gone. A heartbeat without owned partitions changes
	// nothing.
	a.mustBeat()
	if a.count() != 3 || a.epoch != 1 {
		t.Fatalf("a after revoke request: %d partitions, epoch %d", a.count(), a.epoch)
	}
	// b still gets nothing: a has not confirmed.
	keep := a.owned
	a.owned = map[string][]int32{"t": {0, 1, 2, 3, 4, 5}}
	a.mustBeat() // reports all six: still revoking
	if a.epoch != 1 {
		t.Fatalf("a's epoch moved before it revoked: %d", a.epoch)
	}
	b.mustBeat()
	if b.count() != 0 {
		t.Fatalf("b got partitions a still holds: %v", b.owned)
	}
	a.owned = keep
	a.mustBeat()
	if a.epoch != 2 {
		t.Fatalf("a after revoking: epoch %d", a.epoch)
	}
	b.mustBeat()
	if b.count() != 3 || b.epoch != 2 {
		t.Fatalf("b after a revoked: %d partitions, epoch %d", b.count(), b.epoch)
	}
	if d := describe(t, h.c, "g"); d.State != "Stable" {
		t.Fatalf("state %s", d.State)
	}
}

func TestConsumerGroupTimeouts(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 4)
	h := newHarness(t, consumerCfg(ts))
	a := newCmem(t, h.c, ts, "g", "a", "t")
	a.join()
	b := newCmem(t, h.c, ts, "g", "b", "t")
	b.join()
	// a never confirms its revocation: its rebalance timeout (10 s) fences
	// it, while b keeps heartbeating.
	a.mustBeat()
	for i := 0; i < 12; i++ {
		h.clock.Advance(time.Second)
		a.owned = map[string][]int32{"t": {0, 1, 2, 3}} // it reports all it ever had
		a.send(a.req(a.epoch))
		b.mustBeat()
	}
	if code := a.beat(); code != errUnknownMemberID {
		t.Fatalf("a after its rebalance timeout: %d", code)
	}
	if b.count() != 4 {
		t.Fatalf("b after a was fenced: %v", b.owned)
	}
	// b stops heartbeating: its session (3 s) expires.
	h.clock.Advance(4 * time.Second)
	if code := b.beat(); code != errUnknownMemberID {
		t.Fatalf("b after its session expired: %d", code)
	}
	if d := describe(t, h.c, "g"); d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("group after expiry: %+v", d)
	}
}

func TestConsumerGroupStaticMember(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 6)
	h := newHarness(t, consumerCfg(ts))
	a := newCmem(t, h.c, ts, "g", "a1", "t")
	a.instance = kmsg.StringPtr("inst-a")
	a.join()
	b := newCmem(t, h.c, ts, "g", "b", "t")
	b.join()
	settle(t, a, b)
	epoch := describe(t, h.c, "g").Epoch
	had := fmt.Sprint(a.owned)
	// A new incarnation cannot take the instance id while a holds it.
	a2 := newCmem(t, h.c, ts, "g", "a2", "t")
	a2.instance = a.instance
	if code := a2.send(a2.req(0)); code != errUnreleasedInstanceID {
		t.Fatalf("join with a held instance id: %d", code)
	}
	// a leaves statically; the new incarnation takes its assignment over
	// without a new group epoch, and the old id is fenced.
	if r := h.c.ConsumerGroupHeartbeat(nil, Client{}, a.req(-2), nil); r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v", r)
	}
	b.mustBeat()
	if b.count() != 3 {
		t.Fatalf("b took the away member's partitions: %v", b.owned)
	}
	a2.join()
	if fmt.Sprint(a2.owned) != had {
		t.Fatalf("restarted static member got %v, had %s", a2.owned, had)
	}
	if d := describe(t, h.c, "g"); d.Epoch != epoch || len(d.Members) != 2 {
		t.Fatalf("group after static rejoin: epoch %d (was %d), %d members", d.Epoch, epoch, len(d.Members))
	}
	if code := a.beat(); code != errFencedInstanceID {
		t.Fatalf("old incarnation: %d", code)
	}
	a2.mustBeat()
	if r := h.c.ConsumerGroupHeartbeat(nil, Client{}, a2.req(-2), nil); r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("static leave of the new incarnation: %+v", r)
	}
	if d := describe(t, h.c, "g"); d.State != "Stable" || d.Members[0].MemberEpoch != -2 {
		t.Fatalf("after static leave: %s", descString(d))
	}
}

func TestConsumerGroupRegexAndTopicChanges(t *testing.T) {
	ts := &topicSet{}
	ts.set("logs-a", 2)
	ts.set("other", 2)
	h := newHarness(t, consumerCfg(ts))
	a := newCmem(t, h.c, ts, "g", "a")
	a.regex = kmsg.StringPtr("logs-.*")
	a.join()
	if a.count() != 2 || len(a.owned["logs-a"]) != 2 {
		t.Fatalf("regex assignment: %v", a.owned)
	}
	ts.set("logs-b", 3)
	a.mustBeat()
	if len(a.owned["logs-b"]) != 3 {
		t.Fatalf("topic created later not picked up: %v", a.owned)
	}
	ts.set("logs-b", 4) // partitions added
	a.mustBeat()
	if len(a.owned["logs-b"]) != 4 {
		t.Fatalf("new partition not picked up: %v", a.owned)
	}
	ts.del("logs-a")
	settle(t, a)
	if _, ok := a.owned["logs-a"]; ok || a.count() != 4 {
		t.Fatalf("deleted topic still assigned: %v", a.owned)
	}
	// The principal may not describe logs-b: the regex does not resolve
	// to it.
	r := a.req(a.epoch)
	resp := h.c.ConsumerGroupHeartbeat(nil, Client{}, r, func(topic string) bool { return topic != "logs-b" })
	if resp.ErrorCode != 0 {
		t.Fatal(resp.ErrorCode)
	}
	d := describe(t, h.c, "g")
	if n := len(d.Members[0].TargetAssignment.TopicPartitions); n != 0 {
		t.Fatalf("undescribable topic in target: %+v", d.Members[0].TargetAssignment)
	}
}

func TestConsumerGroupRangeAssignor(t *testing.T) {
	ts := &topicSet{}
	ts.set("x", 5)
	ts.set("y", 5)
	h := newHarness(t, consumerCfg(ts))
	var ms []*cmem
	for _, id := range []string{"m1", "m2"} {
		m := newCmem(t, h.c, ts, "g", id, "x", "y")
		m.assignor = kmsg.StringPtr("range")
		m.join()
		ms = append(ms, m)
	}
	settle(t, ms...)
	if got := fmt.Sprint(ms[0].owned); got != "map[x:[0 1 2] y:[0 1 2]]" {
		t.Fatalf("m1: %s", got)
	}
	if got := fmt.Sprint(ms[1].owned); got != "map[x:[3 4] y:[3 4]]" {
		t.Fatalf("m2: %s", got)
	}
	if d := describe(t, h.c, "g"); d.AssignorName != "range" {
		t.Fatalf("assignor %s", d.AssignorName)
	}
}

func TestUniformAssignorBalancedAndSticky(t *testing.T) {
	for _, tc := range []struct{ members, parts int }{{1, 1}, {3, 12}, {5, 7}, {7, 100}, {100, 100}} {
		var ms []*cmember
		for i := range tc.members {
			m := newCmember(fmt.Sprintf("m%03d", i), "")
			m.Topics = []string{"t"}
			ms = append(ms, m)
		}
		in := assignInput{members: ms, partitions: map[string]int32{"t": int32(tc.parts)}}
		out := assign(AssignorUniform, in)
		check := func(out map[string]assignment, n int) {
			lo, hi, total := tc.parts, 0, 0
			for _, m := range ms[:n] {
				c := out[m.ID].count()
				lo, hi, total = min(lo, c), max(hi, c), total+c
			}
			if total != tc.parts || hi-lo > 1 {
				t.Fatalf("%+v: unbalanced or lost partitions: lo %d hi %d total %d", tc, lo, hi, total)
			}
		}
		check(out, len(ms))
		// One member leaves: every other member keeps all it had.
		for _, m := range ms {
			m.Target = out[m.ID]
		}
		if len(ms) < 2 {
			continue
		}
		rest := ms[1:]
		out2 := assign(AssignorUniform, assignInput{members: rest, partitions: in.partitions})
		for _, m := range rest {
			if !subset(m.Target, out2[m.ID]) {
				t.Fatalf("%+v: %s lost %v -> %v", tc, m.ID, m.Target, out2[m.ID])
			}
		}
		ms = rest
		check(out2, len(rest))
	}
}

func TestConsumerGroupOffsetsWithEpochs(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 2)
	h := newHarness(t, consumerCfg(ts))
	a := newCmem(t, h.c, ts, "g", "a", "t")
	a.join()
	commit := func(version int16, member string, epoch int32) int16 {
		req := commitReq("g", member, epoch, "t", 5)
		req.Version = version
		return h.c.OffsetCommit(nil, req).Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(9, "a", a.epoch); code != 0 {
		t.Fatalf("member commit: %d", code)
	}
	if code := commit(9, "a", a.epoch+1); code != errStaleMemberEpoch {
		t.Fatalf("stale epoch: %d", code)
	}
	if code := commit(8, "a", a.epoch); code != errUnsupportedVersion {
		t.Fatalf("v8 commit from a consumer member: %d", code)
	}
	if code := commit(9, "zz", 1); code != errUnknownMemberID {
		t.Fatalf("unknown member: %d", code)
	}
	if code := commit(9, "", -1); code != errUnknownMemberID {
		t.Fatalf("admin commit to a group with members: %d", code)
	}
	fetch := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.MemberID, g.MemberEpoch = "g", &member, epoch
		req.Groups = append(req.Groups, g)
		return h.c.OffsetFetch(nil, req).Groups[0].ErrorCode
	}
	if code := fetch("a", a.epoch); code != 0 {
		t.Fatalf("member fetch: %d", code)
	}
	if code := fetch("a", a.epoch-1); code != errStaleMemberEpoch {
		t.Fatalf("stale fetch: %d", code)
	}
	if code := h.c.CheckMember("g", "a", nil, a.epoch); code != 0 {
		t.Fatalf("txn member check: %d", code)
	}
	if code := h.c.CheckMember("g", "a", nil, a.epoch+1); code != errIllegalGeneration {
		t.Fatalf("txn stale member check: %d", code)
	}
	// Describe and list.
	dg := h.c.DescribeGroups(nil, &kmsg.DescribeGroupsRequest{Version: 6, Groups: []string{"g"}})
	if dg.Groups[0].ErrorCode != errGroupIDNotFound {
		t.Fatalf("DescribeGroups of a consumer group: %d", dg.Groups[0].ErrorCode)
	}
	lg := h.c.ListGroups(nil, &kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"consumer"}})
	if len(lg.Groups) != 1 || lg.Groups[0].GroupType != "consumer" || lg.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups consumer: %+v", lg.Groups)
	}
	if lg := h.c.ListGroups(nil, &kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"classic"}}); len(lg.Groups) != 0 {
		t.Fatalf("ListGroups classic: %+v", lg.Groups)
	}
	// A classic member cannot join; the group cannot be deleted while it
	// has members; OffsetDelete refuses a subscribed topic.
	if r := h.join("g", "", joinOpt{}).get(); r.ErrorCode != errInconsistentGroupProto {
		t.Fatalf("classic join to a consumer group: %d", r.ErrorCode)
	}
	if r := h.c.DeleteGroups(nil, &kmsg.DeleteGroupsRequest{Groups: []string{"g"}}); r.Groups[0].ErrorCode != errNonEmptyGroup {
		t.Fatalf("delete of a group with members: %d", r.Groups[0].ErrorCode)
	}
	od := h.c.OffsetDelete(nil, &kmsg.OffsetDeleteRequest{Group: "g", Topics: []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}})
	if od.ErrorCode != 0 || od.Topics[0].Partitions[0].ErrorCode != errGroupSubscribedToTopic {
		t.Fatalf("offset delete of a subscribed topic: %+v", od)
	}
	h.c.ConsumerGroupHeartbeat(nil, Client{}, a.req(-1), nil)
	if code := commit(9, "", -1); code != 0 {
		t.Fatalf("admin commit to an empty consumer group: %d", code)
	}
	if r := h.c.DeleteGroups(nil, &kmsg.DeleteGroupsRequest{Groups: []string{"g"}}); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete of an empty consumer group: %d", r.Groups[0].ErrorCode)
	}
	if d := describe(t, h.c, "g"); d.ErrorCode != errGroupIDNotFound {
		t.Fatalf("describe after delete: %d", d.ErrorCode)
	}
}

func TestConsumerGroupSurvivesReopen(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 6)
	h := newHarness(t, consumerCfg(ts))
	a := newCmem(t, h.c, ts, "g", "a", "t")
	a.join()
	b := newCmem(t, h.c, ts, "g", "b", "t")
	b.instance = kmsg.StringPtr("ib")
	b.join()
	settle(t, a, b)
	want := descString(describe(t, h.c, "g"))
	h.reopen()
	a.c, b.c = h.c, h.c
	if got := descString(describe(t, h.c, "g")); got != want {
		t.Fatalf("after reopen:\n%s\nwant\n%s", got, want)
	}
	epochA, ownedA := a.epoch, fmt.Sprint(a.owned)
	a.mustBeat()
	b.mustBeat()
	if a.epoch != epochA || fmt.Sprint(a.owned) != ownedA {
		t.Fatalf("a resumed with epoch %d %v, had %d %s", a.epoch, a.owned, epochA, ownedA)
	}
}

// TestConsumerGroupCrashAtEveryWrite runs a group through joins, a leave,
// a static leave and rejoin, and a session expiry over the real internal
// log, and after every write checks that a crash (unsynced data dropped,
// a torn tail) recovers exactly the state the write acknowledged.
func TestConsumerGroupCrashAtEveryWrite(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 6)
	ts.set("u", 3)
	fs, clock := vfs.NewMem(), newFakeClock()
	c := openLog(t, fs, clock, consumerCfg(ts))
	a := newCmem(t, c, ts, "g", "a", "t", "u")
	b := newCmem(t, c, ts, "g", "b", "t")
	s := newCmem(t, c, ts, "g", "s1", "t", "u")
	s.instance = kmsg.StringPtr("si")
	s2 := newCmem(t, c, ts, "g", "s2", "t", "u")
	s2.instance = s.instance
	steps := []func(){
		a.join, b.join, a.mustBeat, b.mustBeat, s.join, a.mustBeat, b.mustBeat, s.mustBeat, a.mustBeat, s.mustBeat,
		func() { c.ConsumerGroupHeartbeat(nil, Client{}, b.req(-1), nil) },
		a.mustBeat, s.mustBeat,
		func() { c.ConsumerGroupHeartbeat(nil, Client{}, s.req(-2), nil) },
		s2.join, s2.mustBeat, a.mustBeat,
		func() { clock.Advance(2 * time.Second); a.mustBeat(); clock.Advance(2 * time.Second) }, // s2's session expires
		a.mustBeat,
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i, step := range steps {
		step()
		want := descString(describe(t, c, "g"))
		crashed := fs.CrashClone(vfs.CrashOptions{Tear: true, Rand: rng})
		c2 := openLog(t, crashed, clock, consumerCfg(ts))
		if got := descString(describe(t, c2, "g")); got != want {
			t.Fatalf("step %d: after crash\n%s\nwant\n%s", i, got, want)
		}
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsumerGroupStaticLeaveByMemberID: epoch -2 without an instance id
// (as franz-go sends it) leaves a static member statically and a dynamic
// one for good.
func TestConsumerGroupStaticLeaveByMemberID(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 4)
	h := newHarness(t, consumerCfg(ts))
	s := newCmem(t, h.c, ts, "g", "s", "t")
	s.instance = kmsg.StringPtr("si")
	s.join()
	d := newCmem(t, h.c, ts, "g", "d", "t")
	d.join()
	for _, m := range []*cmem{s, d} {
		r := m.req(-2)
		r.InstanceID = nil
		if resp := h.c.ConsumerGroupHeartbeat(nil, Client{}, r, nil); resp.ErrorCode != 0 {
			t.Fatalf("%s: epoch -2 without instance id: %d", m.id, resp.ErrorCode)
		}
	}
	g := describe(t, h.c, "g")
	if len(g.Members) != 1 || g.Members[0].MemberID != "s" || g.Members[0].MemberEpoch != -2 {
		t.Fatalf("after -2 leaves: %s", descString(g))
	}
}
