package console

// Share groups (KIP-932) in the groups list and on a group's page.
//
// The share coordinator is not the group coordinator, so share groups
// are not in broker.Groups: the console reads them as a Kafka admin
// client would, over its in-process connection: ListGroups (type
// "share") for the list, ShareGroupDescribe for state, epochs and
// members with their assignments, DescribeShareGroupOffsets for each
// share partition's start offset and lag (the figures `sluice group
// describe` shows); the end offset is the partition's high watermark
// from the monitoring view, as ListOffsets would answer. The records
// in flight by state (available, acquired, acknowledged, archived) are
// no Kafka API's answer: they come from the broker's monitoring view,
// broker.ShareGroups, per share partition.
//
// Access as for the other groups: DESCRIBE on the group; partitions of
// topics the user may not DESCRIBE are left out, with their lag and
// their records in flight.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/broker"
)

// shareGroupInfo is a share group as the console shows it.
type shareGroupInfo struct {
	ID              string `json:"id"`
	Type            string `json:"type"` // share
	State           string `json:"state"`
	ProtocolType    string `json:"protocol_type"` // share
	Protocol        string `json:"protocol"`      // the assignor
	Members         int    `json:"members"`
	Epoch           int32  `json:"epoch"`
	AssignmentEpoch int32  `json:"assignment_epoch"`
	Lag             int64  `json:"lag"` // over the partitions shown
	// Partitions: the share partitions the group has state for, sorted.
	Partitions []sharePartitionInfo `json:"partitions"`
}

// sharePartitionInfo is one share partition of a share group.
type sharePartitionInfo struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"` // share-partition start offset: every record below it is accepted or archived
	EndOffset   int64  `json:"end_offset"`   // the partition's high watermark; -1 when it no longer exists
	Lag         int64  `json:"lag"`          // records not yet accepted or archived; -1 unknown
	Error       string `json:"error,omitempty"`
	// Records in flight by state, from the broker's share coordinator
	// (zero where it has no state for the partition).
	Records shareRecords `json:"records"`
}

// shareRecords are a share partition's records between its start offset
// and its end offset (the next offset never acquired), by state.
type shareRecords struct {
	Available    int64 `json:"available"`
	Acquired     int64 `json:"acquired"`
	Acknowledged int64 `json:"acknowledged"`
	Archived     int64 `json:"archived"`
}

// shareGroupIDs lists the share groups the user may DESCRIBE, sorted.
func (s *Server) shareGroupIDs(ctx context.Context, r *http.Request) ([]string, error) {
	listed, err := s.adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, id := range listed.Groups() {
		if s.may(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// shareGroups describes share groups ids (which the user may DESCRIBE)
// with their partitions (and with records, each partition's records in
// flight), and the members of each; a group that does not exist (any
// more) is left out.
func (s *Server) shareGroups(ctx context.Context, r *http.Request, ids []string, records bool) ([]shareGroupInfo, map[string][]memberInfo, error) {
	if len(ids) == 0 {
		return nil, nil, nil
	}
	described, err := s.adm.DescribeShareGroups(ctx, ids...)
	if err != nil {
		return nil, nil, err
	}
	offsets, err := s.adm.DescribeShareGroupOffsets(ctx, ids...)
	if err != nil {
		return nil, nil, err
	}
	var states map[shareKey]shareRecords
	if records {
		states = shareRecordStates(s.b.ShareGroups())
	}
	var gs []shareGroupInfo
	members := map[string][]memberInfo{}
	topics := map[string]*broker.TopicInfo{} // nil: gone
	for _, id := range ids {
		d, ok := described[id]
		if !ok || errors.Is(d.Err, kerr.GroupIDNotFound) {
			continue
		}
		if d.Err != nil {
			return nil, nil, d.Err
		}
		g := shareGroupInfo{ID: id, Type: "share", State: d.GroupState, ProtocolType: "share", Protocol: d.Assignor,
			Members: len(d.Members), Epoch: d.GroupEpoch, AssignmentEpoch: d.AssignmentEpoch, Partitions: []sharePartitionInfo{}}
		ms := []memberInfo{}
		for _, m := range d.Members {
			ms = append(ms, memberInfo{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost,
				MemberEpoch: &m.MemberEpoch, Assigned: assignedOf(m.Assignment)})
		}
		members[id] = ms
		o := offsets[id]
		if o.Err != nil && !errors.Is(o.Err, kerr.GroupIDNotFound) {
			return nil, nil, o.Err
		}
		for topic, ps := range o.Offsets {
			if !s.may(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic) {
				continue
			}
			ti, seen := topics[topic]
			if !seen {
				if t, ok := s.b.Topic(topic); ok {
					ti = &t
				}
				topics[topic] = ti
			}
			for p, so := range ps {
				sp := sharePartitionInfo{Topic: topic, Partition: p, StartOffset: so.StartOffset, EndOffset: -1, Lag: so.Lag}
				if ti != nil && p >= 0 && int(p) < len(ti.Partitions) {
					sp.EndOffset = ti.Partitions[p].HighWatermark
				}
				if so.Err != nil {
					sp.Error = so.Err.Error()
				}
				sp.Records = states[shareKey{id, topic, p}]
				if sp.Lag > 0 {
					g.Lag += sp.Lag
				}
				g.Partitions = append(g.Partitions, sp)
			}
		}
		slices.SortFunc(g.Partitions, func(a, b sharePartitionInfo) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
		gs = append(gs, g)
	}
	return gs, members, nil
}

// shareKey names one share partition of one share group.
type shareKey struct {
	group, topic string
	partition    int32
}

// shareRecordStates indexes the broker's share partitions' records in
// flight; partitions of deleted topics are left out.
func shareRecordStates(gs []broker.ShareGroupInfo) map[shareKey]shareRecords {
	out := map[shareKey]shareRecords{}
	for _, g := range gs {
		for _, p := range g.Partitions {
			if p.Topic == "" {
				continue
			}
			out[shareKey{g.ID, p.Topic, p.Partition}] = shareRecords{Available: int64(p.Available), Acquired: int64(p.Acquired),
				Acknowledged: int64(p.Acknowledged), Archived: int64(p.Archived)}
		}
	}
	return out
}

// assignedOf is an assignment as topic -> sorted partitions.
func assignedOf(ts kadm.TopicsSet) map[string][]int32 {
	out := map[string][]int32{}
	ts.EachPartitions(func(t string, ps []int32) {
		out[t] = slices.Sorted(slices.Values(ps))
	})
	return out
}

// apiShareGroup answers GET /api/v1/groups/{group} for a share group;
// ok is false when id is not one.
func (s *Server) apiShareGroup(w http.ResponseWriter, r *http.Request, id string) (ok bool) {
	ctx, cancel := contextFor(r, 5*time.Second)
	defer cancel()
	gs, members, err := s.shareGroups(ctx, r, []string{id}, true)
	if err != nil {
		s.fail(w, r, err)
		return true
	}
	if len(gs) == 0 {
		return false
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": gs[0], "members": members[id]})
	return true
}
