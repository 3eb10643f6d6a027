package groups

// GroupSummary is a read-only view of one group for monitoring (the
// broker's metrics and console). Kafka clients see the same facts
// through DescribeGroups and OffsetFetch.
type GroupSummary struct {
	ID           string
	Type         string // classic or consumer (ListGroups' group type)
	State        string
	ProtocolType string
	Protocol     string
	Members      int
	// Epoch and AssignmentEpoch are a consumer-protocol group's group
	// epoch and target assignment epoch (0 for classic groups, whose
	// Protocol is the assignor the leader chose; a consumer group's is
	// its server-side assignor).
	Epoch           int32
	AssignmentEpoch int32
	// Generation is a classic group's generation (0 for consumer groups).
	Generation int32
	// Rebalances counts the group's rebalances since the coordinator
	// opened: classic rebalances begun, consumer-group epoch bumps.
	Rebalances uint64
	Offsets    []CommittedOffset // sorted by topic, then partition
}

// CommittedOffset is one committed offset of a group.
type CommittedOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Summaries returns every group, sorted by id, with its committed
// offsets. It takes each group's lock in turn, never two at once.
func (c *Coordinator) Summaries() []GroupSummary {
	if c.closing.Load() {
		return nil
	}
	gs := c.groupList()
	out := make([]GroupSummary, 0, len(gs))
	for _, g := range gs {
		g.mu.Lock()
		s := GroupSummary{
			ID:           g.id,
			Type:         "classic",
			Generation:   g.generation,
			Rebalances:   g.rebalances,
			State:        g.state.String(),
			ProtocolType: g.protocolType,
			Protocol:     g.protocol,
			Members:      len(g.members),
			Offsets:      make([]CommittedOffset, 0, len(g.offsets)),
		}
		if g.cg != nil {
			s.Type, s.Generation = "consumer", 0
			s.State, s.Members, s.Protocol = g.cg.stateName(), len(g.cg.members), g.cg.Assignor
			s.Epoch, s.AssignmentEpoch = g.cg.Epoch, g.cg.AssignEpoch
		}
		for _, k := range sortedKeys(g.offsets) {
			s.Offsets = append(s.Offsets, CommittedOffset{Topic: k.topic, Partition: k.partition, Offset: g.offsets[k].offset})
		}
		g.mu.Unlock()
		out = append(out, s)
	}
	return out
}
