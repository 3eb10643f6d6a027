package broker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// addShareSamples adds the share-group APIs' requests to authzSamples.
func addShareSamples(add func(kmsg.Request, int16, bool)) {
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "g", "m-authz", []string{"t"}
	add(hb, 1, true)
	d := kmsg.NewPtrShareGroupDescribeRequest()
	d.GroupIDs = []string{"g"}
	add(d, 1, true)
	f := kmsg.NewPtrShareFetchRequest()
	f.GroupID, f.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr("m-authz")
	add(f, 2, true)
	a := kmsg.NewPtrShareAcknowledgeRequest()
	a.GroupID, a.MemberID = kmsg.StringPtr("g"), kmsg.StringPtr("m-authz")
	add(a, 2, true)
	o := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	o.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "g"}}
	add(o, 1, true)
	al := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	al.GroupID = "g"
	add(al, 0, true)
	dl := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	dl.GroupID = "g"
	add(dl, 0, true)
}

// shareOpts are broker settings that make share-group tests quick: the
// group reads from the earliest offset, locks last 2 s.
func shareOpts(s ShareGroupSettings) Opt {
	if s.AutoOffsetReset == "" {
		s.AutoOffsetReset = "earliest"
	}
	if s.RecordLockDuration == 0 {
		s.RecordLockDuration = 2 * time.Second
	}
	if s.HeartbeatInterval == 0 {
		s.HeartbeatInterval = 200 * time.Millisecond
	}
	return ShareGroups(s)
}

func produceN(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func shareClient(t *testing.T, tb *testBroker, group, topic string, opts ...kgo.Opt) *kgo.Client {
	return tb.client(append([]kgo.Opt{kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(300 * time.Millisecond)}, opts...)...)
}

// TestShareGroupAcceptEachOnce: four kgo share consumers on a
// two-partition topic together accept every record exactly once.
func TestShareGroupAcceptEachOnce(t *testing.T) {
	tb := startTest(t, shareOpts(ShareGroupSettings{}), DefaultPartitions(2))
	if err := tb.b.CreateTopic(t.Context(), "q", 2, nil); err != nil {
		t.Fatal(err)
	}
	const n = 400
	produceN(t, tb.client(), "q", 0, n)
	var mu sync.Mutex
	seen := map[string]int{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		cl := shareClient(t, tb, "sg", "q")
		wg.Go(func() {
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					mu.Unlock()
					r.Ack(kgo.AckAccept)
				})
				_ = cl.FlushAcks(ctx)
			}
		})
	}
	WaitFor(t, "every record accepted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	// Nothing more arrives: accepted records are never redelivered.
	waitAcked(t, tb, "sg", n)
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for v, c := range seen {
		if c != 1 {
			t.Errorf("record %s delivered %d times", v, c)
		}
	}
	// The group is listed and described as a share group.
	lg := dialRaw(t, tb.b.Addr()).roundTrip(&kmsg.ListGroupsRequest{Version: 5}).(*kmsg.ListGroupsResponse)
	found := false
	for _, g := range lg.Groups {
		if g.Group == "sg" && g.GroupType == "share" && g.ProtocolType == "share" {
			found = true
		}
	}
	if !found {
		t.Errorf("ListGroups: %+v lacks share group sg", lg.Groups)
	}
	d := kmsg.NewPtrShareGroupDescribeRequest()
	d.Version, d.GroupIDs = 1, []string{"sg", "nope"}
	dr := dialRaw(t, tb.b.Addr()).roundTrip(d).(*kmsg.ShareGroupDescribeResponse)
	if len(dr.Groups) != 2 || dr.Groups[0].ErrorCode != 0 || dr.Groups[0].Assignor != "simple" || dr.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("ShareGroupDescribe: %+v", dr.Groups)
	}
}

// waitAcked waits until group's share partitions hold no record in
// flight and their start offsets sum to n.
func waitAcked(t *testing.T, tb *testBroker, group string, n int64) {
	t.Helper()
	WaitFor(t, "the share partitions to settle", func() bool {
		for _, s := range tb.b.shareCoordinator().Summaries() {
			if s.ID != group {
				continue
			}
			var sum int64
			for _, p := range s.Parts {
				if p.End != p.Start {
					return false
				}
				sum += p.Start
			}
			return sum == n
		}
		return false
	})
}

