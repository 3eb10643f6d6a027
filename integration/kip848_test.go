package integration

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/broker"
)

// consumerGroupSettings shorten the consumer-group timers so members
// that die are noticed within the test's patience.
var consumerGroupSettings = broker.ConsumerGroups(broker.ConsumerGroupSettings{
	SessionTimeout: 6 * time.Second, MinSessionTimeout: time.Second,
	HeartbeatInterval: 200 * time.Millisecond, MinHeartbeatInterval: 100 * time.Millisecond,
})

// seenSet collects consumed values and wakes waiters on every addition.
type seenSet struct {
	mu      sync.Mutex // guards the fields below
	seen    map[string]int
	changed chan struct{} // closed and replaced on every add
}

func newSeenSet() *seenSet { return &seenSet{seen: map[string]int{}, changed: make(chan struct{})} }

func (s *seenSet) add(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[v]++
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitDistinct waits until n distinct values have been seen.
func (s *seenSet) waitDistinct(t *testing.T, n int, d time.Duration) {
	t.Helper()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		have, ch := len(s.seen), s.changed
		s.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("%d distinct values consumed after %v, want %d", have, d, n)
		}
	}
}

func (s *seenSet) check(t *testing.T, n int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range n {
		if s.seen[fmt.Sprintf("v%d", i)] == 0 {
			t.Fatalf("value v%d never consumed (%d distinct seen)", i, len(s.seen))
		}
	}
	if len(s.seen) != n {
		t.Fatalf("%d distinct values consumed, want %d", len(s.seen), n)
	}
}

// member is a KIP-848 consumer (kgo.ServerSideBalancer) polling in a
// goroutine into a seenSet, with autocommit (and commits on revoke).
type member struct {
	cl   *kgo.Client
	stop context.CancelFunc
	done chan struct{}
}

func startMember(t *testing.T, addr, group string, seen *seenSet, opts ...kgo.Opt) *member {
	t.Helper()
	return startPolling(t, seen, append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(200 * time.Millisecond)}, opts...)...)
}

// startPolling starts a member with a client made with opts, polling
// into seen.
func startPolling(t *testing.T, seen *seenSet, opts ...kgo.Opt) *member {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{cl: cl, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { seen.add(string(r.Value)) })
		}
	}()
	return m
}

// leave stops polling and closes the client, which leaves the group
// (epoch -1, or -2 for a static member) after committing.
func (m *member) leave() {
	m.stop()
	<-m.done
	m.cl.Close()
}

// adminClient is a client of the broker at addr for a few requests;
// the caller closes it.
func adminClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func describeConsumerGroup(t *testing.T, addr, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	cl := adminClient(t, addr)
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctxT(t, 10*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0]
}

func createTopicAt(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	cl := adminClient(t, addr)
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t, 10*time.Second), partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// waitLagZero waits until the group's committed offsets reach the end of
// every partition of topic. The members commit every 200 ms; each round
// waits on a commit round trip.
func waitLagZero(t *testing.T, addr, group, topic string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		lag := committedLag(t, addr, group, topic)
		total := int64(0)
		for _, l := range lag {
			total += l
		}
		if total == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed lag of %s on %s stays %v", group, topic, lag)
		}
		waitHeartbeat(t, addr, group)
	}
}

