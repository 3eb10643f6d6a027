package groups

// OffsetCommit v0-8, OffsetFetch v0-8 and OffsetDelete v0.
//
// Behaviour notes:
//   - A commit is written to the internal log and fsynced before the
//     reply. Commits with generation -1 and no member id (v0 always) are
//     simple commits, accepted only while the group has no members; an
//     unknown group is created for them.
//   - A member commit is fenced: UNKNOWN_MEMBER_ID for a member not in the
//     group, ILLEGAL_GENERATION for another generation,
//     REBALANCE_IN_PROGRESS while the group completes a rebalance (commits
//     of the current generation are accepted while it prepares one, so a
//     member can commit before revoking), FENCED_INSTANCE_ID for a
//     replaced static member, ILLEGAL_GENERATION for a member that has
//     not yet been given a generation. A member's commit counts as a
//     heartbeat.
//   - The retention time of v2-v4 sets an explicit expiry for the offsets.
//   - OffsetFetch of an unknown group or partition returns offset -1.
//     RequireStable (v7+) answers UNSTABLE_OFFSET_COMMIT for a partition
//     whose offset an unfinished transaction has staged (KIP-447).
//   - Skipped: topic ids (v10+ of OffsetCommit/OffsetFetch).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit handles an OffsetCommit request.
func (c *Coordinator) OffsetCommit(_ context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	r := kmsg.NewPtrOffsetCommitResponse()
	r.Version = req.Version
	codes := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
	}
	c.commit(req, codes)
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for k, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = codes[i][k]
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// commit fills codes[topic][partition] for an OffsetCommit request.
func (c *Coordinator) commit(req *kmsg.OffsetCommitRequest, codes [][]int16) {
	all := func(code int16) {
		for _, cs := range codes {
			for k := range cs {
				cs[k] = code
			}
		}
	}
	if c.closing.Load() {
		all(errCoordinatorNotAvailable)
		return
	}
	if req.Group == "" {
		all(errInvalidGroupID)
		return
	}
	gen, memberID, instance := int32(-1), "", ""
	if req.Version >= 1 {
		gen, memberID = req.Generation, req.MemberID
	}
	if req.Version >= 7 && req.InstanceID != nil {
		instance = *req.InstanceID
	}
	g := c.lookup(req.Group)
	if g == nil {
		if gen >= 0 {
			all(errIllegalGeneration)
			return
		}
		g = c.getOrCreate(req.Group)
	}

	g.persistMu.RLock()
	defer g.persistMu.RUnlock()
	now := c.now()
	g.mu.Lock()
	var code int16
	m := g.members[memberID]
	switch {
	case g.state == stateDead:
		code = errCoordinatorNotAvailable
	case g.cg != nil:
		code = checkConsumerCommitLocked(g.cg, req.Version, memberID, gen)
	case gen < 0 && memberID == "" && len(g.members) == 0:
		// a simple commit
	case g.state == stateCompleting:
		code = errRebalanceInProgress
	case fencedLocked(g, memberID, instance):
		code = errFencedInstanceID
	case m == nil:
		code = errUnknownMemberID
	case gen != g.generation || m.generation != g.generation:
		// The second test refuses a member that joined during the current
		// rebalance: it is not part of any generation yet.
		code = errIllegalGeneration
	default:
		c.heartbeatLocked(g, m)
	}
	if code != errNone {
		g.mu.Unlock()
		all(code)
		c.metrics.commitsRejected.Inc()
		return
	}
	var expire int64
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis > 0 {
		expire = now.UnixMilli() + req.RetentionTimeMillis
	}
	var recs []kv
	var keys []tp
	var vals []*committed
	for i, t := range req.Topics {
		for k, p := range t.Partitions {
			switch {
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.MaxMetadataBytes:
				codes[i][k] = errOffsetMetadataTooLarge
				continue
			case t.Topic == "" || p.Partition < 0 ||
				(c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(t.Topic, p.Partition)):
				codes[i][k] = errUnknownTopicOrPartition
				continue
			}
			o := &committed{offset: p.Offset, epoch: -1, commitMs: now.UnixMilli(), expireMs: expire}
			if req.Version >= 6 {
				o.epoch = p.LeaderEpoch
			}
			if p.Metadata != nil {
				o.metadata = *p.Metadata
			}
			keys = append(keys, tp{t.Topic, p.Partition})
			vals = append(vals, o)
			recs = append(recs, kv{Key: offsetKey(g.id, t.Topic, p.Partition), Value: o.value()})
		}
	}
	g.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	err := c.writeOffsets(g, keys, vals, recs)
	if err != nil {
		c.cfg.Logger.Warn("groups: writing offset commit failed", "group", g.id, "err", err)
		for i, t := range req.Topics {
			for k := range t.Partitions {
				if codes[i][k] == errNone {
					codes[i][k] = errCoordinatorNotAvailable
				}
			}
		}
		return
	}
	c.metrics.commits.Add(float64(len(recs)))
}