// TestShareGroupReleaseRejectLimit: a released record is delivered
// again (to any member), a rejected one never, and one released at the
// delivery limit is archived.
func TestShareGroupReleaseRejectLimit(t *testing.T) {
	tb := startTest(t, shareOpts(ShareGroupSettings{DeliveryCountLimit: 3}))
	if err := tb.b.CreateTopic(t.Context(), "q", 2, nil); err != nil {
		t.Fatal(err)
	}
	produceN(t, tb.client(), "q", 0, 30)
	cl := shareClient(t, tb, "sg", "q")
	ctx := t.Context()
	deliveries := map[string][]int32{}
	for {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			deliveries[v] = append(deliveries[v], r.DeliveryCount())
			var i int
			fmt.Sscan(v, &i)
			switch {
			case i%3 == 0:
				r.Ack(kgo.AckReject)
			case i%3 == 1:
				r.Ack(kgo.AckRelease) // every time: archived at the limit
			default:
				if len(deliveries[v]) == 1 {
					r.Ack(kgo.AckRelease)
				} else {
					r.Ack(kgo.AckAccept)
				}
			}
		})
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
		done := len(deliveries) == 30
		for v, ds := range deliveries {
			var i int
			fmt.Sscan(v, &i)
			if (i%3 == 1 && len(ds) < 3) || (i%3 == 2 && len(ds) < 2) {
				done = false
			}
		}
		if done {
			break
		}
	}
	waitAcked(t, tb, "sg", 30)
	for v, ds := range deliveries {
		var i int
		fmt.Sscan(v, &i)
		want := []int{1, 3, 2}[i%3]
		if len(ds) != want {
			t.Errorf("record %s delivered %d times (counts %v), want %d", v, len(ds), ds, want)
		}
		for k, c := range ds {
			if c != int32(k+1) {
				t.Errorf("record %s delivery %d has count %d", v, k+1, c)
			}
		}
	}
	var archived int
	for _, s := range tb.b.shareCoordinator().Summaries() {
		for _, p := range s.Parts {
			archived += p.Archived + p.Acknowledged // settled records still in the window
		}
	}
	if archived != 0 {
		t.Errorf("%d settled records left in flight", archived)
	}
}

// TestShareGroupLockExpiry: records a consumer acquires and never
// acknowledges are delivered to another after the lock duration, with
// delivery count 2.
func TestShareGroupLockExpiry(t *testing.T) {
	tb := startTest(t, shareOpts(ShareGroupSettings{RecordLockDuration: time.Second}))
	if err := tb.b.CreateTopic(t.Context(), "q", 1, nil); err != nil {
		t.Fatal(err)
	}
	rs := []*kgo.Record{{Topic: "q", Value: []byte("a")}, {Topic: "q", Value: []byte("b")}}
	if err := tb.client().ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A raw member acquires both records and goes silent.
	c := dialRaw(t, tb.b.Addr())
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "sg", "silent", []string{"q"}
	hr := c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse)
	if hr.ErrorCode != 0 || hr.Assignment == nil || len(hr.Assignment.TopicPartitions) != 1 {
		t.Fatalf("heartbeat: %+v", hr)
	}
	f := kmsg.NewPtrShareFetchRequest()
	f.Version, f.GroupID, f.MemberID, f.MaxWaitMillis, f.MaxRecords = 2, kmsg.StringPtr("sg"), kmsg.StringPtr("silent"), 5000, 10
	f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: hr.Assignment.TopicPartitions[0].TopicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	fr := c.roundTrip(f).(*kmsg.ShareFetchResponse)
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("share fetch: %+v", fr)
	}
	if ar := fr.Topics[0].Partitions[0].AcquiredRecords[0]; ar.FirstOffset != 0 || ar.LastOffset != 1 || ar.DeliveryCount != 1 {
		t.Fatalf("share fetch: %+v", fr)
	}
	if fr.AcquisitionLockTimeoutMillis != 1000 {
		t.Errorf("lock timeout %d, want 1000", fr.AcquisitionLockTimeoutMillis)
	}
	cl := shareClient(t, tb, "sg", "q")
	got := map[string]int32{}
	for len(got) < 2 {
		cl.PollFetches(t.Context()).EachRecord(func(r *kgo.Record) {
			got[string(r.Value)] = r.DeliveryCount()
			r.Ack(kgo.AckAccept)
		})
	}
	if got["a"] != 2 || got["b"] != 2 {
		t.Errorf("redelivered with counts %v, want 2 each", got)
	}
	// The silent member's late acknowledgement is refused.
	a := kmsg.NewPtrShareAcknowledgeRequest()
	a.Version, a.GroupID, a.MemberID, a.ShareSessionEpoch = 2, kmsg.StringPtr("sg"), kmsg.StringPtr("silent"), 1
	a.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: f.Topics[0].TopicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
		AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 1, AcknowledgeTypes: []int8{1}}}}}}}
	ar := c.roundTrip(a).(*kmsg.ShareAcknowledgeResponse)
	if ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Errorf("late acknowledgement: %+v", ar)
	}
}

