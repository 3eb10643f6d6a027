package console

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
)

// shareEnv is a console over a broker whose share groups read from the
// earliest offset.
func shareEnv(t *testing.T) *env {
	return newEnv(t, envOpt{brokerOpts: []broker.Opt{broker.ShareGroups(broker.ShareGroupSettings{
		AutoOffsetReset: "earliest", HeartbeatInterval: 200 * time.Millisecond,
	})}})
}

// shareScene leaves share group "workers" on topic "jobs" (one partition,
// offsets 0-9 written in one batch) with a real kgo share consumer
// (client id worker-1) holding this state: offset 1 rejected
// (archived), 2 accepted, 3 and 4 released (available), 0 and 5-9
// acquired and not acknowledged. It also commits offsets for the
// classic group "billing" on the same topic. It returns the consumer,
// which keeps the records acquired while it lives.
func shareScene(t *testing.T, e *env) *kgo.Client {
	t.Helper()
	e.createTopic(t, "jobs", 1)
	// One batch: a share fetch acquires a whole batch at once.
	pr := e.client(t, kgo.ProducerLinger(time.Minute))
	ctx := context.Background()
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: "jobs", Value: fmt.Appendf(nil, "job-%d", i)})
	}
	errs := make(chan error, len(rs))
	for _, r := range rs {
		pr.Produce(ctx, r, func(_ *kgo.Record, err error) { errs <- err })
	}
	if err := pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for range rs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	e.commit(t, "billing", "jobs", map[int32]int64{0: 4})

	// One fetch per poll and none ahead of it, at most 10 records: the
	// broker's state is exactly what this consumer did.
	cl := e.client(t, kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.ClientID("worker-1"),
		kgo.ShareMaxRecords(10), kgo.ShareMaxRecordsStrict(), kgo.FetchMaxWait(300*time.Millisecond))
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var got []*kgo.Record
	for len(got) == 0 {
		fs := cl.PollFetches(pctx)
		if err := pctx.Err(); err != nil {
			t.Fatalf("no share records within a minute: %v", err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("share fetch %s/%d: %v", topic, p, err) })
		got = fs.Records()
	}
	if len(got) != 10 {
		t.Fatalf("the first share fetch acquired %d records, want the whole batch of 10", len(got))
	}
	for _, r := range got {
		switch r.Offset {
		case 1:
			r.Ack(kgo.AckReject)
		case 2:
			r.Ack(kgo.AckAccept)
		case 3, 4:
			r.Ack(kgo.AckRelease)
		}
	}
	if err := cl.FlushAcks(pctx); err != nil {
		t.Fatal(err)
	}
	return cl
}

// shareAnswer is GET /api/v1/groups/{group} for a share group.
type shareAnswer struct {
	Group   shareGroupInfo
	Members []memberInfo
}

