package broker

// Share groups (KIP-932), served by the share coordinator
// (internal/share, whose doc.go draws the state and its durability):
//
//   - ShareGroupHeartbeat v1: members join (epoch 0), heartbeat and
//     leave (-1); the simple assignor spreads each subscribed topic's
//     partitions over its members, sharing a partition between several
//     members when there are more members than partitions.
//   - ShareGroupDescribe v1.
//   - ShareFetch v1-2: share sessions (epoch 0 opens, -1 closes, each
//     request carries the next epoch; partitions added and forgotten
//     incrementally), piggybacked acknowledgements, acquisition locks,
//     batch-optimized and record-limit acquisition (KIP-1206), renewing
//     acknowledgements (KIP-1222, v2). Acknowledged and archived records
//     and the delivery counts of acquired ones are fsynced before the
//     response is written.
//   - ShareAcknowledge v1-2.
//   - A share session belongs to the connection that opened it: when
//     the connection closes, the session goes and its member's records
//     are released, as Kafka does.
//   - DescribeShareGroupOffsets v0-1, AlterShareGroupOffsets v0,
//     DeleteShareGroupOffsets v0 (share_admin.go).
//
// Version 0 of each was Kafka 4.0's early access, removed in 4.1, and
// is not served. Group ids share one namespace with classic and
// consumer groups: a share request for a consumer group's id is
// answered GROUP_ID_NOT_FOUND, a classic or consumer request for a
// share group's id INCONSISTENT_GROUP_PROTOCOL, as Kafka answers.
// ListGroups lists share groups with type "share"; DescribeGroups
// describes them with protocol type "share"; DeleteGroups deletes an
// empty one (NON_EMPTY_GROUP while it has members).
// A group's own share settings are GROUP config resources
// (share_groupconfig.go).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/batch"
	"github.com/sluicedb/sluice/internal/partition"
	"github.com/sluicedb/sluice/internal/share"
)

func init() {
	register(kmsg.ShareGroupHeartbeat.Int16(), 1, 1, handleShareGroupHeartbeat)
	register(kmsg.ShareGroupDescribe.Int16(), 1, 1, handleShareGroupDescribe)
	register(kmsg.ShareFetch.Int16(), 1, 2, handleShareFetch)
	register(kmsg.ShareAcknowledge.Int16(), 1, 2, handleShareAcknowledge)
	apiACLs[kmsg.ShareGroupHeartbeat.Int16()] = []aclNeed{{opRead, resGroup, ""}, {opDescribe, resTopic, ""}}
	apiACLs[kmsg.ShareGroupDescribe.Int16()] = []aclNeed{{opDescribe, resGroup, ""}, {opDescribe, resTopic, "not checked: assignments are listed as Kafka lists them"}}
	apiACLs[kmsg.ShareFetch.Int16()] = []aclNeed{{opRead, resGroup, ""}, {opRead, resTopic, "each partition fetched"}}
	apiACLs[kmsg.ShareAcknowledge.Int16()] = []aclNeed{{opRead, resGroup, ""}, {opRead, resTopic, "each topic acknowledged"}}
}

// ShareGroupSettings are the broker's settings for share groups, named
// after Kafka's broker settings; zero values take Kafka's defaults.
type ShareGroupSettings struct {
	// RecordLockDuration: group.share.record.lock.duration.ms (30 s).
	RecordLockDuration time.Duration
	// DeliveryCountLimit: group.share.delivery.count.limit (5).
	DeliveryCountLimit int
	// PartitionMaxRecordLocks: group.share.partition.max.record.locks (2000).
	PartitionMaxRecordLocks int
	// HeartbeatInterval: group.share.heartbeat.interval.ms (5 s).
	HeartbeatInterval time.Duration
	// SessionTimeout: group.share.session.timeout.ms (45 s).
	SessionTimeout time.Duration
	// MaxSize: group.share.max.size (200).
	MaxSize int
	// AutoOffsetReset: every share group's share.auto.offset.reset,
	// "latest" (default), "earliest", or "by_duration:" and an ISO-8601
	// duration such as PT1H (the first record at most that long ago).
	AutoOffsetReset string
	// IsolationLevel: every share group's share.isolation.level,
	// "read_uncommitted" (default) or "read_committed".
	IsolationLevel string
}

// ShareGroups sets the share-group settings; New rejects values outside
// Kafka's bounds.
func ShareGroups(s ShareGroupSettings) Opt {
	return opt(func(c *cfg) { c.shareGroups = s })
}

func (s ShareGroupSettings) settings() share.Settings {
	return share.Settings{
		RecordLockDuration: s.RecordLockDuration, DeliveryCountLimit: s.DeliveryCountLimit,
		PartitionMaxRecordLocks: s.PartitionMaxRecordLocks, HeartbeatInterval: s.HeartbeatInterval,
		SessionTimeout: s.SessionTimeout, MaxSize: s.MaxSize,
		AutoOffsetReset: s.AutoOffsetReset, IsolationLevel: s.IsolationLevel,
	}
}