// TestKIP848MembersComeAndGo: three franz-go members with the server-side
// balancer consume a 12-partition topic; one leaves, one joins, and the
// static member is restarted (keeping its assignment, without a new
// group epoch). Every record is consumed and the committed offsets reach
// the end of every partition.
func TestKIP848MembersComeAndGo(t *testing.T) {
	n := startNode(t, consumerGroupSettings)
	const topic, group = "kip848", "kip848-group"
	createTopicAt(t, n.addr, topic, 12)
	seen := newSeenSet()
	produceValues(t, n.addr, topic, 0, 1200)
	sub := kgo.ConsumeTopics(topic)
	a := startMember(t, n.addr, group, seen, sub)
	b := startMember(t, n.addr, group, seen, sub)
	s := startMember(t, n.addr, group, seen, sub, kgo.InstanceID("static-1"))
	seen.waitDistinct(t, 1200, 60*time.Second)
	waitStable(t, n.addr, group, 3)

	b.leave()
	produceValues(t, n.addr, topic, 1200, 600)
	seen.waitDistinct(t, 1800, 60*time.Second)
	c := startMember(t, n.addr, group, seen, sub)
	waitStable(t, n.addr, group, 3)
	produceValues(t, n.addr, topic, 1800, 600)
	seen.waitDistinct(t, 2400, 60*time.Second)

	// Restart the static member: the new incarnation takes over the
	// assignment its predecessor left with epoch -2.
	d := waitStable(t, n.addr, group, 3)
	before, oldID := staticAssignment(d, "static-1")
	s.leave()
	s = startMember(t, n.addr, group, seen, sub, kgo.InstanceID("static-1"))
	d2 := waitGroup(t, n.addr, group, 3, func(d kmsg.ConsumerGroupDescribeResponseGroup) bool {
		_, id := staticAssignment(d, "static-1")
		return id != oldID
	})
	after, newID := staticAssignment(d2, "static-1")
	if newID == oldID || after != before {
		t.Fatalf("restarted static member %s got %s; %s had %s", newID, after, oldID, before)
	}
	if d2.Epoch != d.Epoch {
		t.Fatalf("static restart moved the group epoch from %d to %d", d.Epoch, d2.Epoch)
	}
	produceValues(t, n.addr, topic, 2400, 600)
	seen.waitDistinct(t, 3000, 60*time.Second)
	waitLagZero(t, n.addr, group, topic)
	seen.check(t, 3000)
	for _, m := range []*member{a, c, s} {
		m.leave()
	}
	// The static member left with epoch -2: it stays, away, its
	// assignment reserved until its session times out.
	d3 := describeConsumerGroup(t, n.addr, group)
	if len(d3.Members) != 1 || d3.Members[0].MemberEpoch != -2 || d3.State != "Stable" {
		t.Fatalf("group after every member left: %s, %+v", d3.State, d3.Members)
	}
}

// waitStable waits until the group is Stable with n members and every
// partition assigned, and returns its description.
func waitStable(t *testing.T, addr, group string, n int) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	return waitGroup(t, addr, group, n, func(kmsg.ConsumerGroupDescribeResponseGroup) bool { return true })
}

// waitGroup is waitStable that also waits for ok to hold.
func waitGroup(t *testing.T, addr, group string, n int, ok func(kmsg.ConsumerGroupDescribeResponseGroup) bool) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		d := describeConsumerGroup(t, addr, group)
		if d.ErrorCode == 0 && d.State == "Stable" && len(d.Members) == n && ok(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("group not stable with %d members: %s, %d members", n, d.State, len(d.Members))
		}
		waitHeartbeat(t, addr, group)
	}
}

// waitHeartbeat waits until the group's state changes or a heartbeat
// interval has passed, by describing it again after a broker round trip.
func waitHeartbeat(t *testing.T, addr, group string) {
	t.Helper()
	cl := adminClient(t, addr)
	defer cl.Close()
	// A long-poll fetch on an empty partition paces the loop by the
	// broker's clock: it returns after MaxWait (one heartbeat interval).
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes = 200, 1
	_, _ = req.RequestWith(ctxT(t, 10*time.Second), cl)
}

// staticAssignment returns the assignment and member id of the member
// with the instance id.
func staticAssignment(d kmsg.ConsumerGroupDescribeResponseGroup, instance string) (string, string) {
	for _, m := range d.Members {
		if m.InstanceID != nil && *m.InstanceID == instance {
			var out []string
			for _, tp := range m.Assignment.TopicPartitions {
				ps := slices.Clone(tp.Partitions)
				slices.Sort(ps)
				out = append(out, fmt.Sprint(tp.Topic, ps))
			}
			slices.Sort(out)
			return fmt.Sprint(out), m.MemberID
		}
	}
	return "none", ""
}

// TestKIP848RegexPicksUpNewTopic: a member subscribed by regex is assigned
// a matching topic created after it joined.
func TestKIP848RegexPicksUpNewTopic(t *testing.T) {
	n := startNode(t, consumerGroupSettings)
	createTopicAt(t, n.addr, "re-a", 2)
	createTopicAt(t, n.addr, "other", 2)
	seen := newSeenSet()
	m := startMember(t, n.addr, "re-group", seen, kgo.ConsumeRegex(), kgo.ConsumeTopics("re-.*"),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(500*time.Millisecond))
	defer m.leave()
	produceValues(t, n.addr, "re-a", 0, 100)
	produceValues(t, n.addr, "other", 1000, 10)
	seen.waitDistinct(t, 100, 60*time.Second)
	createTopicAt(t, n.addr, "re-b", 3)
	produceValues(t, n.addr, "re-b", 100, 100)
	seen.waitDistinct(t, 200, 60*time.Second)
	seen.check(t, 200) // nothing of "other"
	d := describeConsumerGroup(t, n.addr, "re-group")
	// franz-go sends its regex wrapped for an unanchored match.
	if len(d.Members) != 1 || d.Members[0].SubscribedTopicRegex == nil || !strings.Contains(*d.Members[0].SubscribedTopicRegex, "re-.*") {
		re := "<nil>"
		if len(d.Members) == 1 && d.Members[0].SubscribedTopicRegex != nil {
			re = *d.Members[0].SubscribedTopicRegex
		}
		t.Fatalf("describe: %d members, regex %q", len(d.Members), re)
	}
}

