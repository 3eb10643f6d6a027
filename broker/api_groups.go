package broker

// The consumer-group APIs, served by the group coordinator
// (internal/groups), which this broker is for every group:
//
//	FindCoordinator v0-4   JoinGroup v0-9       SyncGroup v0-5
//	Heartbeat v0-4         LeaveGroup v0-5      OffsetCommit v0-8
//	OffsetFetch v0-8       DescribeGroups v0-5  ListGroups v0-5
//	DeleteGroups v0-2      OffsetDelete v0
//
// Behaviour:
//   - JoinGroup and SyncGroup block until the group's rebalance
//     completes; Close wakes them (COORDINATOR_NOT_AVAILABLE or
//     REBALANCE_IN_PROGRESS, both retriable).
//   - OffsetCommit replies once the commit is fsynced in the coordinator's
//     internal log; commits to partitions that do not exist get
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - FindCoordinator for transactions gets COORDINATOR_NOT_AVAILABLE.
//   - ListGroups v4+ filters by state (case-insensitive), v5+ by type
//     (only "classic" groups exist).
//   - Skipped: KIP-848 consumer groups (ConsumerGroupHeartbeat), topic ids
//     in OffsetCommit/OffsetFetch (v9+/v10+), authorized operations.
//   - See package internal/groups for the state machine and persistence.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"sluice/internal/groups"
)

func init() {
	register(kmsg.FindCoordinator.Int16(), 0, 4, func(r *request) (kmsg.Response, error) {
		return r.b.groups.FindCoordinator(r.ctx, r.kreq.(*kmsg.FindCoordinatorRequest)), nil
	})
	register(kmsg.JoinGroup.Int16(), 0, 9, func(r *request) (kmsg.Response, error) {
		cl := groups.Client{ID: r.clientID, Host: "/" + r.host}
		return r.b.groups.JoinGroup(r.ctx, cl, r.kreq.(*kmsg.JoinGroupRequest)), nil
	})
	register(kmsg.SyncGroup.Int16(), 0, 5, func(r *request) (kmsg.Response, error) {
		return r.b.groups.SyncGroup(r.ctx, r.kreq.(*kmsg.SyncGroupRequest)), nil
	})
	register(kmsg.Heartbeat.Int16(), 0, 4, func(r *request) (kmsg.Response, error) {
		return r.b.groups.Heartbeat(r.ctx, r.kreq.(*kmsg.HeartbeatRequest)), nil
	})
	register(kmsg.LeaveGroup.Int16(), 0, 5, func(r *request) (kmsg.Response, error) {
		return r.b.groups.LeaveGroup(r.ctx, r.kreq.(*kmsg.LeaveGroupRequest)), nil
	})
	register(kmsg.OffsetCommit.Int16(), 0, 8, func(r *request) (kmsg.Response, error) {
		return r.b.groups.OffsetCommit(r.ctx, r.kreq.(*kmsg.OffsetCommitRequest)), nil
	})
	register(kmsg.OffsetFetch.Int16(), 0, 8, func(r *request) (kmsg.Response, error) {
		return r.b.groups.OffsetFetch(r.ctx, r.kreq.(*kmsg.OffsetFetchRequest)), nil
	})
	register(kmsg.DescribeGroups.Int16(), 0, 5, func(r *request) (kmsg.Response, error) {
		return r.b.groups.DescribeGroups(r.ctx, r.kreq.(*kmsg.DescribeGroupsRequest)), nil
	})
	register(kmsg.ListGroups.Int16(), 0, 5, func(r *request) (kmsg.Response, error) {
		return r.b.groups.ListGroups(r.ctx, r.kreq.(*kmsg.ListGroupsRequest)), nil
	})
	register(kmsg.DeleteGroups.Int16(), 0, 2, func(r *request) (kmsg.Response, error) {
		return r.b.groups.DeleteGroups(r.ctx, r.kreq.(*kmsg.DeleteGroupsRequest)), nil
	})
	register(kmsg.OffsetDelete.Int16(), 0, 0, func(r *request) (kmsg.Response, error) {
		return r.b.groups.OffsetDelete(r.ctx, r.kreq.(*kmsg.OffsetDeleteRequest)), nil
	})
}