// TestShareGroupNamespace: a share group's id is not a consumer group's
// and the reverse, answered as Kafka answers.
func TestShareGroupNamespace(t *testing.T) {
	tb := startTest(t, shareOpts(ShareGroupSettings{}))
	if err := tb.b.CreateTopic(t.Context(), "q", 1, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, tb.b.Addr())
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "sg", "m1", []string{"q"}
	if r := c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch < 1 {
		t.Fatalf("share join: %+v", r)
	}
	chb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	chb.Version, chb.Group, chb.MemberID, chb.RebalanceTimeoutMillis = 1, "sg", "c1", 10000
	chb.SubscribedTopicNames = []string{"q"}
	chb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := c.roundTrip(chb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("consumer heartbeat on a share group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	chb.Group = "cg"
	if r := c.roundTrip(chb).(*kmsg.ConsumerGroupHeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("consumer join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	hb.GroupID = "cg"
	if r := c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("share heartbeat on a consumer group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = 8, "sg", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "q", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if r := c.roundTrip(oc).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("offset commit to a share group: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Version, jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = 5, "sg", "consumer", 10000, 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	if r := c.roundTrip(jg).(*kmsg.JoinGroupResponse); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("classic join of a share group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Unknown sessions and stale epochs.
	f := kmsg.NewPtrShareFetchRequest()
	f.Version, f.GroupID, f.MemberID, f.ShareSessionEpoch = 2, kmsg.StringPtr("sg"), kmsg.StringPtr("m1"), 3
	if r := c.roundTrip(f).(*kmsg.ShareFetchResponse); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Errorf("fetch without a session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	f.ShareSessionEpoch = 0
	if r := c.roundTrip(f).(*kmsg.ShareFetchResponse); r.ErrorCode != 0 {
		t.Errorf("open a session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	f.ShareSessionEpoch = 5
	if r := c.roundTrip(f).(*kmsg.ShareFetchResponse); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Errorf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// DeleteGroups: refused while the share group has a member.
	del := func() int16 {
		r := c.roundTrip(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"sg"}}).(*kmsg.DeleteGroupsResponse)
		return r.Groups[0].ErrorCode
	}
	if code := del(); code != kerr.NonEmptyGroup.Code {
		t.Errorf("delete with a member: %v", kerr.ErrorForCode(code))
	}
	hb.GroupID, hb.MemberEpoch = "sg", -1
	if r := c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	if code := del(); code != 0 {
		t.Errorf("delete: %v", kerr.ErrorForCode(code))
	}
	if tb.b.shareCoordinator().Exists("sg") {
		t.Error("share group sg still exists")
	}
}

// TestShareGroupSettingsChecked: New refuses share settings outside
// Kafka's bounds, naming the setting.
func TestShareGroupSettingsChecked(t *testing.T) {
	for _, s := range []ShareGroupSettings{{DeliveryCountLimit: 11}, {PartitionMaxRecordLocks: 5}, {AutoOffsetReset: "middle"}, {IsolationLevel: "dirty"}, {HeartbeatInterval: time.Minute}} {
		if b, err := New(DataDir(t.TempDir()), ListenAddr("127.0.0.1:0"), ShareGroups(s)); err == nil {
			b.Close()
			t.Errorf("New accepted %+v", s)
		}
	}
}

// TestShareGroupConnClose: the records a consumer acquired are released
// when the connection that opened its share session closes, long before
// their locks expire.
func TestShareGroupConnClose(t *testing.T) {
	tb := startTest(t, shareOpts(ShareGroupSettings{RecordLockDuration: 10 * time.Minute}))
	if err := tb.b.CreateTopic(t.Context(), "q", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := tb.client().ProduceSync(t.Context(), &kgo.Record{Topic: "q", Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, tb.b.Addr())
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "sg", "gone", []string{"q"}
	hr := c.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse)
	if hr.ErrorCode != 0 || hr.Assignment == nil || len(hr.Assignment.TopicPartitions) != 1 {
		t.Fatalf("heartbeat: %+v", hr)
	}
	f := kmsg.NewPtrShareFetchRequest()
	f.Version, f.GroupID, f.MemberID, f.MaxWaitMillis = 2, kmsg.StringPtr("sg"), kmsg.StringPtr("gone"), 5000
	f.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: hr.Assignment.TopicPartitions[0].TopicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	if fr := c.roundTrip(f).(*kmsg.ShareFetchResponse); fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("share fetch: %+v", fr)
	}
	c.nc.Close()
	cl := shareClient(t, tb, "sg", "q")
	for {
		var got int32
		cl.PollFetches(t.Context()).EachRecord(func(r *kgo.Record) {
			got = r.DeliveryCount()
			r.Ack(kgo.AckAccept)
		})
		if got != 0 {
			if got != 2 {
				t.Fatalf("redelivered with count %d, want 2", got)
			}
			return
		}
	}
}

// TestShareGroupMetrics: the share group's series follow its state: a
// record acquired and not acknowledged is in flight and in the lag; once
// accepted the lag is 0 and the start offset has moved past it.
func TestShareGroupMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	tb := startTest(t, shareOpts(ShareGroupSettings{}), Registerer(reg))
	if err := tb.b.CreateTopic(t.Context(), "q", 1, nil); err != nil {
		t.Fatal(err)
	}
	rs := []*kgo.Record{{Topic: "q", Value: []byte("a")}, {Topic: "q", Value: []byte("b")}}
	if err := tb.client().ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		metrics:
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
						continue metrics
					}
				}
				return m.GetGauge().GetValue()
			}
		}
		return -1
	}
	cl := shareClient(t, tb, "sg", "q")
	var held []*kgo.Record
	for len(held) < 2 {
		cl.PollFetches(t.Context()).EachRecord(func(r *kgo.Record) { held = append(held, r) })
	}
	g := map[string]string{"group": "sg"}
	if v := value("sluice_share_group_records_in_flight", map[string]string{"group": "sg", "state": "acquired"}); v != 2 {
		t.Errorf("acquired records %v, want 2", v)
	}
	if v := value("sluice_share_group_lag", g); v != 2 {
		t.Errorf("lag %v, want 2", v)
	}
	if v := value("sluice_share_group_members", g); v != 1 {
		t.Errorf("members %v, want 1", v)
	}
	for _, r := range held {
		r.Ack(kgo.AckAccept)
	}
	if err := cl.FlushAcks(t.Context()); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, "the lag to reach 0", func() bool { return value("sluice_share_group_lag", g) == 0 })
	if v := value("sluice_share_partition_start_offset", map[string]string{"group": "sg", "topic": "q", "partition": "0"}); v != 2 {
		t.Errorf("start offset %v, want 2", v)
	}
}

