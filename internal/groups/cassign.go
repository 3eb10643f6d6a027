package groups

// The server-side assignors of consumer groups (KIP-848):
//
//   - uniform (the default): every subscribed partition goes to one of
//     its topic's subscribers so that the members' partition counts
//     differ by at most one wherever the subscriptions allow it, moving
//     as few partitions away from the previous target as it can (sticky).
//   - range: for each topic, its subscribers in order (static members by
//     instance id first, then the others by member id) take contiguous
//     ranges of its partitions, the first ones one more when the count
//     does not divide evenly; members with the same subscriptions get
//     the same partition numbers of co-partitioned topics.
//
// The partitions of a single Sluice node carry no rack, so rack ids are
// recorded and reported but do not change an assignment.

import (
	"cmp"
	"slices"
)

// Assignor names.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// assignInput is what an assignor sees: the members (with their
// subscriptions resolved and their previous target) and the partition
// counts of the subscribed topics that exist.
type assignInput struct {
	members    []*cmember
	partitions map[string]int32
}

// assign runs the named assignor and returns each member's target.
func assign(name string, in assignInput) map[string]assignment {
	out := make(map[string]assignment, len(in.members))
	for _, m := range in.members {
		out[m.ID] = assignment{}
	}
	if name == AssignorRange {
		assignRange(in, out)
	} else {
		assignUniform(in, out)
	}
	for _, a := range out {
		for t := range a {
			slices.Sort(a[t])
		}
	}
	return out
}

func assignRange(in assignInput, out map[string]assignment) {
	subs := subscribers(in)
	for _, topic := range sortedTopics(in.partitions) {
		ms := subs[topic]
		if len(ms) == 0 {
			continue
		}
		slices.SortFunc(ms, func(a, b *cmember) int {
			switch {
			case a.InstanceID != "" && b.InstanceID == "":
				return -1
			case a.InstanceID == "" && b.InstanceID != "":
				return 1
			case a.InstanceID != "":
				return cmp.Compare(a.InstanceID, b.InstanceID)
			}
			return cmp.Compare(a.ID, b.ID)
		})
		n := in.partitions[topic]
		k := int32(len(ms))
		per, extra := n/k, n%k
		next := int32(0)
		for i, m := range ms {
			take := per
			if int32(i) < extra {
				take++
			}
			for p := next; p < next+take; p++ {
				out[m.ID][topic] = append(out[m.ID][topic], p)
			}
			next += take
		}
	}
}

// assignUniform keeps each partition with the member that had it in the
// previous target if that member still subscribes to its topic, gives
// the rest to the least loaded subscriber (partitions with the fewest
// subscribers first), then moves partitions from the most to the least
// loaded subscriber until no move narrows the spread.
func assignUniform(in assignInput, out map[string]assignment) {
	subs := subscribers(in)
	count := map[string]int{}
	owner := map[tp]string{}
	give := func(id string, k tp) {
		owner[k] = id
		count[id]++
	}
	subscribes := map[string]map[string]bool{}
	for _, m := range in.members {
		s := map[string]bool{}
		for _, t := range m.subscribed() {
			s[t] = true
		}
		subscribes[m.ID] = s
	}
	// Sticky pass, in member order so the result is deterministic.
	for _, m := range in.members {
		for _, t := range m.Target.topics() {
			n, ok := in.partitions[t]
			if !ok || !subscribes[m.ID][t] {
				continue
			}
			for _, p := range m.Target[t] {
				if p < n && owner[tp{t, p}] == "" {
					give(m.ID, tp{t, p})
				}
			}
		}
	}
	var rest []tp
	for _, t := range sortedTopics(in.partitions) {
		if len(subs[t]) == 0 {
			continue
		}
		for p := int32(0); p < in.partitions[t]; p++ {
			if owner[tp{t, p}] == "" {
				rest = append(rest, tp{t, p})
			}
		}
	}
	slices.SortStableFunc(rest, func(a, b tp) int { return cmp.Compare(len(subs[a.topic]), len(subs[b.topic])) })
	least := func(ms []*cmember) string {
		best := ""
		for _, m := range ms {
			if best == "" || count[m.ID] < count[best] || (count[m.ID] == count[best] && m.ID < best) {
				best = m.ID
			}
		}
		return best
	}
	for _, k := range rest {
		give(least(subs[k.topic]), k)
	}
	// Balance: every move lowers the sum of squared counts, so this ends.
	held := map[string][]tp{}
	for k, id := range owner {
		held[id] = append(held[id], k)
	}
	for id := range held {
		slices.SortFunc(held[id], func(a, b tp) int {
			if c := cmp.Compare(a.topic, b.topic); c != 0 {
				return c
			}
			return cmp.Compare(a.partition, b.partition)
		})
	}
	order := make([]*cmember, len(in.members))
	copy(order, in.members)
	for {
		slices.SortStableFunc(order, func(a, b *cmember) int { return cmp.Compare(count[b.ID], count[a.ID]) })
		moved := false
		// The least loaded subscriber of each topic, until a move changes
		// the counts: one scan of the members per topic, not per partition.
		leastOf := map[string]string{}
		for _, a := range order {
			ks := held[a.ID]
			for i := len(ks) - 1; i >= 0; i-- {
				b, ok := leastOf[ks[i].topic]
				if !ok {
					b = least(subs[ks[i].topic])
					leastOf[ks[i].topic] = b
				}
				if count[a.ID]-count[b] <= 1 {
					continue
				}
				k := ks[i]
				held[a.ID] = slices.Delete(ks, i, i+1)
				held[b] = append(held[b], k)
				count[a.ID]--
				count[b]++
				moved = true
				break
			}
			if moved {
				break
			}
		}
		if !moved {
			break
		}
	}
	for id, ks := range held {
		for _, k := range ks {
			out[id][k.topic] = append(out[id][k.topic], k.partition)
		}
	}
}

// subscribers maps each existing subscribed topic to its subscribers, in
// member order.
func subscribers(in assignInput) map[string][]*cmember {
	subs := map[string][]*cmember{}
	for _, m := range in.members {
		for _, t := range m.subscribed() {
			if _, ok := in.partitions[t]; ok {
				subs[t] = append(subs[t], m)
			}
		}
	}
	return subs
}

func sortedTopics(parts map[string]int32) []string {
	ts := make([]string, 0, len(parts))
	for t := range parts {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}
