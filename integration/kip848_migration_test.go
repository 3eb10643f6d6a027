package integration

import (
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startClassicMember is a classic-protocol consumer (eager range
// assignor) polling into seen, with the same commit habits as
// startMember's consumer-protocol members.
func startClassicMember(t *testing.T, addr, group string, seen *seenSet, opts ...kgo.Opt) *member {
	t.Helper()
	return startPolling(t, seen, append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group),
		kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.AutoCommitInterval(200 * time.Millisecond)}, opts...)...)
}

// groupType is the group's type as ListGroups v5 gives it.
func groupType(t *testing.T, addr, group string) string {
	t.Helper()
	cl := adminClient(t, addr)
	defer cl.Close()
	ls, err := kadm.NewClient(cl).ListGroups(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return ls[group].GroupType
}

// offsetsForward records the committed offsets of a group on a topic
// and fails the test if one goes backwards (or is gone).
type offsetsForward struct {
	last map[int32]int64
}

func (f *offsetsForward) check(t *testing.T, addr, group, topic, when string) {
	t.Helper()
	cl := adminClient(t, addr)
	defer cl.Close()
	committed, err := kadm.NewClient(cl).FetchOffsets(ctxT(t, 30*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	now := map[int32]int64{}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			now[o.Partition] = o.At
		}
	})
	for p, prev := range f.last {
		if at, ok := now[p]; !ok || at < prev {
			t.Fatalf("%s: committed offset of partition %d went back from %d to %d", when, p, prev, at)
		}
	}
	f.last = now
}

// memberTypes counts a consumer group's members by KIP-1099 member type
// (0 classic, 1 consumer).
func memberTypes(d kmsg.ConsumerGroupDescribeResponseGroup) (classic, consumer int) {
	for _, m := range d.Members {
		if m.MemberType == 0 {
			classic++
		} else {
			consumer++
		}
	}
	return classic, consumer
}

// TestKIP848OnlineMigration: a classic group of three range-assignor
// members (one static) upgrades to the consumer protocol member by member (the first
// consumer-protocol member converts it; classic members keep consuming
// in the mixed group), then downgrades back member by member (the last
// consumer-protocol member leaving converts it back). Records are
// produced at every step; every one is consumed, the committed offsets
// never go backwards and reach the end.
func TestKIP848OnlineMigration(t *testing.T) {
	n := startNode(t, consumerGroupSettings)
	const topic, group = "migrate", "migrate-group"
	createTopicAt(t, n.addr, topic, 12)
	seen := newSeenSet()
	fwd := &offsetsForward{last: map[int32]int64{}}
	sub := kgo.ConsumeTopics(topic)
	produced := 0
	step := func(when string) {
		t.Helper()
		produceValues(t, n.addr, topic, produced, 300)
		produced += 300
		seen.waitDistinct(t, produced, 90*time.Second)
		fwd.check(t, n.addr, group, topic, when)
	}

	// The third classic member is static (group.instance.id): it is
	// carried into the consumer group and, during the downgrade, its
	// successor joins with the same instance id.
	static := kgo.InstanceID("static-classic")
	classic := []*member{
		startClassicMember(t, n.addr, group, seen, sub),
		startClassicMember(t, n.addr, group, seen, sub),
		startClassicMember(t, n.addr, group, seen, sub, static),
	}
	step("classic group")
	if typ := groupType(t, n.addr, group); typ != "classic" {
		t.Fatalf("group type %q before the upgrade, want classic", typ)
	}

	// Upgrade: each classic member in turn is replaced by a
	// consumer-protocol member.
	var consumers []*member
	for i := range classic {
		classic[i].leave()
		consumers = append(consumers, startMember(t, n.addr, group, seen, sub))
		d := waitGroup(t, n.addr, group, 3, func(d kmsg.ConsumerGroupDescribeResponseGroup) bool {
			c, k := memberTypes(d)
			return c == 2-i && k == i+1
		})
		if d.ErrorCode != 0 {
			t.Fatalf("upgrade step %d: describe error %d", i, d.ErrorCode)
		}
		if i == 0 {
			// sluice group describe names each member's protocol.
			out := runDocCommands(t, n, "go run ./cmd/sluice group describe "+group+" -b 127.0.0.1:9092")
			for _, re := range []string{`(?m)^TYPE +consumer$`, `(?m)^\S+ +- +classic +\d+ `, `(?m)^\S+ +- +consumer +\d+ `} {
				if !regexp.MustCompile(re).MatchString(out) {
					t.Errorf("group describe of the mixed group does not match %s:\n%s", re, out)
				}
			}
		}
		step("upgrade step")
	}
	if typ := groupType(t, n.addr, group); typ != "consumer" {
		t.Fatalf("group type %q after the upgrade, want consumer", typ)
	}

	// Downgrade: each consumer-protocol member in turn is replaced by a
	// classic member; the last one leaving makes the group classic.
	for i := range consumers {
		consumers[i].leave()
		opts := []kgo.Opt{sub}
		if i == 2 {
			opts = append(opts, static)
		}
		classic[i] = startClassicMember(t, n.addr, group, seen, opts...)
		if i < len(consumers)-1 {
			waitGroup(t, n.addr, group, 3, func(d kmsg.ConsumerGroupDescribeResponseGroup) bool {
				c, k := memberTypes(d)
				return c == i+1 && k == 2-i
			})
		}
		step("downgrade step")
	}
	deadline := time.Now().Add(60 * time.Second)
	for groupType(t, n.addr, group) != "classic" {
		if time.Now().After(deadline) {
			t.Fatalf("group type %q after the downgrade, want classic", groupType(t, n.addr, group))
		}
		waitHeartbeat(t, n.addr, group)
	}
	step("classic again")
	waitLagZero(t, n.addr, group, topic)
	fwd.check(t, n.addr, group, topic, "at the end")
	seen.check(t, produced)
	for _, m := range classic {
		m.leave()
	}
}