// TestShareGroupReadCommitted: with share.isolation.level read_committed
// a share consumer gets the committed transactions' records and the
// plain ones, never an aborted transaction's or an open one's.
func TestShareGroupReadCommitted(t *testing.T) {
	tb := startTest(t, shareOpts(ShareGroupSettings{IsolationLevel: "read_committed"}))
	if err := tb.b.CreateTopic(t.Context(), "q", 1, nil); err != nil {
		t.Fatal(err)
	}
	tx := tb.client(kgo.TransactionalID("share-tx"))
	produceTxn(t, tx, "q", true, "c1", "c2")
	produceTxn(t, tx, "q", false, "x1", "x2")
	produceTxn(t, tx, "q", true, "c3")
	// An open transaction stops delivery at its first record until it ends.
	open := tb.client(kgo.TransactionalID("share-tx-open"))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(t.Context(), &kgo.Record{Topic: "q", Value: []byte("o1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tb.client().ProduceSync(t.Context(), &kgo.Record{Topic: "q", Value: []byte("p1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl := shareClient(t, tb, "sg", "q")
	var got []string
	poll := func(until int) {
		for len(got) < until {
			cl.PollFetches(t.Context()).EachRecord(func(r *kgo.Record) {
				got = append(got, string(r.Value))
				r.Ack(kgo.AckAccept)
			})
		}
	}
	poll(3)
	if err := open.EndTransaction(t.Context(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	poll(4)
	if want := []string{"c1", "c2", "c3", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed share consumer got %v, want %v", got, want)
	}
}

// TestShareGroupOffsetAdmin: kadm's share-group offset calls: an empty
// group's start moves where AlterShareGroupOffsets says (only the
// records after it are delivered), DescribeShareGroupOffsets reports
// start and lag, DeleteShareGroupOffsets forgets the state; both refuse
// a group with members.
func TestShareGroupOffsetAdmin(t *testing.T) {
	tb := startTest(t, shareOpts(ShareGroupSettings{}))
	if err := tb.b.CreateTopic(t.Context(), "q", 1, nil); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: "q", Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := tb.client().ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(tb.client())
	ctx := t.Context()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "q", Partition: 0, At: 6})
	if r, err := adm.AlterShareGroupOffsets(ctx, "sg", offs); err != nil || r.Error() != nil {
		t.Fatalf("alter: %v %v", err, r.Error())
	}
	d, err := adm.DescribeShareGroupOffsets(ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := d["sg"].Offsets.Lookup("q", 0); !ok || o.StartOffset != 6 || o.Lag != 4 {
		t.Fatalf("described %+v %v", o, ok)
	}
	cl := shareClient(t, tb, "sg", "q")
	var got []string
	for len(got) < 4 {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			r.Ack(kgo.AckAccept)
		})
	}
	if !slices.Equal(got, []string{"6", "7", "8", "9"}) {
		t.Fatalf("after the alter got %v", got)
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := adm.AlterShareGroupOffsets(ctx, "sg", offs); err == nil && r.Error() == nil {
		t.Fatal("alter accepted with a member in the group")
	}
	cl.Close()
	WaitFor(t, "the member to leave", func() bool {
		s, _ := tb.b.shareCoordinator().Summary("sg")
		return len(s.Members) == 0
	})
	if r, err := adm.DeleteShareGroupOffsets(ctx, "sg", "q"); err != nil || r.Error() != nil {
		t.Fatalf("delete: %v %v", err, r.Error())
	}
	if s, _ := tb.b.shareCoordinator().Summary("sg"); len(s.Parts) != 0 {
		t.Fatalf("share partitions left after the delete: %+v", s.Parts)
	}
}

// TestShareGroupsInspect: ShareGroups reports each share partition's
// offsets and records in flight by state as a kgo share consumer left
// them, with the topic's name and id.
func TestShareGroupsInspect(t *testing.T) {
	tb := startTest(t, shareOpts(ShareGroupSettings{RecordLockDuration: time.Minute}))
	if got := tb.b.ShareGroups(); len(got) != 0 {
		t.Fatalf("ShareGroups before any share group = %+v", got)
	}
	if err := tb.b.CreateTopic(t.Context(), "q", 1, nil); err != nil {
		t.Fatal(err)
	}
	// One batch of five: one share fetch acquires them all.
	pr := tb.client(kgo.ProducerLinger(time.Minute))
	ctx := t.Context()
	errs := make(chan error, 5)
	for i := range 5 {
		pr.Produce(ctx, &kgo.Record{Topic: "q", Value: fmt.Appendf(nil, "%d", i)}, func(_ *kgo.Record, err error) { errs <- err })
	}
	if err := pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	cl := shareClient(t, tb, "sg", "q", kgo.ShareMaxRecords(5), kgo.ShareMaxRecordsStrict())
	var got []*kgo.Record
	for len(got) == 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		got = fs.Records()
	}
	if len(got) != 5 {
		t.Fatalf("the first share fetch acquired %d records, want the batch of 5", len(got))
	}
	for _, r := range got {
		switch r.Offset {
		case 1:
			r.Ack(kgo.AckReject)
		case 2:
			r.Ack(kgo.AckAccept)
		case 3:
			r.Ack(kgo.AckRelease)
		}
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	ti, _ := tb.b.Topic("q")
	// 0 and 4 acquired, 1 archived, 2 acknowledged, 3 available.
	want := SharePartitionInfo{Topic: "q", TopicID: ti.ID, Partition: 0, StartOffset: 0, EndOffset: 5,
		Available: 1, Acquired: 2, Acknowledged: 1, Archived: 1}
	var gs []ShareGroupInfo
	WaitFor(t, "the acknowledgements to be applied", func() bool {
		gs = tb.b.ShareGroups()
		return len(gs) == 1 && len(gs[0].Partitions) == 1 && gs[0].Partitions[0] == want
	})
	if g := gs[0]; g.ID != "sg" || g.Members != 1 || g.Epoch < 1 || g.State != "Stable" {
		t.Errorf("share group = %+v", g)
	}
}