// fetchTopic is one topic of an OffsetFetch: nil partitions means all.
type fetchTopic struct {
	topic      string
	partitions []int32
}

// fetched is one partition's answer.
type fetched struct {
	topic string
	kmsg.OffsetFetchResponseGroupTopicPartition
}

// writeOffsets writes recs, the commits vals of keys, and once they are
// durable applies each to g unless g holds a commit of that partition
// written later in the log. Callers do not hold g.mu.
func (c *Coordinator) writeOffsets(g *group, keys []tp, vals []*committed, recs []kv) error {
	return c.st.append(recs, func(base int64) {
		g.mu.Lock()
		defer g.mu.Unlock()
		for i, k := range keys {
			vals[i].logOffset = base + int64(i)
			if old := g.offsets[k]; old == nil || old.logOffset < vals[i].logOffset {
				g.offsets[k] = vals[i]
			}
		}
	})
}

// fetch answers an OffsetFetch for one group. all asks for every
// committed offset of the group.
// With stable, a partition whose offset an unfinished transaction has
// staged gets UNSTABLE_OFFSET_COMMIT.
func (c *Coordinator) fetch(groupID string, topics []fetchTopic, all, stable bool) ([]fetched, int16) {
	if c.closing.Load() {
		return nil, errCoordinatorNotAvailable
	}
	if groupID == "" {
		return nil, errInvalidGroupID
	}
	var out []fetched
	one := func(topic string, p int32, o *committed) {
		f := fetched{topic: topic}
		f.Default()
		f.Partition = p
		f.Offset, f.LeaderEpoch = -1, -1
		empty := ""
		f.Metadata = &empty
		if o != nil {
			f.Offset, f.LeaderEpoch = o.offset, o.epoch
			md := o.metadata
			f.Metadata = &md
		}
		if stable && c.cfg.PendingTxnOffset != nil && c.cfg.PendingTxnOffset(groupID, topic, p) {
			f.ErrorCode = errUnstableOffsetCommit
			f.Offset = -1
		}
		out = append(out, f)
	}
	g := c.lookup(groupID)
	if g == nil {
		for _, t := range topics {
			for _, p := range t.partitions {
				one(t.topic, p, nil)
			}
		}
		return out, errNone
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if all {
		for _, k := range sortedKeys(g.offsets) {
			one(k.topic, k.partition, g.offsets[k])
		}
		return out, errNone
	}
	for _, t := range topics {
		if t.partitions == nil {
			for _, k := range sortedKeys(g.offsets) {
				if k.topic == t.topic {
					one(k.topic, k.partition, g.offsets[k])
				}
			}
			continue
		}
		for _, p := range t.partitions {
			one(t.topic, p, g.offsets[tp{t.topic, p}])
		}
	}
	return out, errNone
}

// OffsetFetch handles an OffsetFetch request; v8+ may ask for many groups.
func (c *Coordinator) OffsetFetch(_ context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	r := kmsg.NewPtrOffsetFetchResponse()
	r.Version = req.Version
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var topics []fetchTopic
			for _, t := range rg.Topics {
				topics = append(topics, fetchTopic{t.Topic, nonNil(t.Partitions)})
			}
			var out []fetched
			code := errNone
			if req.Version >= 9 {
				code = c.checkConsumerFetch(rg.Group, rg.MemberID, rg.MemberEpoch)
			}
			if code == errNone {
				out, code = c.fetch(rg.Group, topics, rg.Topics == nil, req.RequireStable)
			}
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group = rg.Group
			g.ErrorCode = code
			for _, f := range out {
				if n := len(g.Topics); n == 0 || g.Topics[n-1].Topic != f.topic {
					t := kmsg.NewOffsetFetchResponseGroupTopic()
					t.Topic = f.topic
					g.Topics = append(g.Topics, t)
				}
				t := &g.Topics[len(g.Topics)-1]
				t.Partitions = append(t.Partitions, f.OffsetFetchResponseGroupTopicPartition)
			}
			r.Groups = append(r.Groups, g)
		}
		return r
	}
	var topics []fetchTopic
	for _, t := range req.Topics {
		topics = append(topics, fetchTopic{t.Topic, nonNil(t.Partitions)})
	}
	out, code := c.fetch(req.Group, topics, req.Topics == nil && req.Version >= 2, req.Version >= 7 && req.RequireStable)
	if req.Version >= 2 {
		r.ErrorCode = code
	}
	for _, f := range out {
		if n := len(r.Topics); n == 0 || r.Topics[n-1].Topic != f.topic {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = f.topic
			r.Topics = append(r.Topics, t)
		}
		t := &r.Topics[len(r.Topics)-1]
		p := kmsg.NewOffsetFetchResponseTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = f.Partition, f.Offset, f.LeaderEpoch, f.Metadata, f.ErrorCode
		t.Partitions = append(t.Partitions, p)
	}
	if code != errNone && req.Version < 2 {
		// v0-1 have no top-level error: report it on every partition asked for.
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	}
	return r
}

