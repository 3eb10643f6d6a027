package broker

// The consumer-group APIs, served by the group coordinator
// (internal/groups), which this broker is for every group:
//
//	FindCoordinator v0-6   JoinGroup v0-9       SyncGroup v0-5
//	Heartbeat v0-4         LeaveGroup v0-5      OffsetCommit v0-9
//	OffsetFetch v0-9       DescribeGroups v0-6  ListGroups v0-5
//	DeleteGroups v0-2      OffsetDelete v0
//
// Behaviour:
//   - JoinGroup and SyncGroup block until the group's rebalance
//     completes; Close wakes them (COORDINATOR_NOT_AVAILABLE or
//     REBALANCE_IN_PROGRESS, both retriable).
//   - OffsetCommit replies once the commit is fsynced in the coordinator's
//     internal log; commits to partitions that do not exist get
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - FindCoordinator for transactions gets COORDINATOR_NOT_AVAILABLE
//     when the broker runs without a transaction coordinator. v5 changes
//     nothing here; v6's share coordinator type (KIP-932) gets
//     INVALID_REQUEST, as share groups are not served.
//   - DescribeGroups v6 (KIP-1043): a group that does not exist gets
//     GROUP_ID_NOT_FOUND with a message, where older versions answer it
//     in state Dead without error.
//   - ListGroups v4+ filters by state (case-insensitive), v5+ by type
//     (only "classic" groups exist).
//   - Authorization (Kafka's table): JoinGroup, SyncGroup, Heartbeat,
//     LeaveGroup need READ on the group; OffsetCommit READ on the group
//     and each topic; OffsetFetch DESCRIBE on the group and each topic
//     (topics not describable are left out of an all-topics answer);
//     FindCoordinator DESCRIBE on the group (or transactional id);
//     DescribeGroups DESCRIBE on each group; ListGroups DESCRIBE on the
//     cluster, else only the groups the principal may DESCRIBE;
//     DeleteGroups DELETE on each group; OffsetDelete DELETE on the group
//     and READ on each topic. Failures get GROUP_AUTHORIZATION_FAILED,
//     TOPIC_AUTHORIZATION_FAILED or TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//   - FindCoordinator answers with the address of the listener the
//     client used.
//   - DescribeGroups v3+ authorized operations (KIP-430): when asked,
//     each group answered without error carries the bitfield of the
//     group operations the principal may perform.
//   - KIP-848 consumer groups: api_consumergroupheartbeat.go and
//     api_consumergroupdescribe.go; OffsetCommit/OffsetFetch v9 carry
//     their member epochs.
//   - Skipped: topic ids in OffsetCommit/OffsetFetch (v10+).
//   - See package internal/groups for the state machine and persistence.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/groups"
)

func init() {
	register(kmsg.FindCoordinator.Int16(), 0, 6, handleFindCoordinator)
	register(kmsg.JoinGroup.Int16(), 0, 9, func(r *request) (kmsg.Response, error) {
		req := r.kreq.(*kmsg.JoinGroupRequest)
		if !r.allowed(opRead, resGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation = kerr.GroupAuthorizationFailed.Code, -1
			return resp, nil
		}
		if r.b.isShareGroup(req.Group) { // share.go
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation = kerr.InconsistentGroupProtocol.Code, -1
			return resp, nil
		}
		cl := groups.Client{ID: r.clientID, Host: "/" + r.host}
		return r.b.groups.JoinGroup(r.ctx, cl, req), nil
	})
	register(kmsg.SyncGroup.Int16(), 0, 5, func(r *request) (kmsg.Response, error) {
		req := r.kreq.(*kmsg.SyncGroupRequest)
		if !r.allowed(opRead, resGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp, nil
		}
		return r.b.groups.SyncGroup(r.ctx, req), nil
	})
	register(kmsg.Heartbeat.Int16(), 0, 4, func(r *request) (kmsg.Response, error) {
		req := r.kreq.(*kmsg.HeartbeatRequest)
		if !r.allowed(opRead, resGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp, nil
		}
		return r.b.groups.Heartbeat(r.ctx, req), nil
	})
	register(kmsg.LeaveGroup.Int16(), 0, 5, func(r *request) (kmsg.Response, error) {
		req := r.kreq.(*kmsg.LeaveGroupRequest)
		if !r.allowed(opRead, resGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp, nil
		}
		return r.b.groups.LeaveGroup(r.ctx, req), nil
	})
	register(kmsg.OffsetCommit.Int16(), 0, 9, handleOffsetCommit) // v9: KIP-848 member epochs
	register(kmsg.OffsetFetch.Int16(), 0, 9, handleOffsetFetch)   // v9: KIP-848 member epochs
	register(kmsg.DescribeGroups.Int16(), 0, 6, func(r *request) (kmsg.Response, error) {
		req := r.kreq.(*kmsg.DescribeGroupsRequest)
		resp := r.b.groups.DescribeGroups(r.ctx, req)
		r.b.shareDescribeGroups(resp) // share.go
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if !r.allowed(opDescribe, resGroup, g.Group) {
				*g = kmsg.NewDescribeGroupsResponseGroup()
				g.Group = req.Groups[i]
				g.ErrorCode = kerr.GroupAuthorizationFailed.Code
				if req.Version >= 6 {
					g.ErrorMessage = strPtr("not authorized to describe group " + g.Group)
				}
			} else if req.Version >= 6 && g.ErrorCode == 0 && g.State == "Dead" && g.ProtocolType != "share" {
				describeGroupNotFound(g)
			} else if req.Version >= 3 && req.IncludeAuthorizedOperations && g.ErrorCode == 0 {
				g.AuthorizedOperations = r.authorizedOps(resGroup, g.Group)
			}
		}
		return resp, nil
	})
	register(kmsg.ListGroups.Int16(), 0, 5, func(r *request) (kmsg.Response, error) {
		resp := r.b.groups.ListGroups(r.ctx, r.kreq.(*kmsg.ListGroupsRequest))
		r.b.shareListGroups(r.kreq.(*kmsg.ListGroupsRequest), resp) // share.go
		if !r.allowedCluster(opDescribe) {
			kept := resp.Groups[:0]
			for _, g := range resp.Groups {
				if r.allowed(opDescribe, resGroup, g.Group) {
					kept = append(kept, g)
				}
			}
			resp.Groups = kept
		}
		return resp, nil
	})
	register(kmsg.DeleteGroups.Int16(), 0, 2, func(r *request) (kmsg.Response, error) {
		req := r.kreq.(*kmsg.DeleteGroupsRequest)
		var ok []string
		var denied []kmsg.DeleteGroupsResponseGroup
		for _, g := range req.Groups {
			if r.allowed(opDelete, resGroup, g) {
				ok = append(ok, g)
				continue
			}
			d := kmsg.NewDeleteGroupsResponseGroup()
			d.Group, d.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			denied = append(denied, d)
		}
		sub := *req
		sub.Groups = ok
		resp := r.b.groups.DeleteGroups(r.ctx, &sub)
		r.b.shareDeleteGroups(resp) // share.go
		resp.Groups = append(resp.Groups, denied...)
		return resp, nil
	})
	register(kmsg.OffsetDelete.Int16(), 0, 0, handleOffsetDelete)
}

