package groups

// FindCoordinator v0-4, DescribeGroups v0-5, ListGroups v0-4 and
// DeleteGroups v0-2.
//
// Behaviour notes:
//   - This broker coordinates every group and every transactional id:
//     FindCoordinator answers this node for key types 0 (group) and 1
//     (transaction) unless Config.NoTransactions is set.
//   - DescribeGroups of an unknown group answers state Dead with no error,
//     as Kafka does. Authorized operations are not computed.
//   - DeleteGroups deletes only empty groups (NON_EMPTY_GROUP otherwise),
//     writing tombstones for the group and all its offsets.

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator handles a FindCoordinator request; v4+ may ask for many keys.
func (c *Coordinator) FindCoordinator(_ context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	r := kmsg.NewPtrFindCoordinatorResponse()
	r.Version = req.Version
	find := func(key string) (int16, string) {
		switch {
		case c.closing.Load():
			return errCoordinatorNotAvailable, "the coordinator is shutting down"
		case req.CoordinatorType == 1 && c.cfg.NoTransactions:
			return errCoordinatorNotAvailable, "transactions are not supported"
		case req.CoordinatorType != 0 && req.CoordinatorType != 1:
			return errInvalidRequest, "unknown coordinator type"
		case key == "":
			return errInvalidRequest, "empty coordinator key"
		}
		return errNone, ""
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key = key
			rc.NodeID, rc.Host, rc.Port = c.cfg.NodeID, c.cfg.Host, c.cfg.Port
			code, msg := find(key)
			if code != errNone {
				rc.ErrorCode, rc.ErrorMessage = code, &msg
				rc.NodeID, rc.Host, rc.Port = -1, "", -1
			}
			r.Coordinators = append(r.Coordinators, rc)
		}
		return r
	}
	code, msg := find(req.CoordinatorKey)
	if code != errNone {
		r.ErrorCode, r.ErrorMessage = code, &msg
		r.NodeID, r.Port = -1, -1
		return r
	}
	r.NodeID, r.Host, r.Port = c.cfg.NodeID, c.cfg.Host, c.cfg.Port
	return r
}

// DescribeGroups handles a DescribeGroups request.
func (c *Coordinator) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	r := kmsg.NewPtrDescribeGroupsResponse()
	r.Version = req.Version
	for _, id := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = id
		d.AuthorizedOperations = -2147483648 // the broker fills it in when asked (KIP-430)
		g := c.lookup(id)
		switch {
		case c.closing.Load():
			d.ErrorCode = errCoordinatorNotAvailable
		case id == "":
			d.ErrorCode = errInvalidGroupID
		case g == nil:
			d.State = stateDead.String()
		default:
			g.mu.Lock()
			if g.cg != nil {
				d.ErrorCode = errGroupIDNotFound
				msg := "Group " + id + " is not a classic group."
				d.ErrorMessage = &msg
				g.mu.Unlock()
				break
			}
			d.State = g.state.String()
			d.ProtocolType = g.protocolType
			if g.state == stateStable || g.state == stateCompleting {
				d.Protocol = g.protocol
			}
			for _, m := range sortedMembers(g) {
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID = m.id
				dm.InstanceID = m.instancePtr()
				dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
				dm.ProtocolMetadata = m.metadataFor(g.protocol)
				if dm.ProtocolMetadata == nil {
					dm.ProtocolMetadata = []byte{}
				}
				dm.MemberAssignment = []byte{}
				if g.state == stateStable && m.assignment != nil {
					dm.MemberAssignment = m.assignment
				}
				d.Members = append(d.Members, dm)
			}
			g.mu.Unlock()
		}
		r.Groups = append(r.Groups, d)
	}
	return r
}

// ListGroups handles a ListGroups request (v4+ filter by state).
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	r := kmsg.NewPtrListGroupsResponse()
	r.Version = req.Version
	if c.closing.Load() {
		r.ErrorCode = errCoordinatorNotAvailable
		return r
	}
	typeOK := func(typ string) bool {
		if req.Version < 5 || len(req.TypesFilter) == 0 {
			return true
		}
		for _, t := range req.TypesFilter {
			if strings.EqualFold(t, typ) {
				return true
			}
		}
		return false
	}
	for _, g := range c.groupList() {
		g.mu.Lock()
		st, pt := g.state, g.protocolType
		stName, typ := st.String(), "classic"
		if g.cg != nil {
			stName, typ = g.cg.stateName(), "consumer"
		}
		g.mu.Unlock()
		if st == stateDead || !typeOK(typ) {
			continue
		}
		if len(req.StatesFilter) > 0 && req.Version >= 4 {
			keep := false
			for _, s := range req.StatesFilter {
				keep = keep || strings.EqualFold(s, stName)
			}
			if !keep {
				continue
			}
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.id, pt, stName, typ
		r.Groups = append(r.Groups, lg)
	}
	return r
}

// DeleteGroups handles a DeleteGroups request.
func (c *Coordinator) DeleteGroups(_ context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	r := kmsg.NewPtrDeleteGroupsResponse()
	r.Version = req.Version
	for _, id := range req.Groups {
		d := kmsg.NewDeleteGroupsResponseGroup()
		d.Group = id
		d.ErrorCode = c.deleteGroup(id)
		r.Groups = append(r.Groups, d)
	}
	return r
}

func (c *Coordinator) deleteGroup(id string) int16 {
	if c.closing.Load() {
		return errCoordinatorNotAvailable
	}
	if id == "" {
		return errInvalidGroupID
	}
	g := c.lookup(id)
	if g == nil {
		return errGroupIDNotFound
	}
	g.persistMu.Lock()
	defer g.persistMu.Unlock()
	now := c.now()
	g.mu.Lock()
	switch {
	case g.state == stateDead:
		g.mu.Unlock()
		return errGroupIDNotFound
	case g.state != stateEmpty || len(g.pending) > 0:
		g.mu.Unlock()
		return errNonEmptyGroup
	}
	g.setStateLocked(stateDead, now)
	var recs []kv
	for _, k := range sortedKeys(g.offsets) {
		recs = append(recs, kv{Key: offsetKey(g.id, k.topic, k.partition)})
	}
	recs = append(recs, g.tombstonesLocked()...)
	g.mu.Unlock()
	var err error
	if len(recs) > 0 {
		err = c.st.append(recs, func(int64) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.offsets = map[tp]*committed{}
			g.meta = nil
			g.cg, g.cgRecorded = nil, false
		})
	}
	if err != nil {
		c.cfg.Logger.Warn("groups: deleting group failed", "group", g.id, "err", err)
		g.mu.Lock()
		g.setStateLocked(stateEmpty, now)
		g.mu.Unlock()
		return errCoordinatorNotAvailable
	}
	c.remove(g)
	return errNone
}