// nonNil keeps an explicitly empty partition list from meaning "all".
func nonNil(ps []int32) []int32 {
	if ps == nil {
		return []int32{}
	}
	return ps
}

func sortedKeys(m map[tp]*committed) []tp {
	keys := make([]tp, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && less(keys[j], keys[j-1]); j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

func less(a, b tp) bool {
	if a.topic != b.topic {
		return a.topic < b.topic
	}
	return a.partition < b.partition
}

// OffsetDelete handles an OffsetDelete request: offsets of topics the
// group is not subscribed to may be deleted (all of them while it is empty).
func (c *Coordinator) OffsetDelete(_ context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	r := kmsg.NewPtrOffsetDeleteResponse()
	r.Version = req.Version
	top, codes := c.offsetDelete(req)
	r.ErrorCode = top
	if top != errNone {
		return r
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for k, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = codes[i][k]
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

func (c *Coordinator) offsetDelete(req *kmsg.OffsetDeleteRequest) (int16, [][]int16) {
	if c.closing.Load() {
		return errCoordinatorNotAvailable, nil
	}
	if req.Group == "" {
		return errInvalidGroupID, nil
	}
	g := c.lookup(req.Group)
	if g == nil {
		return errGroupIDNotFound, nil
	}
	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	g.mu.Lock()
	if g.state == stateDead {
		g.mu.Unlock()
		return errGroupIDNotFound, nil
	}
	var subscribed map[string]bool
	if g.cg != nil && len(g.cg.members) > 0 {
		subscribed = consumerSubscribedLocked(g.cg)
	} else if g.cg == nil && g.state != stateEmpty {
		if g.protocolType != "consumer" {
			g.mu.Unlock()
			return errNonEmptyGroup, nil
		}
		subscribed = map[string]bool{}
		for _, m := range g.members {
			var md kmsg.ConsumerMemberMetadata
			if md.ReadFrom(m.metadataFor(g.protocol)) != nil {
				continue
			}
			for _, t := range md.Topics {
				subscribed[t] = true
			}
		}
	}
	codes := make([][]int16, len(req.Topics))
	var recs []kv
	var gone []tp
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		for k, p := range t.Partitions {
			if subscribed[t.Topic] {
				codes[i][k] = errGroupSubscribedToTopic
				continue
			}
			key := tp{t.Topic, p.Partition}
			if g.offsets[key] != nil {
				gone = append(gone, key)
				recs = append(recs, kv{Key: offsetKey(g.id, t.Topic, p.Partition)})
			}
		}
	}
	g.mu.Unlock()
	if len(recs) == 0 {
		return errNone, codes
	}
	err := c.st.append(recs, func(int64) {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, k := range gone {
			delete(g.offsets, k)
		}
	})
	if err != nil {
		c.cfg.Logger.Warn("groups: deleting offsets failed", "group", g.id, "err", err)
		return errCoordinatorNotAvailable, nil
	}
	return errNone, codes
}