// openShare opens the share coordinator.
func (b *Broker) openShare() (*share.Coordinator, error) {
	c, err := share.Open(share.Config{
		FS:       b.fs,
		Dir:      b.layout.CoordinatorDir("share"),
		Logs:     shareLogs{b},
		Settings: b.cfg.shareGroups.settings(),
		Logger:   b.componentLogger("share"),
		// a group's own settings (share_groupconfig.go)
		GroupSettings: b.shareGroupSettings,
	})
	if err != nil {
		return nil, fmt.Errorf("broker: open share coordinator: %w", err)
	}
	return c, nil
}

// shareLogs is the broker's topics as the share coordinator sees them.
type shareLogs struct{ b *Broker }

func (s shareLogs) Topics() map[string]share.TopicInfo {
	out := map[string]share.TopicInfo{}
	for n, t := range s.b.groupTopics() {
		out[n] = share.TopicInfo{ID: t.ID, Partitions: t.Partitions}
	}
	return out
}

func (s shareLogs) Log(tp share.TP) (share.Log, string, bool) {
	t := s.b.lookupID(tp.Topic)
	if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.parts) {
		return nil, "", false
	}
	return sharePartLog{t.parts[tp.Partition]}, t.name, true
}

func (s shareLogs) Watch(tps []share.TP) (<-chan struct{}, func()) {
	w := partition.NewWaiter()
	for _, tp := range tps {
		if t := s.b.lookupID(tp.Topic); t != nil && tp.Partition >= 0 && int(tp.Partition) < len(t.parts) {
			w.Watch(t.parts[tp.Partition])
		}
	}
	return w.C(), w.Stop
}

type sharePartLog struct{ p *partition.Partition }

func (l sharePartLog) StartOffset() int64      { return l.p.StartOffset() }
func (l sharePartLog) HighWatermark() int64    { return l.p.HighWatermark() }
func (l sharePartLog) LastStableOffset() int64 { return l.p.LastStableOffset() }

func (l sharePartLog) AbortedBatch(h *batch.Header) bool { return l.p.AbortedBatch(h) }

func (l sharePartLog) OffsetForTime(ms int64) (int64, error) {
	off, _, err := l.p.ListOffset(ms, false)
	return off, err
}

func (l sharePartLog) Read(offset int64, committed bool, maxBytes int) ([]byte, error) {
	s, _, err := l.p.Read(offset, committed, maxBytes)
	if err != nil {
		return nil, err
	}
	return s.Bytes()
}

// shareCoordinator returns the share coordinator, or nil before Start.
func (b *Broker) shareCoordinator() *share.Coordinator { return b.sharec.Load() }

var errShareNotReady = errors.New("the share coordinator is not open")

// consumerGroupExists reports whether id is a classic or consumer group.
func (b *Broker) consumerGroupExists(ctx context.Context, id string) bool {
	if b.groups == nil {
		return false
	}
	resp := b.groups.DescribeGroups(ctx, &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{id}})
	if len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 && resp.Groups[0].State != "Dead" {
		return true // classic
	}
	cr := b.groups.ConsumerGroupDescribe(ctx, &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{id}})
	return len(cr.Groups) == 1 && cr.Groups[0].ErrorCode == 0
}

// isShareGroup reports whether id is a share group, for the classic and
// consumer group APIs (INCONSISTENT_GROUP_PROTOCOL).
func (b *Broker) isShareGroup(id string) bool {
	sc := b.shareCoordinator()
	return sc != nil && sc.Exists(id)
}

func handleShareGroupHeartbeat(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	if !r.allowed(opRead, resGroup, req.GroupID) {
		return fail(kerr.GroupAuthorizationFailed.Code, "not authorized to read share group "+req.GroupID)
	}
	for _, t := range req.SubscribedTopicNames {
		if !r.allowed(opDescribe, resTopic, t) {
			return fail(kerr.TopicAuthorizationFailed.Code, "not authorized to describe topic "+t)
		}
	}
	sc := r.b.shareCoordinator()
	if sc == nil {
		return fail(kerr.CoordinatorNotAvailable.Code, errShareNotReady.Error())
	}
	if req.MemberEpoch == 0 && !sc.Exists(req.GroupID) && r.b.consumerGroupExists(r.ctx, req.GroupID) {
		return fail(kerr.GroupIDNotFound.Code, "group "+req.GroupID+" is a consumer group, not a share group")
	}
	return sc.Heartbeat(share.Client{ID: r.clientID, Host: "/" + r.host}, req), nil
}

