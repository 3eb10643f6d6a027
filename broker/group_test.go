package broker_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

// startGroupBroker starts a broker over dir ("" for a fresh one).
func startGroupBroker(t testing.TB, dir string) *broker.Broker {
	t.Helper()
	if dir == "" {
		return brokertest.Start(t)
	}
	return brokertest.Start(t, broker.DataDir(dir))
}

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceN(t testing.TB, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func createTopic(t testing.TB, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// seen counts how often each record value was consumed.
type seen struct {
	mu sync.Mutex // guards n
	n  map[string]int
}

func (s *seen) total() (distinct, dup int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.n {
		distinct++
		if c > 1 {
			dup++
		}
	}
	return distinct, dup
}

// groupConsumer runs a kgo group member that commits synchronously after
// every poll, before it lets a rebalance proceed.
type groupConsumer struct {
	cl   *kgo.Client
	done chan struct{}
}

func startConsumer(t *testing.T, addr, group, topic string, s *seen, extra ...kgo.Opt) *groupConsumer {
	t.Helper()
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
		}),
	}, extra...)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c := &groupConsumer{cl: cl, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			s.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { s.n[string(r.Value)]++ })
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("commit: %v", err)
			}
			cancel()
			cl.AllowRebalance()
		}
	}()
	return c
}

func (c *groupConsumer) close() {
	c.cl.Close()
	<-c.done
}

func describe(t testing.TB, cl *kgo.Client, group string) kadm.DescribedGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	return ds[group]
}

func TestGroupConsumersExactlyOnceAcrossRebalances(t *testing.T) {
	b := startGroupBroker(t, "")
	admin := newClient(t, b.Addr())
	createTopic(t, admin, "events", 6)
	s := &seen{n: map[string]int{}}
	const phase = 500

	cs := []*groupConsumer{}
	for i := 0; i < 3; i++ {
		cs = append(cs, startConsumer(t, b.Addr(), "g", "events", s))
	}
	defer func() {
		for _, c := range cs {
			c.close()
		}
	}()
	broker.WaitFor(t, "3 stable members", func() bool {
		d := describe(t, admin, "g")
		return d.State == "Stable" && len(d.Members) == 3
	})
	produceN(t, admin, "events", 0, phase)
	broker.WaitFor(t, "phase 1", func() bool { n, _ := s.total(); return n == phase })

	// One member leaves.
	cs[1].close()
	cs = append(cs[:1], cs[2:]...)
	produceN(t, admin, "events", phase, phase)
	broker.WaitFor(t, "phase 2", func() bool { n, _ := s.total(); return n == 2*phase })

	// One joins.
	cs = append(cs, startConsumer(t, b.Addr(), "g", "events", s))
	broker.WaitFor(t, "3 stable members again", func() bool {
		d := describe(t, admin, "g")
		return d.State == "Stable" && len(d.Members) == 3
	})
	produceN(t, admin, "events", 2*phase, phase)
	broker.WaitFor(t, "phase 3", func() bool { n, _ := s.total(); return n == 3*phase })

	// Every record exactly once; nothing more arrives.
	time.Sleep(300 * time.Millisecond)
	n, dup := s.total()
	if n != 3*phase || dup != 0 {
		t.Fatalf("consumed %d distinct records (want %d), %d more than once", n, 3*phase, dup)
	}
	// The committed offsets cover every partition's end.
	ctx := context.Background()
	adm := kadm.NewClient(admin)
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		o, ok := offs.Lookup("events", e.Partition)
		if !ok || o.At != e.Offset {
			t.Errorf("partition %d: committed %v, end %d", e.Partition, o.At, e.Offset)
		}
	})
}

func TestGroupCommittedOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := startGroupBroker(t, dir)
	cl := newClient(t, b.Addr())
	createTopic(t, cl, "t", 3)
	produceN(t, cl, "t", 0, 30)
	s := &seen{n: map[string]int{}}
	c := startConsumer(t, b.Addr(), "g", "t", s)
	broker.WaitFor(t, "30 records", func() bool { n, _ := s.total(); return n == 30 })
	c.close()
	ctx := context.Background()
	before, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := startGroupBroker(t, dir)
	cl2 := newClient(t, b2.Addr())
	after, err := kadm.NewClient(cl2).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	before.Each(func(o kadm.OffsetResponse) {
		a, ok := after.Lookup(o.Topic, o.Partition)
		if !ok || a.At != o.At {
			t.Errorf("%s/%d: %d before restart, %v after", o.Topic, o.Partition, o.At, a)
		}
		total += o.At
	})
	if total != 30 {
		t.Fatalf("committed offsets sum to %d, want 30", total)
	}
	// A consumer of the restarted broker resumes: it sees only new records.
	produceN(t, cl2, "t", 30, 10)
	s2 := &seen{n: map[string]int{}}
	c2 := startConsumer(t, b2.Addr(), "g", "t", s2)
	defer c2.close()
	broker.WaitFor(t, "10 new records", func() bool { n, _ := s2.total(); return n == 10 })
	time.Sleep(200 * time.Millisecond)
	s2.mu.Lock()
	defer s2.mu.Unlock()
	for v := range s2.n {
		if i, _ := strconv.Atoi(v); i < 30 {
			t.Fatalf("record %s consumed again after restart", v)
		}
	}
}

func TestGroupSessionTimeoutRemovesSilentMember(t *testing.T) {
	b := startGroupBroker(t, "")
	admin := newClient(t, b.Addr())
	createTopic(t, admin, "t", 4)
	s := &seen{n: map[string]int{}}
	c := startConsumer(t, b.Addr(), "g", "t", s)
	defer c.close()
	broker.WaitFor(t, "1 stable member", func() bool {
		d := describe(t, admin, "g")
		return d.State == "Stable" && len(d.Members) == 1
	})

	// A raw member joins with a 1.5 s session, syncs once, then goes silent.
	ctx := context.Background()
	meta := kmsg.ConsumerMemberMetadata{Version: 1, Topics: []string{"t"}}
	var memberID string
	var gen int32
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = "g", memberID, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 1500, 10000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: meta.AppendTo(nil)}}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode == 79 { // MEMBER_ID_REQUIRED
			memberID = resp.MemberID
			continue
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("raw JoinGroup: %d", resp.ErrorCode)
		}
		memberID, gen = resp.MemberID, resp.Generation
		break
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.MemberID, sreq.Generation = "g", memberID, gen
	sresp, err := sreq.RequestWith(ctx, admin)
	if err != nil || sresp.ErrorCode != 0 {
		t.Fatalf("raw SyncGroup: %v %+v", err, sresp)
	}
	broker.WaitFor(t, "the silent member's removal and the rebalance", func() bool {
		d := describe(t, admin, "g")
		if d.State != "Stable" || len(d.Members) != 1 {
			return false
		}
		ca, ok := d.Members[0].Assigned.AsConsumer()
		return ok && len(ca.Topics) == 1 && len(ca.Topics[0].Partitions) == 4
	})
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", memberID, gen
	hresp, err := hb.RequestWith(ctx, admin)
	if err != nil || hresp.ErrorCode != 25 { // UNKNOWN_MEMBER_ID
		t.Fatalf("silent member's heartbeat after its removal: %v %+v", err, hresp)
	}
}