// waitShareState polls the share group's page until its share
// partition's records in flight are the scene's, and returns it.
func waitShareState(t *testing.T, e *env) shareAnswer {
	t.Helper()
	want := shareRecords{Available: 2, Acquired: 6, Acknowledged: 1, Archived: 1}
	var g shareAnswer
	deadline := time.Now().Add(30 * time.Second)
	for {
		g = shareAnswer{}
		e.getJSON(t, "/api/v1/groups/workers", &g)
		if len(g.Group.Partitions) == 1 && g.Group.Partitions[0].Records == want && len(g.Members) == 1 {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("share group %+v, want one share partition with records %+v and one member", g, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAPIShareGroup: a share group with a real kgo share consumer is
// listed with its type, and its page shows the member with its
// assignment, the share partition's start and end offsets and lag
// (from ShareGroupDescribe and DescribeShareGroupOffsets) and the
// records in flight by state; a classic group beside it keeps its type.
func TestAPIShareGroup(t *testing.T) {
	e := shareEnv(t)
	shareScene(t, e)
	g := waitShareState(t, e)

	if g.Group.Type != "share" || g.Group.State != "Stable" || g.Group.Protocol != "simple" || g.Group.Members != 1 || g.Group.Epoch < 1 {
		t.Errorf("group = %+v", g.Group)
	}
	m := g.Members[0]
	if m.ClientID != "worker-1" || m.MemberID == "" || m.ClientHost == "" || fmt.Sprint(m.Assigned) != "map[jobs:[0]]" || m.MemberEpoch == nil || *m.MemberEpoch < 1 {
		t.Errorf("member = %+v", m)
	}
	// Offset 0 is still acquired, so the start stays 0; the lag is the
	// 10 records less the accepted and the archived one. In flight:
	// 0 and 5-9 acquired, 3 and 4 available, 2 acknowledged, 1 archived.
	want := sharePartitionInfo{Topic: "jobs", Partition: 0, StartOffset: 0, EndOffset: 10, Lag: 8,
		Records: shareRecords{Available: 2, Acquired: 6, Acknowledged: 1, Archived: 1}}
	if len(g.Group.Partitions) != 1 || g.Group.Partitions[0] != want || g.Group.Lag != 8 {
		t.Errorf("share partitions %+v (lag %d), want [%+v] (lag 8)", g.Group.Partitions, g.Group.Lag, want)
	}

	var list struct {
		Groups []struct {
			ID, Type, State, Protocol string
			Members, Topics           int
			Lag                       int64
		}
		ShareGroupsError string `json:"share_groups_error"`
	}
	e.getJSON(t, "/api/v1/groups", &list)
	got := fmt.Sprintf("%+v", list)
	want2 := "{Groups:[{ID:billing Type:classic State:Empty Protocol: Members:0 Topics:1 Lag:6} {ID:workers Type:share State:Stable Protocol:simple Members:1 Topics:1 Lag:8}] ShareGroupsError:}"
	if got != want2 {
		t.Errorf("groups list\n got %s\nwant %s", got, want2)
	}

	if code, body := e.get(t, "/api/v1/groups/nope"); code != 404 {
		t.Errorf("unknown group: %d %s", code, body)
	}

	// docs/share-groups.md's command, against this console.
	var doc shareAnswer
	if err := json.Unmarshal(runDocCurl(t, e, "../../docs/share-groups.md", "share-console-doc-commands"), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Group.Partitions) != 1 || doc.Group.Partitions[0] != want {
		t.Errorf("the documented command answers %+v", doc.Group)
	}
}

// runDocCurl runs the curl commands of a documented block against e's
// console in place of http://127.0.0.1:9644 and returns their output.
// Without curl the test skips, except under CI=true.
func runDocCurl(t *testing.T, e *env, file, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- "+name+" -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /"+name+" -->")
	if !ok || !ok2 {
		t.Fatalf("%s: no %s block", file, name)
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is not installed; CI must run the documented commands")
		}
		t.Skip("curl is not installed: skipping the documented commands")
	}
	var out []byte
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		if strings.HasPrefix(line, "```") || line == "" {
			continue
		}
		args, ok := strings.CutPrefix(line, "curl ")
		if !ok || !strings.Contains(args, "http://127.0.0.1:9644/") {
			t.Fatalf("%s: %q is not a curl command to the console", file, line)
		}
		argv := strings.Fields(strings.ReplaceAll(args, "http://127.0.0.1:9644", e.url))
		b, err := exec.Command(curl, argv...).Output()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, b...)
	}
	return out
}

// TestAPIConsumerProtocolGroup: a consumer-protocol (KIP-848) group is
// listed with type consumer and its epoch, and its page shows the
// member's epoch and assignment from ConsumerGroupDescribe.
func TestAPIConsumerProtocolGroup(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "orders", 2)
	e.produce(t, "orders", 1, 3)
	cl := e.client(t, kgo.ConsumerGroup("next"), kgo.ConsumeTopics("orders"), kgo.ClientID("reader-848"),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for got := 0; got < 3; {
		fs := cl.PollFetches(context.Background())
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	var g struct {
		Group   broker.GroupInfo
		Members []memberInfo
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.getJSON(t, "/api/v1/groups/next", &g)
		if len(g.Members) == 1 && len(g.Members[0].Assigned["orders"]) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group = %+v", g)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g.Group.Type != "consumer" || g.Group.Epoch < 1 || g.Group.AssignmentEpoch < 1 {
		t.Errorf("group = %+v", g.Group)
	}
	m := g.Members[0]
	if m.ClientID != "reader-848" || m.MemberEpoch == nil || *m.MemberEpoch < 1 || fmt.Sprint(m.Assigned["orders"]) != "[0 1]" {
		t.Errorf("member = %+v", m)
	}
	var list struct {
		Groups []struct {
			ID, Type string
			Epoch    int32
		}
	}
	e.getJSON(t, "/api/v1/groups", &list)
	if len(list.Groups) != 1 || list.Groups[0].Type != "consumer" || list.Groups[0].Epoch != g.Group.Epoch {
		t.Errorf("groups list = %+v, want group next of type consumer at epoch %d", list, g.Group.Epoch)
	}
}

// TestShareGroupACLs: with authorization on, a share group is listed and
// described only with DESCRIBE on the group; its partitions of topics
// without DESCRIBE are left out, with their lag and records in flight.
func TestShareGroupACLs(t *testing.T) {
	e := newEnv(t, envOpt{brokerOpts: []broker.Opt{broker.Authorization(true), broker.ShareGroups(broker.ShareGroupSettings{
		AutoOffsetReset: "earliest", HeartbeatInterval: 200 * time.Millisecond,
	})}})
	ctx := ctxFor(t)
	pr := e.internalClient(t, kgo.ProducerLinger(0))
	for _, topic := range []string{"jobs", "private"} {
		e.createTopic(t, topic, 1)
		if err := pr.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("a")}, &kgo.Record{Topic: topic, Value: []byte("b")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A share consumer outside ACLs accepts the four records; one more
	// on each topic makes a lag of 1 on each partition.
	cl := e.internalClient(t, kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs", "private"), kgo.FetchMaxWait(300*time.Millisecond))
	seen := map[string]bool{}
	for len(seen) < 4 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckAccept)
			seen[fmt.Sprintf("%s/%d", r.Topic, r.Offset)] = true
		})
	}
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pr.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Value: []byte("c")}, &kgo.Record{Topic: "private", Value: []byte("c")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var list struct {
		Groups []struct {
			ID     string
			Topics int
			Lag    int64
		}
	}
	e.getJSON(t, "/api/v1/groups", &list)
	if len(list.Groups) != 0 {
		t.Errorf("anonymous without DESCRIBE on the group sees %+v", list)
	}
	if code, body := e.get(t, "/api/v1/groups/workers"); code != 403 || !strings.Contains(body, "may not DESCRIBE group") {
		t.Errorf("share group without DESCRIBE = %d %s", code, body)
	}

	adm := kadm.NewClient(e.internalClient(t))
	for _, a := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Groups("workers").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe),
		kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Topics("jobs").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDescribe),
	} {
		if r, err := adm.CreateACLs(ctx, a); err != nil || r[0].Err != nil {
			t.Fatalf("CreateACLs: %v %v", err, r)
		}
	}
	var g struct {
		Group   shareGroupInfo
		Members []memberInfo
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		e.getJSON(t, "/api/v1/groups/workers", &g)
		if len(g.Group.Partitions) == 1 && g.Group.Lag == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("share group seen by anonymous = %+v, want only jobs/0 with lag 1", g.Group)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p := g.Group.Partitions[0]; p.Topic != "jobs" || p.StartOffset != 2 || p.EndOffset != 3 {
		t.Errorf("share group seen by anonymous = %+v", g.Group)
	}
	e.getJSON(t, "/api/v1/groups", &list)
	if len(list.Groups) != 1 || list.Groups[0].ID != "workers" || list.Groups[0].Topics != 1 || list.Groups[0].Lag != 1 {
		t.Errorf("groups seen by anonymous = %+v", list)
	}
}