func handleShareGroupDescribe(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ShareGroupDescribeRequest)
	sc := r.b.shareCoordinator()
	if sc == nil {
		resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
		for _, id := range req.GroupIDs {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	resp := sc.Describe(req)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		switch {
		case !r.allowed(opDescribe, resGroup, g.GroupID):
			id := g.GroupID
			*g = kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			g.ErrorMessage = strPtr("not authorized to describe group " + id)
		case g.ErrorCode == kerr.GroupIDNotFound.Code && r.b.consumerGroupExists(r.ctx, g.GroupID):
			g.ErrorMessage = strPtr("group " + g.GroupID + " is a consumer group, not a share group")
		case g.ErrorCode == 0 && req.IncludeAuthorizedOperations:
			g.AuthorizedOperations = r.authorizedOps(resGroup, g.GroupID)
		}
	}
	return resp, nil
}

func handleShareFetch(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	group := ""
	if req.GroupID != nil {
		group = *req.GroupID
	}
	if !r.allowed(opRead, resGroup, group) {
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupAuthorizationFailed.Code, strPtr("not authorized to read share group "+group)
		return resp, nil
	}
	sc := r.b.shareCoordinator()
	if sc == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.CoordinatorNotAvailable.Code, strPtr(errShareNotReady.Error())
		return resp, nil
	}
	if req.ShareSessionEpoch == 0 && !sc.Exists(group) && r.b.consumerGroupExists(r.ctx, group) {
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupIDNotFound.Code, strPtr("group "+group+" is a consumer group, not a share group")
		return resp, nil
	}
	var readable func(string) bool
	if r.b.authz != nil && !r.internal {
		readable = func(t string) bool { return r.allowed(opRead, resTopic, t) }
	}
	return sc.Fetch(r.ctx, req, readable, r.c), nil
}

func handleShareAcknowledge(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ShareAcknowledgeRequest)
	group := ""
	if req.GroupID != nil {
		group = *req.GroupID
	}
	if !r.allowed(opRead, resGroup, group) {
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		resp.ErrorCode, resp.ErrorMessage = kerr.GroupAuthorizationFailed.Code, strPtr("not authorized to read share group "+group)
		return resp, nil
	}
	sc := r.b.shareCoordinator()
	if sc == nil {
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		resp.ErrorCode, resp.ErrorMessage = kerr.CoordinatorNotAvailable.Code, strPtr(errShareNotReady.Error())
		return resp, nil
	}
	for _, t := range req.Topics {
		if tp := r.b.lookupID(t.TopicID); tp != nil && !r.allowed(opRead, resTopic, tp.name) {
			resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
			resp.ErrorCode, resp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, strPtr("not authorized to read topic "+tp.name)
			return resp, nil
		}
	}
	return sc.Acknowledge(req), nil
}

// shareConnClosed releases the records held through the share sessions
// a closed connection opened.
func (b *Broker) shareConnClosed(c *conn) {
	if sc := b.shareCoordinator(); sc != nil {
		sc.ConnClosed(c)
	}
}

// shareListGroups adds the share groups to a ListGroups response, as
// Kafka lists them: protocol type and group type "share".
func (b *Broker) shareListGroups(req *kmsg.ListGroupsRequest, resp *kmsg.ListGroupsResponse) {
	sc := b.shareCoordinator()
	if sc == nil {
		return
	}
	if len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, "share") {
		return
	}
	for _, s := range sc.Summaries() {
		if len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, s.State) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = s.ID, "share", s.State, "share"
		resp.Groups = append(resp.Groups, g)
	}
}

// shareDeleteGroups deletes, in a DeleteGroups response, the groups the
// group coordinator does not know that are share groups.
func (b *Broker) shareDeleteGroups(resp *kmsg.DeleteGroupsResponse) {
	sc := b.shareCoordinator()
	if sc == nil {
		return
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if g.ErrorCode == kerr.GroupIDNotFound.Code && sc.Exists(g.Group) {
			g.ErrorCode, _ = sc.Delete(g.Group) // DeleteGroups carries no message
		}
	}
}

// shareDescribeGroups describes, in a DescribeGroups response, the
// groups the group coordinator does not know that are share groups.
func (b *Broker) shareDescribeGroups(resp *kmsg.DescribeGroupsResponse) {
	sc := b.shareCoordinator()
	if sc == nil {
		return
	}
	var ss map[string]share.GroupSummary
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if g.ErrorCode != 0 && g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorCode == 0 && g.State != "Dead" {
			continue
		}
		if ss == nil {
			ss = map[string]share.GroupSummary{}
			for _, s := range sc.Summaries() {
				ss[s.ID] = s
			}
		}
		s, ok := ss[g.Group]
		if !ok {
			continue
		}
		id := g.Group
		*g = kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.State, g.ProtocolType = id, s.State, "share"
		for _, m := range s.Members {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.ClientID, dm.ClientHost = m.ID, m.ClientID, m.Host
			g.Members = append(g.Members, dm)
		}
	}
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