func TestGroupStaticMemberRestartWithoutRebalance(t *testing.T) {
	b := startGroupBroker(t, "")
	admin := newClient(t, b.Addr())
	createTopic(t, admin, "t", 4)
	s := &seen{n: map[string]int{}}
	// The range balancer computes the same plan whoever restarts, so a
	// restarted static leader (which franz-go lets re-balance, KIP-814)
	// finds the old plan still right and asks for no rebalance.
	static := func(id string) *groupConsumer {
		return startConsumer(t, b.Addr(), "g", "t", s, kgo.InstanceID(id), kgo.Balancers(kgo.RangeBalancer()))
	}
	cs := map[string]*groupConsumer{"a": static("a"), "b": static("b")}
	defer func() {
		for _, c := range cs {
			c.close()
		}
	}()
	gen := func(id string) int32 { _, g := cs[id].cl.GroupMetadata(); return g }
	var settled int32
	broker.WaitFor(t, "the group to settle", func() bool {
		d := describe(t, admin, "g")
		if d.State != "Stable" || len(d.Members) != 2 || gen("a") != gen("b") {
			return false
		}
		settled = gen("a")
		time.Sleep(300 * time.Millisecond) // several heartbeats: still the same generation?
		return gen("a") == settled && gen("b") == settled
	})

	for _, restart := range []string{"a", "b"} {
		other := map[string]string{"a": "b", "b": "a"}[restart]
		cs[restart].close() // a static member does not leave on close
		cs[restart] = static(restart)
		broker.WaitFor(t, restart+"'s restart to join", func() bool { id, _ := cs[restart].cl.GroupMetadata(); return id != "" })
		if g := gen(restart); g != settled {
			t.Fatalf("restarted static member %s is in generation %d, the group was in %d", restart, g, settled)
		}
		time.Sleep(500 * time.Millisecond) // several heartbeat intervals
		if g := gen(other); g != settled {
			t.Fatalf("after %s restarted, %s moved from generation %d to %d: a rebalance happened", restart, other, settled, g)
		}
		d := describe(t, admin, "g")
		if d.State != "Stable" || len(d.Members) != 2 {
			t.Fatalf("group after %s's static restart: %+v", restart, d)
		}
	}
}

// joinStorm starts groups × members kgo consumers at once and returns how
// long it took until every group was Stable with all its members.
func joinStorm(t testing.TB, addr string, round, groups, members int) time.Duration {
	admin := newClient(t, addr)
	topic := fmt.Sprintf("storm-%d", round)
	createTopic(t, admin, topic, int32(members))
	start := time.Now()
	var cls []*kgo.Client
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < groups; g++ {
		for m := 0; m < members; m++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(fmt.Sprintf("storm-%d-%d", round, g)),
					kgo.ConsumeTopics(topic), kgo.HeartbeatInterval(100*time.Millisecond))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				cls = append(cls, cl)
				mu.Unlock()
				go cl.PollFetches(context.Background()) // starts joining; returns on Close
			}()
		}
	}
	wg.Wait()
	defer func() {
		for _, cl := range cls {
			cl.Close()
		}
	}()
	names := make([]string, groups)
	for g := range names {
		names[g] = fmt.Sprintf("storm-%d-%d", round, g)
	}
	adm := kadm.NewClient(admin)
	broker.WaitFor(t, "every storm group to be stable", func() bool {
		ds, err := adm.DescribeGroups(context.Background(), names...)
		if err != nil {
			return false
		}
		for _, d := range ds {
			if d.Err != nil {
				t.Fatalf("group %s: %v", d.Group, d.Err)
			}
			if d.State != "Stable" || len(d.Members) != members {
				return false
			}
		}
		return true
	})
	return time.Since(start)
}

func TestGroupJoinStormKgo(t *testing.T) {
	b := startGroupBroker(t, "")
	groups := 30 // BenchmarkGroupJoinStormKgo runs the full 100
	if testing.Short() {
		groups = 10
	}
	d := joinStorm(t, b.Addr(), 0, groups, 3)
	t.Logf("%d groups x 3 kgo members stable in %v", groups, d)
}

// BenchmarkGroupJoinStormKgo: one op is a storm of 100 groups × 3 kgo
// consumers joining at once, until every group is Stable.
func BenchmarkGroupJoinStormKgo(b *testing.B) {
	br := startGroupBroker(b, "")
	round := 0
	for b.Loop() {
		round++
		joinStorm(b, br.Addr(), round, 100, 3)
	}
}
