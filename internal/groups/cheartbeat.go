package groups

// ConsumerGroupHeartbeat v0-1 (KIP-848).
//
// Behaviour notes:
//   - v1 members generate their member id (KIP-1082) and must send it;
//     a v0 member joining with an empty id gets one from the coordinator.
//   - Requests are checked as Kafka checks them (INVALID_REQUEST): a group
//     id; no empty instance or rack id; a join (epoch 0) carries a
//     rebalance timeout, an empty owned-partitions list, and topic names
//     or a regex; no epoch below -2. A
//     regex that does not compile gets INVALID_REGULAR_EXPRESSION, an
//     assignor not in Config.Consumer.Assignors UNSUPPORTED_ASSIGNOR.
//   - A group that does not exist gets GROUP_ID_NOT_FOUND unless the
//     member joins; a classic group with members is upgraded to a
//     consumer group when it can be (migrate.go), else GROUP_ID_NOT_FOUND;
//     an empty classic group becomes a consumer group.
//   - Member checks: an unknown member id UNKNOWN_MEMBER_ID; an epoch
//     ahead of the member's, or behind it other than the previous epoch
//     with owned partitions within the assignment (a lost response),
//     FENCED_MEMBER_EPOCH. A static member's instance id held by another
//     member id gets FENCED_INSTANCE_ID, or UNRELEASED_INSTANCE_ID when a
//     new member id joins with it before the holder left with epoch -2.
//     A member that joins (epoch 0) with the id it already has is taken
//     back in place and given its assignment again.
//   - Epoch -2 without an instance id names the member by its id (as
//     clients send it): a static member leaves statically, a dynamic one
//     leaves the group as with -1.
//   - A static member that left with epoch -2 keeps its assignment
//     reserved; a new member id joining with its instance id takes it
//     over without a new group epoch. If none comes within the session
//     timeout the member is removed.
//   - A regex is RE2, matched against whole topic names (internal topics
//     included, as Kafka's coordinator resolves it), and resolved at each
//     heartbeat of its member to the topics the member's principal may
//     describe.
//   - The response carries the assignment when the member joined, when it
//     reported its owned partitions, or when its assignment changed.
//   - Every state change is fsynced in the internal log before the reply.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	errFencedMemberEpoch    = kerr.FencedMemberEpoch.Code
	errStaleMemberEpoch     = kerr.StaleMemberEpoch.Code
	errUnreleasedInstanceID = kerr.UnreleasedInstanceID.Code
	errUnsupportedAssignor  = kerr.UnsupportedAssignor.Code
	errInvalidRegex         = kerr.InvalidRegularExpression.Code
	errGroupMaxSize         = kerr.GroupMaxSizeReached.Code
	errUnsupportedVersion   = kerr.UnsupportedVersion.Code
)

// hbError is a heartbeat's error: its code and message.
type hbError struct {
	code int16
	msg  string
}

func hbErr(code int16, format string, args ...any) *hbError {
	return &hbError{code: code, msg: fmt.Sprintf(format, args...)}
}

// compileRegex compiles a subscription regex as a whole-name match.
func compileRegex(s string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + s + ")$")
}

