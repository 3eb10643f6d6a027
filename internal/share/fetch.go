package share

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/internal/batch"
)

// defaultMaxRecords is what a fetch asking for no record count gets
// (KIP-1206's default).
const defaultMaxRecords = 500

// ackBatch is one acknowledgement batch of a request.
type ackBatch struct {
	first, last int64
	types       []int8
}

// partResult is one partition's outcome of a request.
type partResult struct {
	code, ackCode int16
	msg, ackMsg   string
	records       []byte
	ranges        []Range
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// openSession checks a request's share session epoch and advances it:
// 0 opens a new session (holding add), a positive epoch must be the
// session's next, -1 closes it (close reports that). It returns an
// error code and message, 0 when the request may proceed.
func (c *Coordinator) openSession(group, member string, epoch int32, add []TP, forget []TP, isFetch bool, conn any) (sess *session, closeIt bool, code int16, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, kerr.CoordinatorNotAvailable.Code, "the broker is shutting down"
	}
	key := sessionKey{group, member}
	s := c.sessions[key]
	switch {
	case epoch == 0 && !isFetch:
		return nil, false, kerr.InvalidShareSessionEpoch.Code, "ShareAcknowledge cannot open a share session (epoch 0)"
	case epoch == 0:
		s = &session{epoch: 1, parts: map[TP]bool{}, conn: conn}
		c.sessions[key] = s
	case s == nil:
		return nil, false, kerr.ShareSessionNotFound.Code, "no share session for member " + member + " of group " + group + "; open one with epoch 0"
	case epoch == -1:
		delete(c.sessions, key)
		closeIt = true
	case epoch != s.epoch:
		return nil, false, kerr.InvalidShareSessionEpoch.Code, fmt.Sprintf("share session epoch %d, expected %d", epoch, s.epoch)
	default:
		s.epoch++
		if s.epoch < 0 {
			s.epoch = 1 // wraps as Kafka's does
		}
	}
	for _, tp := range add {
		if !s.parts[tp] {
			s.parts[tp] = true
			s.order = append(s.order, tp)
		}
	}
	for _, tp := range forget {
		if s.parts[tp] {
			delete(s.parts, tp)
			s.order = slices.DeleteFunc(s.order, func(x TP) bool { return x == tp })
		}
	}
	cp := &session{epoch: s.epoch, parts: s.parts, order: slices.Clone(s.order)}
	return cp, closeIt, 0, ""
}

// acknowledge applies member's acknowledgements to g's share partitions
// and waits until they are durable, filling each partition's result.
func (c *Coordinator) acknowledge(g *group, member string, acks map[TP][]ackBatch, renewOK bool, res map[TP]*partResult) {
	type pending struct {
		tp   TP
		wait func() error
	}
	var waits []pending
	released := false
	nowMs := c.cfg.Now().UnixMilli()
	lim := c.groupLimits(g.id)
	for tp, bs := range acks {
		r := res[tp]
		c.mu.Lock()
		sp := g.parts[tp]
		c.mu.Unlock()
		if sp == nil {
			r.ackCode, r.ackMsg = kerr.InvalidRecordState.Code, "no records of this partition are in flight for the group"
			continue
		}
		wait, err := c.change(sp, func(st *spState) {
			for _, b := range bs {
				if err := st.ack(member, b.first, b.last, b.types, renewOK, nowMs, lim); err != nil {
					var ae *ackError
					errors.As(err, &ae)
					if r.ackCode == 0 {
						r.ackCode, r.ackMsg = ae.code, ae.msg
					}
					continue
				}
				if slices.Contains(b.types, int8(AckRelease)) {
					released = true
				}
			}
		})
		if err != nil {
			r.ackCode, r.ackMsg = kerr.KafkaStorageError.Code, err.Error()
			continue
		}
		waits = append(waits, pending{tp, wait})
	}
	for _, p := range waits {
		if err := p.wait(); err != nil {
			res[p.tp].ackCode, res[p.tp].ackMsg = kerr.KafkaStorageError.Code, "the acknowledgement was not made durable: "+err.Error()
		}
	}
	if released {
		c.broadcast()
	}
}

// acquire reads sp's log from its next fetch offset and acquires what
// it may for member, queuing the state change; wait returns once it is
// durable.
func (c *Coordinator) acquire(sp *sharePartition, l Log, member string, lim Limits, committed bool, maxBytes, maxRecords int, strict bool) (recs []byte, ranges []Range, wait func() error, err error) {
	nowMs := c.cfg.Now().UnixMilli()
	var rerr error
	wait, err = c.change(sp, func(st *spState) {
		st.trimTo(l.StartOffset())
		limit := l.HighWatermark()
		if committed {
			limit = l.LastStableOffset()
		}
		off := st.nextFetch()
		if off >= limit || (off >= st.end() && len(st.recs) >= lim.MaxLocks) {
			return
		}
		b, err := l.Read(off, committed, maxBytes)
		if err != nil {
			rerr = err
			return
		}
		var bs []Batch
		var raws [][]byte
		_, err = batch.Split(b, func(h batch.Header, raw []byte) error {
			if h.BaseOffset >= limit {
				return nil
			}
			skip := h.Control() || (committed && h.Transactional() && l.AbortedBatch(&h))
			bs = append(bs, Batch{First: h.BaseOffset, Last: min(h.LastOffset(), limit-1), Skip: skip})
			raws = append(raws, raw)
			return nil
		})
		if err != nil {
			rerr = err
			return
		}
		var used []bool
		ranges, used = st.acquire(member, bs, maxRecords, strict, nowMs, lim)
		for i, u := range used {
			if u {
				recs = append(recs, raws[i]...)
			}
		}
	})
	if err == nil {
		err = rerr
	}
	return recs, ranges, wait, err
}

