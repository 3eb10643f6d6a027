package groups

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/sluicedb/sluice/internal/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a manual clock: timers run, synchronously and in time
// order, only inside Advance.
type fakeClock struct {
	mu     sync.Mutex // guards now and timers
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	f    func()
	done bool // fired or stopped; guarded by c.mu
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// Advance moves the clock on by d, running every timer that falls due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.done {
				continue
			}
			live = append(live, t)
			if !t.at.After(target) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		c.timers = live
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		if next.at.After(c.now) {
			c.now = next.at
		}
		next.done = true
		c.mu.Unlock()
		next.f()
	}
}

// memStore is the in-memory store the state-machine tests run over. It
// outlives a coordinator, so a test can reopen one over the same records.
type memStore struct {
	mu          sync.Mutex // guards the fields below
	recs        []memRec
	next        int64
	failNext    error // the next append fails with it, writing nothing
	compactMin  int
	compactions int
	snapshot    func() []kv
	closed      bool
}

type memRec struct {
	off int64
	r   kv
}

func (s *memStore) replay(fn func(int64, kv) error) error {
	s.mu.Lock()
	recs := append([]memRec(nil), s.recs...)
	s.closed = false
	s.mu.Unlock()
	for _, r := range recs {
		if err := fn(r.off, r.r); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) start(snapshot func() []kv) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshot = snapshot
	return nil
}

func (s *memStore) append(recs []kv, apply func(int64)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errStoreClosed
	}
	if err := s.failNext; err != nil {
		s.failNext = nil
		return err
	}
	base := s.next
	for _, r := range recs {
		s.recs = append(s.recs, memRec{s.next, kv{Key: append([]byte(nil), r.Key...), Value: cloneNil(r.Value)}})
		s.next++
	}
	apply(base)
	if s.compactMin > 0 && len(s.recs) > s.compactMin {
		live := s.snapshot()
		if len(s.recs) > 2*len(live) {
			s.recs = s.recs[:0]
			for _, r := range live {
				s.recs = append(s.recs, memRec{s.next, r})
				s.next++
			}
			s.compactions++
		}
	}
	return nil
}

func cloneNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func (s *memStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// harness is a coordinator over a memStore and a fake clock.
type harness struct {
	t     testing.TB
	clock *fakeClock
	st    *memStore
	c     *Coordinator
	cfg   Config
}

func newHarness(t testing.TB, mod func(*Config)) *harness {
	h := &harness{t: t, clock: newFakeClock(), st: &memStore{}}
	h.cfg = Config{FS: vfs.NewMem(), Dir: "groups", NodeID: 1, Host: "127.0.0.1", Port: 9092,
		Now: h.clock.Now, AfterFunc: h.clock.AfterFunc}
	if mod != nil {
		mod(&h.cfg)
	}
	h.reopen()
	return h
}

// reopen closes the coordinator (if open) and opens a new one over the
// same store.
func (h *harness) reopen() {
	h.t.Helper()
	if h.c != nil {
		if err := h.c.Close(); err != nil {
			h.t.Fatal(err)
		}
	}
	cfg, err := h.cfg.withDefaults()
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := open(cfg, h.st, newMetrics(nil))
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	h.t.Cleanup(func() { _ = c.Close() })
}

// joinCall is a JoinGroup in flight; its answer is set by the coordinator.
type joinCall struct {
	mu   sync.Mutex
	resp *kmsg.JoinGroupResponse
	n    int
}

func (j *joinCall) reply(r *kmsg.JoinGroupResponse) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.resp = r
	j.n++
}

func (j *joinCall) get() *kmsg.JoinGroupResponse {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.n > 1 {
		panic(fmt.Sprintf("JoinGroup answered %d times", j.n))
	}
	return j.resp
}

type joinOpt struct {
	version   int16
	instance  string
	meta      []byte // every protocol's metadata; nil: "meta-<name>"
	protocols []string
	session   time.Duration
	rebalance time.Duration
	ptype     string
}

func mkJoinReq(group, memberID string, o joinOpt) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = o.version
	if req.Version == 0 {
		req.Version = 9 // tests ask for older versions explicitly
	}
	req.Group = group
	req.MemberID = memberID
	req.SessionTimeoutMillis = int32(max(o.session, 10*time.Second) / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(max(o.rebalance, 30*time.Second) / time.Millisecond)
	req.ProtocolType = "consumer"
	if o.ptype != "" {
		req.ProtocolType = o.ptype
	}
	if o.instance != "" {
		req.InstanceID = &o.instance
	}
	ps := o.protocols
	if ps == nil {
		ps = []string{"range"}
	}
	for _, p := range ps {
		md := []byte("meta-" + p)
		if o.meta != nil {
			md = o.meta
		}
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: md})
	}
	return req
}