func (c *Coordinator) checkHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) *hbError {
	switch {
	case req.Version >= 1 && req.MemberID == "":
		return hbErr(errInvalidRequest, "MemberId can't be empty.")
	case req.Group == "":
		return hbErr(errInvalidRequest, "GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return hbErr(errInvalidRequest, "InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return hbErr(errInvalidRequest, "RackId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e == epochJoin:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return hbErr(errInvalidRequest, "RebalanceTimeoutMs must be provided in first request.")
		case req.Topics == nil || len(req.Topics) > 0:
			return hbErr(errInvalidRequest, "TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && (req.Version < 1 || req.SubscribedTopicRegex == nil):
			return hbErr(errInvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case e < epochStaticLeave:
		return hbErr(errInvalidRequest, "MemberEpoch is invalid.")
	}
	if req.Version >= 1 && req.SubscribedTopicRegex != nil {
		if _, err := compileRegex(*req.SubscribedTopicRegex); err != nil {
			return hbErr(errInvalidRegex, "SubscribedTopicRegex %s is not a valid regular expression: %v.", *req.SubscribedTopicRegex, err)
		}
	}
	if req.ServerAssignor != nil && !slices.Contains(c.cfg.Consumer.Assignors, *req.ServerAssignor) {
		return hbErr(errUnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %s.",
			*req.ServerAssignor, strings.Join(c.cfg.Consumer.Assignors, ", "))
	}
	return nil
}

// newUUIDString is a random member id, as Kafka generates them.
func newUUIDString() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (c *Coordinator) topics() map[string]TopicInfo {
	if c.cfg.Topics == nil {
		return nil
	}
	return c.cfg.Topics()
}

// ConsumerGroupHeartbeat handles a ConsumerGroupHeartbeat request.
// describable, if not nil, says whether the member's principal may
// describe a topic; its regex resolves only to topics it may. It is
// called with the group's lock held and must not call into the
// Coordinator.
func (c *Coordinator) ConsumerGroupHeartbeat(_ context.Context, cl Client, req *kmsg.ConsumerGroupHeartbeatRequest, describable func(topic string) bool) *kmsg.ConsumerGroupHeartbeatResponse {
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	r.Version = req.Version
	fail := func(e *hbError) *kmsg.ConsumerGroupHeartbeatResponse {
		r.ErrorCode = e.code
		if e.msg != "" {
			msg := e.msg
			r.ErrorMessage = &msg
		}
		return r
	}
	if c.closing.Load() {
		return fail(&hbError{code: errCoordinatorNotAvailable})
	}
	if e := c.checkHeartbeat(req); e != nil {
		return fail(e)
	}
	id := req.MemberID
	if id == "" && req.MemberEpoch == epochJoin {
		id = newUUIDString()
	}
	topics := c.topics()
	var g *group
	if req.MemberEpoch == epochJoin {
		g = c.getOrCreate(req.Group)
	} else if g = c.lookup(req.Group); g == nil {
		return fail(hbErr(errGroupIDNotFound, "Consumer group %s not found.", req.Group))
	}

	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.closing.Load() || g.state == stateDead {
		return fail(&hbError{code: errCoordinatorNotAvailable})
	}
	var extra []kv
	t := newTxn(g.cg)
	if g.cg == nil {
		if req.MemberEpoch != epochJoin {
			return fail(hbErr(errGroupIDNotFound, "Consumer group %s not found.", req.Group))
		}
		if len(g.members) > 0 || len(g.pending) > 0 || g.state != stateEmpty {
			// A classic group with members upgrades (migrate.go).
			if e := c.upgradeLocked(g, t); e != nil {
				return fail(e)
			}
		}
		if g.meta != nil || len(g.members) > 0 { // the classic group becomes a consumer group
			extra = append(extra, kv{Key: groupKey(g.id)})
		}
	}
	hb := hbCall{c: c, g: g, t: t, req: req, id: id, cl: cl, topics: topics, describable: describable}
	out, e := hb.run()
	if e != nil {
		return fail(e)
	}
	if req.MemberEpoch == epochLeave {
		// The last consumer-protocol member leaving a mixed group may
		// turn it back into a classic group (migrate.go).
		if ok, err := c.downgradeLocked(g, t); err != nil {
			c.cfg.Logger.Warn("groups: persisting consumer group failed", "group", g.id, "err", err)
			return fail(&hbError{code: errCoordinatorNotAvailable})
		} else if ok {
			r.MemberID, r.MemberEpoch = &out.ID, out.Epoch
			r.HeartbeatIntervalMillis = int32(c.heartbeatInterval(g.id).Milliseconds())
			return r
		}
	}
	if err := c.writeTxnLocked(g, t, extra); err != nil {
		c.cfg.Logger.Warn("groups: persisting consumer group failed", "group", g.id, "err", err)
		return fail(&hbError{code: errCoordinatorNotAvailable})
	}
	if req.MemberEpoch >= epochJoin {
		c.touchMemberLocked(g, out.ID)
	}
	r.MemberID = &out.ID
	r.MemberEpoch = out.Epoch
	r.HeartbeatIntervalMillis = int32(c.heartbeatInterval(g.id).Milliseconds())
	if hb.sendAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, tn := range out.Assigned.topics() {
			ti, ok := topics[tn]
			if !ok {
				continue
			}
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID = ti.ID
			at.Partitions = slices.Clone(out.Assigned[tn])
			a.Topics = append(a.Topics, at)
		}
		r.Assignment = &a
	}
	return r
}

// writeTxnLocked writes t's records (and extra) and installs t's state.
// The caller holds persistMu exclusively and g.mu, which is released
// across the write and held again on return.
func (c *Coordinator) writeTxnLocked(g *group, t *cgTxn, extra []kv) error {
	recs := append(extra, t.records(g.id)...)
	if len(recs) == 0 {
		return nil
	}
	g.mu.Unlock()
	err := c.st.append(recs, func(int64) {
		g.mu.Lock()
		defer g.mu.Unlock()
		c.installLocked(g, t, len(extra) > 0)
	})
	g.mu.Lock()
	if err == nil {
		c.metrics.consumerWrites.Inc()
	}
	return err
}

// installLocked makes t's state the group's.
func (c *Coordinator) installLocked(g *group, t *cgTxn, convertedClassic bool) {
	if convertedClassic {
		c.dropClassicLocked(g)
	}
	if t.old != nil && t.n.Epoch != t.old.Epoch {
		c.metrics.rebalances.Inc()
		g.rebalances++
	}
	g.cg, g.cgRecorded = t.n, true
	g.protocolType = "consumer"
	for id := range t.gone {
		if ct := g.ctimers[id]; ct != nil {
			ct.stop()
			delete(g.ctimers, id)
		}
	}
	now := c.now()
	st := stateStable
	if len(t.n.members) == 0 {
		st = stateEmpty
	}
	if g.state != st {
		g.setStateLocked(st, now)
	}
	// Rebalance timeouts follow pending revocations.
	for id := range t.dirty {
		c.revokeTimerLocked(g, id)
	}
}

// hbCall is one heartbeat being processed, under the group's locks.
type hbCall struct {
	c           *Coordinator
	g           *group
	t           *cgTxn
	req         *kmsg.ConsumerGroupHeartbeatRequest
	id          string
	cl          Client
	topics      map[string]TopicInfo
	describable func(string) bool

	sendAssignment bool
}

// owned returns the partitions the request reports owned, by topic name
// (nil when it reports none); topic ids no topic has are left out.
func (h *hbCall) owned() assignment {
	if h.req.Topics == nil {
		return nil
	}
	byID := make(map[[16]byte]string, len(h.topics))
	for n, ti := range h.topics {
		byID[ti.ID] = n
	}
	a := assignment{}
	for _, rt := range h.req.Topics {
		n, ok := byID[rt.TopicID]
		if !ok {
			continue
		}
		for _, p := range rt.Partitions {
			a.add(n, p)
		}
	}
	return a
}

// subset reports whether every partition of a is in b.
func subset(a, b assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				return false
			}
		}
	}
	return true
}