// Fetch serves ShareFetch: the share session, the piggybacked
// acknowledgements, then acquisition from the session's partitions,
// waiting up to MaxWaitMillis for records. readable, when not nil,
// tells whether the caller may read a topic. Acquired records are
// durable (their delivery counts) before the response returns. conn
// identifies the client's connection: a session opened on it closes
// with it (ConnClosed).
func (c *Coordinator) Fetch(ctx context.Context, req *kmsg.ShareFetchRequest, readable func(topic string) bool, conn any) *kmsg.ShareFetchResponse {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(code int16, msg string) *kmsg.ShareFetchResponse {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp
	}
	group, member := deref(req.GroupID), deref(req.MemberID)
	resp.AcquisitionLockTimeoutMillis = int32(c.groupLimits(group).LockMs)
	if group == "" || !validMemberID(member) {
		return fail(kerr.InvalidRequest.Code, "ShareFetch needs a group id and a member id of 1 to 36 characters")
	}
	renew := req.Version >= 2 && req.IsRenewAck
	acks := map[TP][]ackBatch{}
	var add []TP
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := TP{t.TopicID, p.Partition}
			add = append(add, tp)
			for _, b := range p.AcknowledgementBatches {
				acks[tp] = append(acks[tp], ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
			}
			if renew && len(p.AcknowledgementBatches) == 0 {
				return fail(kerr.InvalidRequest.Code, "a renewing ShareFetch lists only partitions with acknowledgements")
			}
		}
	}
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		return fail(kerr.InvalidRequest.Code, "a renewing ShareFetch must not fetch: its MaxBytes, MinBytes, MaxRecords and MaxWaitMillis must be 0")
	}
	if req.ShareSessionEpoch == 0 && len(acks) > 0 {
		return fail(kerr.InvalidRequest.Code, "a ShareFetch opening a share session (epoch 0) cannot acknowledge")
	}
	var forget []TP
	for _, f := range req.ForgottenTopicsData {
		for _, p := range f.Partitions {
			forget = append(forget, TP{f.TopicID, p})
		}
	}
	sess, closing, code, msg := c.openSession(group, member, req.ShareSessionEpoch, add, forget, true, conn)
	if code != 0 {
		return fail(code, msg)
	}
	g, err := c.ensureGroup(group)
	if err != nil {
		return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
	}
	res := map[TP]*partResult{}
	var order []TP
	result := func(tp TP) *partResult {
		r := res[tp]
		if r == nil {
			r = &partResult{}
			res[tp] = r
			order = append(order, tp)
		}
		return r
	}
	for tp := range acks {
		result(tp)
	}
	c.acknowledge(g, member, acks, renew, res)
	if closing {
		if c.releaseMember(g, member) {
			c.broadcast()
		}
	}
	if !closing && !renew {
		c.fetchInto(ctx, g, member, sess, req, readable, result)
	}
	for _, tp := range order {
		r := res[tp]
		idx := -1
		for i := range resp.Topics {
			if resp.Topics[i].TopicID == tp.Topic {
				idx = i
			}
		}
		if idx < 0 {
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = tp.Topic
			resp.Topics = append(resp.Topics, t)
			idx = len(resp.Topics) - 1
		}
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = tp.Partition
		p.ErrorCode, p.ErrorMessage = r.code, strp(r.msg)
		p.AcknowledgeErrorCode, p.AcknowledgeErrorMessage = r.ackCode, strp(r.ackMsg)
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		p.Records = r.records
		for _, rg := range r.ranges {
			p.AcquiredRecords = append(p.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: rg.First, LastOffset: rg.Last, DeliveryCount: rg.Count})
		}
		resp.Topics[idx].Partitions = append(resp.Topics[idx].Partitions, p)
	}
	return resp
}