func (h *harness) join(group, memberID string, o joinOpt) *joinCall {
	j := &joinCall{}
	h.c.join(Client{ID: "client", Host: "/127.0.0.1"}, mkJoinReq(group, memberID, o), j.reply)
	return j
}

// newMember performs the v4+ member-id handshake and returns the member
// id and its (possibly still blocked) second JoinGroup.
func (h *harness) newMember(group string, o joinOpt) (string, *joinCall) {
	h.t.Helper()
	first := h.join(group, "", o).get()
	if o.instance != "" {
		if first == nil {
			h.t.Fatalf("static JoinGroup should not need a member id round trip")
		}
		return first.MemberID, &joinCall{resp: first, n: 1}
	}
	if first == nil || first.ErrorCode != errMemberIDRequired || first.MemberID == "" {
		h.t.Fatalf("first JoinGroup: want MEMBER_ID_REQUIRED with an id, got %+v", first)
	}
	return first.MemberID, h.join(group, first.MemberID, o)
}

// syncCall is a SyncGroup in flight.
type syncCall struct {
	mu   sync.Mutex
	resp *kmsg.SyncGroupResponse
}

func (s *syncCall) reply(r *kmsg.SyncGroupResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resp != nil {
		panic("SyncGroup answered twice")
	}
	s.resp = r
}

func (s *syncCall) get() *kmsg.SyncGroupResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resp
}

func (h *harness) sync(group, memberID string, gen int32, assign map[string]string) *syncCall {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, memberID, gen
	ids := make([]string, 0, len(assign))
	for id := range assign {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(assign[id])})
	}
	s := &syncCall{}
	h.c.sync(req, s.reply)
	return s
}

func (h *harness) heartbeat(group, memberID string, gen int32, instance string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = group, memberID, gen
	if instance != "" {
		req.InstanceID = &instance
	}
	return h.c.heartbeat(req)
}

func (h *harness) commit(group, memberID string, gen int32, topic string, partition int32, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = group, memberID, gen
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: partition, Offset: offset, LeaderEpoch: -1}}}}
	resp := h.c.OffsetCommit(nil, req)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetch returns the committed offset of one partition (-1 when none).
func (h *harness) fetch(group, topic string, partition int32) int64 {
	h.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 5
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp := h.c.OffsetFetch(nil, req)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		h.t.Fatalf("OffsetFetch: %+v", resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

func (h *harness) state(group string) string {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	return h.c.DescribeGroups(nil, req).Groups[0].State
}

// stableGroup brings n members of group to Stable in one generation and
// returns their ids (the leader first) and the generation.
func (h *harness) stableGroup(group string, n int) ([]string, int32) {
	h.t.Helper()
	var ids []string
	var calls []*joinCall
	for i := 0; i < n; i++ {
		id, j := h.newMember(group, joinOpt{})
		ids = append(ids, id)
		calls = append(calls, j)
		// Earlier members must rejoin for the new one to get in.
		for k := 0; k < i; k++ {
			if r := calls[k].get(); r != nil {
				calls[k] = h.join(group, ids[k], joinOpt{})
			}
		}
	}
	var gen int32
	var leader string
	for i, j := range calls {
		r := j.get()
		if r == nil || r.ErrorCode != 0 {
			h.t.Fatalf("member %d: JoinGroup not completed: %+v", i, r)
		}
		gen, leader = r.Generation, r.LeaderID
	}
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "a-" + id
	}
	var syncs []*syncCall
	for _, id := range ids {
		if id != leader {
			syncs = append(syncs, h.sync(group, id, gen, nil))
		}
	}
	ls := h.sync(group, leader, gen, assign)
	for _, s := range append(syncs, ls) {
		if r := s.get(); r == nil || r.ErrorCode != 0 {
			h.t.Fatalf("SyncGroup: %+v", r)
		}
	}
	out := []string{leader}
	for _, id := range ids {
		if id != leader {
			out = append(out, id)
		}
	}
	return out, gen
}

var errInjected = errors.New("injected store failure")