func handleFindCoordinator(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := r.b.groups.FindCoordinator(r.ctx, req)
	res, code := resGroup, kerr.GroupAuthorizationFailed.Code
	if req.CoordinatorType == 1 {
		res, code = resTxnID, kerr.TransactionalIDAuthorizationFailed.Code
	}
	adv := r.c.lis.adv
	if req.Version < 4 {
		if !r.allowed(opDescribe, res, req.CoordinatorKey) {
			resp.ErrorCode, resp.ErrorMessage = code, nil
			resp.NodeID, resp.Host, resp.Port = -1, "", -1
		} else if resp.ErrorCode == 0 {
			resp.Host, resp.Port = adv.host, adv.port
		}
		return resp, nil
	}
	for i := range resp.Coordinators {
		c := &resp.Coordinators[i]
		if !r.allowed(opDescribe, res, c.Key) {
			c.ErrorCode, c.ErrorMessage = code, nil
			c.NodeID, c.Host, c.Port = -1, "", -1
		} else if c.ErrorCode == 0 {
			c.Host, c.Port = adv.host, adv.port
		}
	}
	return resp, nil
}

// offsetCommitFailed answers every partition of topics with code.
func offsetCommitFailed(req *kmsg.OffsetCommitRequest, topics []kmsg.OffsetCommitRequestTopic, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func handleOffsetCommit(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	if !r.allowed(opRead, resGroup, req.Group) {
		return offsetCommitFailed(req, req.Topics, kerr.GroupAuthorizationFailed.Code), nil
	}
	sub := *req
	sub.Topics = nil
	var denied []kmsg.OffsetCommitResponseTopic
	for _, t := range req.Topics {
		if r.allowed(opRead, resTopic, t.Topic) {
			sub.Topics = append(sub.Topics, t)
			continue
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: kerr.TopicAuthorizationFailed.Code})
		}
		denied = append(denied, rt)
	}
	if r.b.isShareGroup(req.Group) { // share.go: a share group commits no offsets
		resp := offsetCommitFailed(req, sub.Topics, kerr.GroupIDNotFound.Code)
		resp.Topics = append(resp.Topics, denied...)
		return resp, nil
	}
	resp := r.b.groups.OffsetCommit(r.ctx, &sub)
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}

func handleOffsetFetch(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	if req.Version < 8 {
		if !r.allowed(opDescribe, resGroup, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp, nil
		}
		resp := r.b.groups.OffsetFetch(r.ctx, req)
		all := req.Topics == nil
		kept := resp.Topics[:0]
		for _, t := range resp.Topics {
			if !r.allowed(opDescribe, resTopic, t.Topic) {
				if all {
					continue
				}
				for k := range t.Partitions {
					p := &t.Partitions[k]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, kerr.TopicAuthorizationFailed.Code
				}
			}
			kept = append(kept, t)
		}
		resp.Topics = kept
		return resp, nil
	}
	resp := r.b.groups.OffsetFetch(r.ctx, req)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if !r.allowed(opDescribe, resGroup, g.Group) {
			g.Topics, g.ErrorCode = nil, kerr.GroupAuthorizationFailed.Code
			continue
		}
		all := i < len(req.Groups) && req.Groups[i].Topics == nil
		kept := g.Topics[:0]
		for _, t := range g.Topics {
			if !r.allowed(opDescribe, resTopic, t.Topic) {
				if all {
					continue
				}
				for k := range t.Partitions {
					p := &t.Partitions[k]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, kerr.TopicAuthorizationFailed.Code
				}
			}
			kept = append(kept, t)
		}
		g.Topics = kept
	}
	return resp, nil
}

func handleOffsetDelete(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	if !r.allowed(opDelete, resGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	sub := *req
	sub.Topics = nil
	var denied []kmsg.OffsetDeleteResponseTopic
	for _, t := range req.Topics {
		if r.allowed(opRead, resTopic, t.Topic) {
			sub.Topics = append(sub.Topics, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: kerr.TopicAuthorizationFailed.Code})
		}
		denied = append(denied, rt)
	}
	resp := r.b.groups.OffsetDelete(r.ctx, &sub)
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}