// TestKIP848Kill9: three members consume under continuous production
// while the broker process is killed with SIGKILL and restarted five
// times. After each restart the group resumes from its persisted state,
// the committed offsets never go backwards, and in the end every record
// is consumed and committed.
func TestKIP848Kill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 test skipped in -short mode")
	}
	const topic, group, kills = "kill848", "kill848-group", 5
	dir := t.TempDir()
	p := startBrokerProc(t, dir, "127.0.0.1:0")
	addr := p.addr
	defer func() { p.cmd.Process.Kill(); <-p.done }()
	createTopicAt(t, addr, topic, 6)
	seen := newSeenSet()
	var ms []*member
	for range 3 {
		ms = append(ms, startMember(t, addr, group, seen, kgo.ConsumeTopics(topic), kgo.RetryTimeout(2*time.Minute)))
	}
	// A producer writes batches of 50 all along, through the kills.
	var mu sync.Mutex // guards produced
	produced := 0
	stopProducing := make(chan struct{})
	producerDone := make(chan error, 1)
	go func() {
		pcl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RetryTimeout(2*time.Minute))
		if err != nil {
			producerDone <- err
			return
		}
		defer pcl.Close()
		for next := 0; ; next += 50 {
			select {
			case <-stopProducing:
				producerDone <- nil
				return
			default:
			}
			var recs []*kgo.Record
			for i := next; i < next+50; i++ {
				recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%d", i))})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err := pcl.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				producerDone <- fmt.Errorf("produce v%d..: %w", next, err)
				return
			}
			mu.Lock()
			produced = next + 50
			mu.Unlock()
		}
	}()
	producedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return produced
	}
	fwd := &offsetsForward{last: map[int32]int64{}}
	for k := 1; k <= kills; k++ {
		seen.waitDistinct(t, producedNow()+1, 2*time.Minute) // consumption goes on
		fwd.check(t, addr, group, topic, fmt.Sprintf("before kill %d", k))
		d := describeConsumerGroup(t, addr, group)
		p.kill(t)
		p = startBrokerProc(t, dir, addr)
		// The group comes back as it was acknowledged: its epoch and its
		// members (their sessions start again).
		d2 := describeConsumerGroup(t, addr, group)
		if d2.Epoch < d.Epoch || len(d2.Members) < len(d.Members) {
			t.Fatalf("restart %d: group epoch %d with %d members, was %d with %d", k, d2.Epoch, len(d2.Members), d.Epoch, len(d.Members))
		}
		fwd.check(t, addr, group, topic, fmt.Sprintf("after restart %d", k))
	}
	close(stopProducing)
	if err := <-producerDone; err != nil {
		t.Fatal(err)
	}
	total := producedNow()
	seen.waitDistinct(t, total, 2*time.Minute)
	waitLagZero(t, addr, group, topic)
	fwd.check(t, addr, group, topic, "at the end")
	seen.check(t, total)
	for _, m := range ms {
		m.leave()
	}
}

// TestKIP848DocCommands runs the commands of docs/consumer-groups.md,
// against a broker with Kafka's consumer-group defaults as the page shows.
func TestKIP848DocCommands(t *testing.T) {
	n := startNode(t)
	out := runDocCommands(t, n, docBlock(t, "docs/consumer-groups.md", "kip848-doc-commands"))
	for _, re := range []string{`(?m)^a\nb\nc\nd$`, `(?m)^TYPE +consumer$`, `(?m)^STATE +Empty$`, `(?m)^EPOCH +[1-9]`,
		`(?m)^ASSIGNOR +uniform$`, `(?m)^clicks +\d +4 +4 +0 +-$`, `(?m)^dashboards +Empty +consumer +consumer$`,
		`(?m)^consumer.heartbeat.interval.ms +8000 +GROUP_CONFIG$`, `(?m)^consumer.session.timeout.ms +45000 +DEFAULT_CONFIG$`,
		`(?m)^share.auto.offset.reset +latest +DEFAULT_CONFIG$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output does not match %s:\n%s", re, out)
		}
	}
}