// checkEpoch is Kafka's member epoch check of a heartbeat.
func checkEpoch(m *cmember, epoch int32, owned assignment) *hbError {
	switch {
	case epoch > m.Epoch:
		return hbErr(errFencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.Epoch)
	case epoch < m.Epoch && (epoch != m.PrevEpoch || owned == nil || !subset(owned, m.Assigned)):
		return hbErr(errFencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.Epoch)
	}
	return nil
}

func newCmember(id, instance string) *cmember {
	return &cmember{ID: id, InstanceID: instance, Assigned: assignment{}, Revoking: assignment{}, Target: assignment{}}
}

func (h *hbCall) run() (*cmember, *hbError) {
	switch h.req.MemberEpoch {
	case epochLeave:
		return h.leave()
	case epochStaticLeave:
		return h.staticLeave()
	}
	t, n, req := h.t, h.t.n, h.req
	owned := h.owned()
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	joining := req.MemberEpoch == epochJoin
	full := func() *hbError {
		if h.c.cfg.Consumer.MaxSize > 0 && len(n.members) >= h.c.cfg.Consumer.MaxSize {
			return hbErr(errGroupMaxSize, "The consumer group has reached its maximum capacity of %d members.", h.c.cfg.Consumer.MaxSize)
		}
		return nil
	}
	var m *cmember
	bump, replaced := false, false
	switch {
	case instance == "":
		m = n.members[h.id]
		switch {
		case m == nil && !joining:
			return nil, hbErr(errUnknownMemberID, "Member %s is not a member of group %s.", h.id, h.g.id)
		case m == nil:
			if e := full(); e != nil {
				return nil, e
			}
			m = newCmember(h.id, "")
			t.add(m)
			bump = true
		case !joining:
			if e := checkEpoch(m, req.MemberEpoch, owned); e != nil {
				return nil, e
			}
		}
	default:
		var sm *cmember
		if sid, ok := n.static[instance]; ok {
			sm = n.members[sid]
		}
		switch {
		case joining && sm == nil:
			if n.members[h.id] != nil {
				return nil, hbErr(errInvalidRequest, "Member %s already joined without instance id %s.", h.id, instance)
			}
			if e := full(); e != nil {
				return nil, e
			}
			m = newCmember(h.id, instance)
			t.add(m)
			bump = true
		case joining && sm.ID == h.id:
			m = sm
			if m.Epoch == epochStaticLeave {
				m = t.mut(m.ID)
				m.Epoch, m.State = 0, mStable
			}
		case joining && sm.Epoch != epochStaticLeave:
			return nil, hbErr(errUnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", h.id, instance, sm.ID)
		case joining:
			// The restarted static member takes over its predecessor's
			// assignment, without a new group epoch.
			t.remove(sm.ID)
			m = newCmember(h.id, instance)
			m.Assigned, m.Target = sm.Assigned.clone(), sm.Target.clone()
			m.Topics, m.Regex, m.RegexTopics, m.Assignor = slices.Clone(sm.Topics), sm.Regex, slices.Clone(sm.RegexTopics), sm.Assignor
			t.add(m)
			replaced = true
		case sm == nil:
			return nil, hbErr(errUnknownMemberID, "Instance id %s is unknown.", instance)
		case sm.ID != h.id:
			return nil, hbErr(errFencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", h.id, instance, sm.ID)
		default:
			if e := checkEpoch(sm, req.MemberEpoch, owned); e != nil {
				return nil, e
			}
			m = sm
		}
	}
	before := m.Assigned

	// 1. The member's own fields; a subscription change bumps the epoch.
	upd := func() { m = t.mut(m.ID) }
	if req.RackID != nil && *req.RackID != m.RackID {
		upd()
		m.RackID = *req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 && req.RebalanceTimeoutMillis != m.RebalanceMs {
		upd()
		m.RebalanceMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.Assignor {
		upd()
		m.Assignor = *req.ServerAssignor
		bump = true
	}
	if h.cl.ID != m.ClientID || h.cl.Host != m.ClientHost {
		upd()
		m.ClientID, m.ClientHost = h.cl.ID, h.cl.Host
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.Topics) {
			upd()
			m.Topics = names
			bump = true
		}
	}
	if req.Version >= 1 && req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.Regex {
		upd()
		m.Regex = *req.SubscribedTopicRegex
		bump = true
	}
	if resolved := h.resolve(m.Regex); !slices.Equal(resolved, m.RegexTopics) {
		upd()
		m.RegexTopics = resolved
	}
	if fp := fingerprint(n, h.topics); fp != n.Meta {
		n.Meta = fp
		t.groupDirty = true
		bump = true
	}
	if bump {
		t.bump()
	}

	// 2. The target assignment of a new group epoch.
	if bump || replaced || n.Epoch > n.AssignEpoch {
		h.c.computeTarget(t, h.topics)
		m = n.members[m.ID]
	}

	// 3. The member reconciles towards its target.
	if next := reconcile(n, m, owned); next != nil {
		upd()
		*m = *next
	}
	h.sendAssignment = owned != nil || joining || !m.Assigned.equal(before)
	return m, nil
}

func (h *hbCall) leave() (*cmember, *hbError) {
	n := h.t.n
	id := h.id
	if h.req.InstanceID != nil {
		sid, ok := n.static[*h.req.InstanceID]
		switch {
		case !ok:
			return nil, hbErr(errUnknownMemberID, "Instance id %s is unknown.", *h.req.InstanceID)
		case sid != id:
			return nil, hbErr(errFencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", id, *h.req.InstanceID, sid)
		}
	}
	if n.members[id] == nil {
		return nil, hbErr(errUnknownMemberID, "Member %s is not a member of group %s.", id, h.g.id)
	}
	h.c.removeMembers(h.t, h.topics, id)
	return &cmember{ID: id, Epoch: epochLeave}, nil
}

func (h *hbCall) staticLeave() (*cmember, *hbError) {
	n := h.t.n
	if h.req.InstanceID == nil {
		m := n.members[h.id]
		switch {
		case m == nil:
			return nil, hbErr(errUnknownMemberID, "Member %s is not a member of group %s.", h.id, h.g.id)
		case m.InstanceID == "":
			return h.leave()
		}
		h.req.InstanceID = m.instancePtr()
	}
	instance := *h.req.InstanceID
	sid, ok := n.static[instance]
	switch {
	case !ok:
		return nil, hbErr(errUnknownMemberID, "Instance id %s is unknown.", instance)
	case sid != h.id:
		return nil, hbErr(errFencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", h.id, instance, sid)
	}
	m := h.t.mut(sid)
	m.PrevEpoch, m.Epoch = m.Epoch, epochStaticLeave
	m.State = mStable
	m.Revoking = assignment{}
	return &cmember{ID: sid, Epoch: epochStaticLeave}, nil
}

// removeMembers takes members out of the group, bumps the group epoch and
// recomputes the target assignment.
func (c *Coordinator) removeMembers(t *cgTxn, topics map[string]TopicInfo, ids ...string) {
	for _, id := range ids {
		t.remove(id)
	}
	t.n.Meta = fingerprint(t.n, topics)
	t.bump()
	c.computeTarget(t, topics)
}

// resolve returns the topics regex matches that the member may describe.
func (h *hbCall) resolve(regex string) []string {
	if regex == "" {
		return nil
	}
	re, err := compileRegex(regex)
	if err != nil {
		return nil
	}
	var out []string
	for name := range h.topics {
		if !re.MatchString(name) {
			continue
		}
		if h.describable != nil && !h.describable(name) {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// fingerprint names the metadata of every topic the group subscribes to
// that exists: its id and partition count.
func fingerprint(cg *cgroup, topics map[string]TopicInfo) string {
	set := map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.subscribed() {
			set[t] = true
		}
	}
	names := make([]string, 0, len(set))
	for t := range set {
		if _, ok := topics[t]; ok {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, t := range names {
		ti := topics[t]
		fmt.Fprintf(&b, "%s/%s/%d;", t, hex.EncodeToString(ti.ID[:]), ti.Partitions)
	}
	return b.String()
}

// preferredAssignor is the assignor most members ask for (ties to the
// one listed first in the configuration), else the default.
func (c *Coordinator) preferredAssignor(cg *cgroup) string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.Assignor != "" {
			votes[m.Assignor]++
		}
	}
	best := c.cfg.Consumer.Assignors[0]
	bestVotes := 0
	for _, a := range c.cfg.Consumer.Assignors {
		if votes[a] > bestVotes {
			best, bestVotes = a, votes[a]
		}
	}
	return best
}

// computeTarget computes the target assignment for the group epoch.
func (c *Coordinator) computeTarget(t *cgTxn, topics map[string]TopicInfo) {
	n := t.n
	members := n.sortedMembers()
	parts := map[string]int32{}
	for _, m := range members {
		for _, tn := range m.subscribed() {
			if ti, ok := topics[tn]; ok {
				parts[tn] = ti.Partitions
			}
		}
	}
	name := c.preferredAssignor(n)
	targets := assign(name, assignInput{members: members, partitions: parts})
	for _, m := range members {
		if !m.Target.equal(targets[m.ID]) {
			t.mut(m.ID).Target = targets[m.ID]
		}
	}
	n.AssignEpoch, n.Assignor = n.Epoch, name
	t.groupDirty = true
}

// reconcile returns m's next state towards its target, or nil when it
// stays as it is. owned is what the member reported holding (nil when it
// did not say).
func reconcile(cg *cgroup, m *cmember, owned assignment) *cmember {
	switch m.State {
	case mStable:
		if m.Epoch == cg.AssignEpoch {
			return nil
		}
	case mUnrevoked:
		if owned == nil || ownsAny(owned, m.Revoking) {
			return nil
		}
	}
	holders := cg.holders()
	kept, revoke, give := assignment{}, assignment{}, assignment{}
	unreleased := false
	for t, ps := range m.Assigned {
		for _, p := range ps {
			if m.Target.has(t, p) {
				kept.add(t, p)
			} else {
				revoke.add(t, p)
			}
		}
	}
	for t, ps := range m.Target {
		for _, p := range ps {
			if m.Assigned.has(t, p) {
				continue
			}
			if h := holders[tp{t, p}]; h != "" && h != m.ID {
				unreleased = true
				continue
			}
			give.add(t, p)
		}
	}
	next := m.clone()
	if revoke.count() > 0 && (owned == nil || ownsAny(owned, revoke)) {
		next.State, next.Assigned, next.Revoking = mUnrevoked, kept, revoke
		if sameMember(next, m) {
			return nil
		}
		return next
	}
	for t, ps := range give {
		for _, p := range ps {
			kept.add(t, p)
		}
	}
	next.Assigned, next.Revoking = kept, assignment{}
	if next.Epoch != cg.AssignEpoch {
		next.PrevEpoch, next.Epoch = next.Epoch, cg.AssignEpoch
	}
	next.State = mStable
	if unreleased {
		next.State = mUnreleased
	}
	if sameMember(next, m) {
		return nil
	}
	return next
}

func sameMember(a, b *cmember) bool {
	return a.State == b.State && a.Epoch == b.Epoch && a.PrevEpoch == b.PrevEpoch &&
		a.Assigned.equal(b.Assigned) && a.Revoking.equal(b.Revoking)
}

func ownsAny(owned, a assignment) bool {
	for t, ps := range a {
		for _, p := range ps {
			if owned.has(t, p) {
				return true
			}
		}
	}
	return false
}

// touchMemberLocked pushes a member's session deadline on and makes sure
// its session timer runs.
func (c *Coordinator) touchMemberLocked(g *group, id string) {
	if g.cg == nil || g.cg.members[id] == nil {
		return
	}
	ct := g.ctimers[id]
	if ct == nil {
		ct = &ctimer{}
		g.ctimers[id] = ct
	}
	session := c.memberSession(g, id)
	ct.deadline = c.now().Add(session)
	if ct.session == nil {
		ct.session = c.after(session, func() { c.consumerTimeout(g, id, false) })
	}
}

// revokeTimerLocked starts the rebalance timeout of a member that must
// revoke partitions, and stops it once it has.
func (c *Coordinator) revokeTimerLocked(g *group, id string) {
	m := g.cg.members[id]
	if m == nil {
		return
	}
	ct := g.ctimers[id]
	if ct == nil {
		session := c.memberSession(g, id)
		ct = &ctimer{deadline: c.now().Add(session)}
		ct.session = c.after(session, func() { c.consumerTimeout(g, id, false) })
		g.ctimers[id] = ct
	}
	if m.State != mUnrevoked {
		ct.revokeBy = time.Time{}
		if ct.revoke != nil {
			ct.revoke.Stop()
			ct.revoke = nil
		}
		return
	}
	if !ct.revokeBy.IsZero() {
		return
	}
	d := time.Duration(m.RebalanceMs) * time.Millisecond
	ct.revokeBy = c.now().Add(d)
	ct.revoke = c.after(d, func() { c.consumerTimeout(g, id, true) })
}

// consumerTimeout runs when a member's session or rebalance timer fires:
// a member whose session expired, or that did not revoke its partitions
// within its rebalance timeout, is removed from the group.
func (c *Coordinator) consumerTimeout(g *group, id string, rebalance bool) {
	topics := c.topics()
	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	ct := g.ctimers[id]
	if g.state == stateDead || g.cg == nil || ct == nil {
		return
	}
	m := g.cg.members[id]
	if m == nil {
		ct.stop()
		delete(g.ctimers, id)
		return
	}
	now := c.now()
	if rebalance {
		ct.revoke = nil
		if m.State != mUnrevoked || ct.revokeBy.IsZero() {
			return
		}
		if now.Before(ct.revokeBy) {
			ct.revoke = c.after(ct.revokeBy.Sub(now), func() { c.consumerTimeout(g, id, true) })
			return
		}
	} else {
		ct.session = nil
		if now.Before(ct.deadline) {
			ct.session = c.after(ct.deadline.Sub(now), func() { c.consumerTimeout(g, id, false) })
			return
		}
	}
	why := "session timeout"
	if rebalance {
		why = "rebalance timeout"
	}
	c.cfg.Logger.Info("groups: consumer group member fenced", "group", g.id, "member", id, "reason", why)
	c.metrics.expiredMembers.Inc()
	t := newTxn(g.cg)
	c.removeMembers(t, topics, id)
	ok, err := c.downgradeLocked(g, t)
	if err == nil && !ok {
		err = c.writeTxnLocked(g, t, nil)
	}
	if err != nil {
		c.cfg.Logger.Warn("groups: persisting consumer group failed", "group", g.id, "err", err)
		// Try again at the next tick of the timer.
		if rebalance {
			ct.revoke = c.after(time.Second, func() { c.consumerTimeout(g, id, true) })
		} else {
			ct.session = c.after(time.Second, func() { c.consumerTimeout(g, id, false) })
		}
	}
}