// fetchInto acquires records from the session's partitions into
// results, waiting up to the request's MaxWaitMillis for some.
func (c *Coordinator) fetchInto(ctx context.Context, g *group, member string, sess *session, req *kmsg.ShareFetchRequest, readable func(string) bool, result func(TP) *partResult) {
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = defaultMaxRecords
	}
	strict := req.Version >= 2 && req.ShareAcquireMode == 1
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 30
	}
	partMax := map[TP]int{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if p.PartitionMaxBytes > 0 {
				partMax[TP{t.TopicID, p.Partition}] = int(p.PartitionMaxBytes)
			}
		}
	}
	set := c.groupSettings(g.id)
	committed := set.IsolationLevel == "read_committed"
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	// Rotate the start so that every partition gets its turn.
	tps := sess.order
	if len(tps) > 1 {
		k := int(sess.epoch) % len(tps)
		tps = append(slices.Clone(tps[k:]), tps[:k]...)
	}
	for {
		hw, stopWatch := c.cfg.Logs.Watch(tps)
		avail := c.changed()
		got := 0
		type pending struct {
			tp   TP
			wait func() error
		}
		var waits []pending
		bytesLeft := maxBytes
		for _, tp := range tps {
			if got >= maxRecords || bytesLeft <= 0 {
				break
			}
			l, topic, ok := c.cfg.Logs.Log(tp)
			if !ok {
				r := result(tp)
				r.code, r.msg = kerr.UnknownTopicID.Code, "no such topic id or partition"
				continue
			}
			if readable != nil && !readable(topic) {
				r := result(tp)
				r.code, r.msg = kerr.TopicAuthorizationFailed.Code, "not authorized to read topic "+topic
				continue
			}
			sp, err := c.partition(g, tp, l)
			if err != nil {
				r := result(tp)
				r.code, r.msg = kerr.KafkaStorageError.Code, err.Error()
				continue
			}
			mb := bytesLeft
			if pm, ok := partMax[tp]; ok {
				mb = min(mb, pm)
			}
			recs, ranges, wait, err := c.acquire(sp, l, member, set.limits(), committed, mb, maxRecords-got, strict)
			if err != nil {
				r := result(tp)
				r.code, r.msg = kerr.KafkaStorageError.Code, "reading the partition failed: "+err.Error()
			}
			if wait != nil {
				waits = append(waits, pending{tp, wait})
			}
			if len(ranges) > 0 {
				r := result(tp)
				r.records, r.ranges = append(r.records, recs...), append(r.ranges, ranges...)
				for _, rg := range ranges {
					got += int(rg.Last - rg.First + 1)
				}
				bytesLeft -= len(recs)
			}
		}
		for _, p := range waits {
			if err := p.wait(); err != nil {
				r := result(p.tp)
				r.code, r.msg = kerr.KafkaStorageError.Code, "the acquisition was not made durable: "+err.Error()
				r.records, r.ranges = nil, nil
			}
		}
		if got > 0 || len(tps) == 0 {
			stopWatch()
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			stopWatch()
			return
		}
		t := time.NewTimer(left)
		select {
		case <-hw:
		case <-avail:
		case <-t.C:
		case <-ctx.Done():
		case <-c.stop:
		}
		t.Stop()
		stopWatch()
		if ctx.Err() != nil || c.isStopping() {
			return
		}
	}
}

func (c *Coordinator) isStopping() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Acknowledge serves ShareAcknowledge: the acknowledgements of a share
// session's member, durable before the response returns.
func (c *Coordinator) Acknowledge(req *kmsg.ShareAcknowledgeRequest) *kmsg.ShareAcknowledgeResponse {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(code int16, msg string) *kmsg.ShareAcknowledgeResponse {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp
	}
	group, member := deref(req.GroupID), deref(req.MemberID)
	resp.AcquisitionLockTimeoutMillis = int32(c.groupLimits(group).LockMs)
	if group == "" || !validMemberID(member) {
		return fail(kerr.InvalidRequest.Code, "ShareAcknowledge needs a group id and a member id of 1 to 36 characters")
	}
	renew := req.Version >= 2 && req.IsRenewAck
	_, closing, code, msg := c.openSession(group, member, req.ShareSessionEpoch, nil, nil, false, nil)
	if code != 0 {
		return fail(code, msg)
	}
	c.mu.Lock()
	g := c.groups[group]
	c.mu.Unlock()
	acks := map[TP][]ackBatch{}
	res := map[TP]*partResult{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := TP{t.TopicID, p.Partition}
			res[tp] = &partResult{}
			for _, b := range p.AcknowledgementBatches {
				acks[tp] = append(acks[tp], ackBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
			}
		}
	}
	if g != nil {
		c.acknowledge(g, member, acks, renew, res)
		if closing && c.releaseMember(g, member) {
			c.broadcast()
		}
	} else {
		for _, r := range res {
			r.ackCode, r.ackMsg = kerr.InvalidRecordState.Code, "share group "+group+" has no records in flight"
		}
	}
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			r := res[TP{t.TopicID, p.Partition}]
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = r.ackCode, strp(r.ackMsg)
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// ConnClosed closes the share sessions opened on conn and releases the
// records their members hold, as Kafka does when a share consumer's
// connection closes.
func (c *Coordinator) ConnClosed(conn any) {
	if conn == nil {
		return
	}
	type gone struct {
		g      *group
		member string
	}
	var left []gone
	c.mu.Lock()
	for k, s := range c.sessions {
		if s.conn == conn {
			delete(c.sessions, k)
			if g := c.groups[k.group]; g != nil {
				left = append(left, gone{g, k.member})
			}
		}
	}
	c.mu.Unlock()
	released := false
	for _, l := range left {
		if c.releaseMember(l.g, l.member) {
			released = true
		}
	}
	if released {
		c.broadcast()
	}
}
