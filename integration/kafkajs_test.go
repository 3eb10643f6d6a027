package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicedb/sluice/broker"
)

// kafkajs runs integration/testdata/kafkajs/sluice.js with the kafkajs
// version pinned by the package-lock.json beside it, installed by npm ci
// into a cache directory keyed by the lock file's hash.

var kafkajsInstall struct {
	mu      sync.Mutex // guards modules and err
	modules string     // the node_modules directory once installed
	err     error
}

// needKafkajs returns the node_modules directory holding kafkajs,
// installing it on first use; it skips (or fails under CI=true) when
// node or npm is absent or npm ci fails.
func needKafkajs(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			needTool(t, tool+" not found: install Node.js 18 or later (Debian: apt-get install nodejs npm)")
		}
	}
	kafkajsInstall.mu.Lock()
	defer kafkajsInstall.mu.Unlock()
	if kafkajsInstall.modules == "" && kafkajsInstall.err == nil {
		kafkajsInstall.modules, kafkajsInstall.err = installKafkajs()
	}
	if kafkajsInstall.err != nil {
		needTool(t, fmt.Sprintf("installing kafkajs with npm ci failed (%v)", kafkajsInstall.err))
	}
	return kafkajsInstall.modules
}

func installKafkajs() (string, error) {
	src, err := filepath.Abs("testdata/kafkajs")
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "sluice-test", "kafkajs-"+hex.EncodeToString(sum[:8]))
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); err == nil {
		return modules, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci in %s: %w\n%s", tmp, err, out)
	}
	// Another test process may have installed the same lock meanwhile;
	// either copy will do.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(modules, "kafkajs", "package.json")); serr != nil {
			return "", fmt.Errorf("moving the kafkajs install into place: %w", err)
		}
	}
	return modules, nil
}

// kafkajsCmd builds the command running sluice.js's command name with
// args (brokers added).
func kafkajsCmd(t *testing.T, modules, addr, name string, args map[string]any) *exec.Cmd {
	t.Helper()
	args["brokers"] = []string{addr}
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join("testdata", "kafkajs", "sluice.js"), name, string(b))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "KAFKAJS_NO_PARTITIONER_WARNING=1")
	return cmd
}

func runKafkajs(t *testing.T, modules, addr, name string, args map[string]any) []map[string]any {
	t.Helper()
	return runScript(t, "kafkajs "+name, 90*time.Second, kafkajsCmd(t, modules, addr, name, args), nil)
}

// recordsJSON is recs in the shape the scripts read.
func recordsJSON(recs []rec) []map[string]any {
	out := make([]map[string]any, len(recs))
	for i, r := range recs {
		out[i] = map[string]any{"key": r.key, "value": r.value, "headers": r.headers}
	}
	return out
}

// recordsFromJSON reads records printed by a script as
// {key,value,headers,offset}.
func recordsFromJSON(t *testing.T, lines []map[string]any) []rec {
	t.Helper()
	var out []rec
	for _, m := range lines {
		off, err := strconv.ParseInt(fmt.Sprint(m["offset"]), 10, 64)
		if err != nil {
			t.Fatalf("record offset %v: %v", m["offset"], err)
		}
		h := map[string]string{}
		if hs, ok := m["headers"].(map[string]any); ok {
			for k, v := range hs {
				h[k] = fmt.Sprint(v)
			}
		}
		key, _ := m["key"].(string)
		value, _ := m["value"].(string)
		out = append(out, rec{key: key, value: value, headers: h, offset: off})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].offset < out[j].offset })
	return out
}

// TestKafkajsProduceConsume produces with acks=-1 and each compression
// kafkajs has built in (none, gzip), and as an idempotent producer; checks the offsets kafkajs was told
// and what franz-go reads back, then consumes from the beginning with a
// kafkajs consumer.
func TestKafkajsProduceConsume(t *testing.T) {
	modules := needKafkajs(t)
	n := startNode(t)
	for _, c := range []struct {
		codec      string
		idempotent bool
	}{{"none", false}, {"gzip", false}, {"none", true}} {
		name := c.codec
		if c.idempotent {
			name += "-idempotent"
		}
		t.Run(name, func(t *testing.T) {
			topic := "kafkajs-" + name
			createTopic(t, n, topic, 1)
			const count, batch = 50, 7
			want := records(topic, count)
			lines := runKafkajs(t, modules, n.addr, "produce", map[string]any{
				"topic": topic, "compression": c.codec, "idempotent": c.idempotent, "batch": batch, "records": recordsJSON(want)})
			if len(lines) != (count+batch-1)/batch {
				t.Fatalf("kafkajs produce printed %d sends, want %d: %v", len(lines), (count+batch-1)/batch, lines)
			}
			for i, l := range lines {
				meta, _ := l["meta"].([]any)
				if len(meta) != 1 {
					t.Fatalf("send %d: metadata %v, want one partition", i, l["meta"])
				}
				m := meta[0].(map[string]any)
				if m["errorCode"] != float64(0) || fmt.Sprint(m["baseOffset"]) != strconv.Itoa(i*batch) {
					t.Fatalf("send %d: metadata %v, want errorCode 0 and baseOffset %d", i, m, i*batch)
				}
			}
			checkRecords(t, "kgo reading kafkajs "+name, want, consumeKgo(t, n.addr, topic, count))
			if c.idempotent {
				requireIdempotent(t, n.addr, topic, count)
			}

			got := runKafkajs(t, modules, n.addr, "consume", map[string]any{"topic": topic, "group": topic + "-reader", "count": count})
			checkRecords(t, "kafkajs consumer", want, recordsFromJSON(t, got))
		})
	}
}

// groupMember follows one kafkajs group member's output: its latest
// assignment and the values it consumed.
type groupMember struct {
	s        *script
	assigned []int // partitions of its latest join
	values   map[string]int
}

func (g *groupMember) handle(m map[string]any) {
	switch m["event"] {
	case "assigned":
		g.assigned = g.assigned[:0]
		for _, p := range m["partitions"].([]any) {
			g.assigned = append(g.assigned, int(p.(float64)))
		}
		sort.Ints(g.assigned)
	case "record":
		g.values[m["value"].(string)]++
	}
}

// until handles the member's output lines until one satisfies stop.
func (g *groupMember) until(t *testing.T, ctx context.Context, what string, stop func(map[string]any) bool) {
	t.Helper()
	g.s.next(t, ctx, what, func(m map[string]any) bool {
		g.handle(m)
		return stop(m)
	})
}

// TestKafkajsConsumerGroup runs two kafkajs members through
// testTwoMemberGroup.
func TestKafkajsConsumerGroup(t *testing.T) {
	modules := needKafkajs(t)
	n := startNode(t)
	const topic, group = "kafkajs-group", "kafkajs-g"
	testTwoMemberGroup(t, n, topic, func(who string) *script {
		return startScript(t, "kafkajs "+who, kafkajsCmd(t, modules, n.addr, "member", map[string]any{"topic": topic, "group": group}))
	}, group, noSnappy)
}

// testTwoMemberGroup runs one group member alone on a four-partition
// topic, then a second one: the group rebalances to split the
// partitions, the second member gets nothing the first had committed,
// the two together consume every record, and the committed offsets
// reach the end. A member script prints {"event":"assigned",
// "partitions":[...]} with all the partitions it owns whenever that
// changes, {"event":"record","value":...} for
// each record, and leaves the group when its input closes.
func testTwoMemberGroup(t *testing.T, n *node, topic string, start func(who string) *script, group string, produceOpts ...kgo.Opt) {
	const parts, half = 4, 40
	createTopic(t, n, topic, parts)
	produceValues(t, n.addr, topic, 0, half, produceOpts...)
	ctx := ctxT(t, 2*time.Minute)

	a := &groupMember{s: start("member A"), values: map[string]int{}}
	a.until(t, ctx, "member A to consume the first half", func(map[string]any) bool { return len(a.values) == half && len(a.assigned) == parts })
	// Wait for A's commits to cover every record before B joins.
	for {
		lag := committedLag(t, n.addr, group, topic)
		done := true
		for _, l := range lag {
			done = done && l == 0
		}
		if done {
			break
		}
		a.until(t, ctx, "member A to commit the first half", func(m map[string]any) bool { return m["event"] == "committed" })
	}

	b := &groupMember{s: start("member B"), values: map[string]int{}}
	// Both members' lines until their assignments split the partitions
	// (an eager rebalance revokes everything first, a cooperative one
	// moves partitions over two rounds: states in between do not split).
	split := func() bool {
		seen := map[int]bool{}
		for _, p := range append(append([]int{}, a.assigned...), b.assigned...) {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
		return len(seen) == parts && len(a.assigned) > 0 && len(b.assigned) > 0
	}
	for !split() {
		select {
		case m, ok := <-a.s.lines:
			if !ok {
				t.Fatalf("member A exited during the rebalance\nstderr:\n%s", a.s.stderr.String())
			}
			a.handle(m)
		case m, ok := <-b.s.lines:
			if !ok {
				t.Fatalf("member B exited during the rebalance\nstderr:\n%s", b.s.stderr.String())
			}
			b.handle(m)
		case <-ctx.Done():
			t.Fatalf("after B joined, A has partitions %v and B %v; want the %d partitions split between them\nA stderr:\n%s\nB stderr:\n%s",
				a.assigned, b.assigned, parts, a.s.stderr.String(), b.s.stderr.String())
		}
	}

	produceValues(t, n.addr, topic, half, half, produceOpts...)
	all := func() int {
		u := map[string]bool{}
		for v := range a.values {
			u[v] = true
		}
		for v := range b.values {
			u[v] = true
		}
		return len(u)
	}
	for all() < 2*half {
		select {
		case m, ok := <-a.s.lines:
			if !ok {
				t.Fatalf("member A exited early\nstderr:\n%s", a.s.stderr.String())
			}
			a.handle(m)
		case m, ok := <-b.s.lines:
			if !ok {
				t.Fatalf("member B exited early\nstderr:\n%s", b.s.stderr.String())
			}
			b.handle(m)
		case <-ctx.Done():
			t.Fatalf("the two members consumed %d of %d values\nA stderr:\n%s\nB stderr:\n%s", all(), 2*half, a.s.stderr.String(), b.s.stderr.String())
		}
	}
	for _, m := range b.s.stop(t, ctx) {
		b.handle(m)
	}
	for _, m := range a.s.stop(t, ctx) {
		a.handle(m)
	}
	for v := range b.values {
		i, _ := strconv.Atoi(strings.TrimPrefix(v, "v"))
		if i < half {
			t.Fatalf("member B consumed %s, which member A had committed before B joined", v)
		}
	}
	if len(b.values) == 0 {
		t.Fatalf("member B consumed nothing from its partitions %v", b.assigned)
	}
	requireNoLag(t, "group "+group, committedLag(t, n.addr, group, topic))
}

// TestKafkajsAdmin drives kafkajs's admin client: createTopics (again, to
// see it report an existing topic), createPartitions, describeCluster,
// listTopics, fetchTopicMetadata, fetchTopicOffsets, fetchOffsets,
// describeGroups and listGroups of a group with a live member,
// describeGroups after it left, fetchTopicOffsetsByTimestamp,
// setOffsets, resetOffsets, deleteGroups, deleteTopics.
func TestKafkajsAdmin(t *testing.T) {
	modules := needKafkajs(t)
	n := startNode(t)
	const topic, group, count = "kafkajs-admin", "kafkajs-admin-g", 30
	ctx := ctxT(t, 2*time.Minute)
	s := startScript(t, "kafkajs admin", kafkajsCmd(t, modules, n.addr, "admin", map[string]any{"topic": topic, "group": group, "count": count}))
	step := func(name string) any {
		t.Helper()
		m := s.next(t, ctx, "admin step "+name, func(map[string]any) bool { return true })
		if m["step"] != name {
			t.Fatalf("kafkajs admin printed step %v, want %s: %v", m["step"], name, m)
		}
		return m["result"]
	}
	if r := step("createTopics"); r != true {
		t.Fatalf("createTopics = %v, want true (created)", r)
	}
	if r := step("createTopicsAgain"); r != false {
		t.Fatalf("createTopics of an existing topic = %v, want false", r)
	}
	step("createPartitions")
	dc := step("describeCluster").(map[string]any)
	if dc["controller"] != float64(0) || len(dc["brokers"].([]any)) != 1 || dc["clusterId"] == "" {
		t.Fatalf("describeCluster = %v, want one broker, node 0 the controller, a cluster id", dc)
	}
	if r := step("listTopics"); !containsAny(r, topic) {
		t.Fatalf("listTopics = %v, want it to hold %s", r, topic)
	}
	md := step("fetchTopicMetadata").(map[string]any)["topics"].([]any)
	if len(md) != 1 || md[0].(map[string]any)["name"] != topic {
		t.Fatalf("fetchTopicMetadata = %v", md)
	}
	if ps := md[0].(map[string]any)["partitions"].([]any); len(ps) != 4 {
		t.Fatalf("fetchTopicMetadata: %d partitions, want 4 (3 created, 1 added by createPartitions): %v", len(ps), ps)
	} else {
		for _, p := range ps {
			pm := p.(map[string]any)
			if pm["partitionErrorCode"] != float64(0) || pm["leader"] != float64(0) {
				t.Fatalf("fetchTopicMetadata partition %v: want no error and leader 0 (Sluice's one node)", pm)
			}
		}
	}
	for _, o := range step("fetchTopicOffsets").([]any) {
		om := o.(map[string]any)
		if om["offset"] != "0" || om["low"] != "0" || om["high"] != "0" {
			t.Fatalf("fetchTopicOffsets of an empty topic: %v", om)
		}
	}

	produceValues(t, n.addr, topic, 0, count, noSnappy)
	ends := endOffsets(t, n.addr, topic)
	if _, err := s.stdin.Write([]byte("produced\n")); err != nil {
		t.Fatal(err)
	}
	fo := step("fetchOffsets").([]any)
	if len(fo) != 1 {
		t.Fatalf("fetchOffsets = %v, want one topic", fo)
	}
	for _, p := range fo[0].(map[string]any)["partitions"].([]any) {
		pm := p.(map[string]any)
		part := int32(pm["partition"].(float64))
		if pm["offset"] != strconv.FormatInt(ends[part], 10) {
			t.Fatalf("fetchOffsets partition %d = %v, want committed offset %d", part, pm, ends[part])
		}
	}
	dg := step("describeGroups").(map[string]any)["groups"].([]any)
	g := dg[0].(map[string]any)
	if len(dg) != 1 || g["groupId"] != group || g["state"] != "Stable" || g["protocolType"] != "consumer" || len(g["members"].([]any)) != 1 || g["errorCode"] != float64(0) {
		t.Fatalf("describeGroups with one live member = %v", dg)
	}
	lg := step("listGroups").(map[string]any)["groups"].([]any)
	if len(lg) != 1 || lg[0].(map[string]any)["groupId"] != group {
		t.Fatalf("listGroups = %v, want only %s", lg, group)
	}
	dg = step("describeGroupsAfterLeave").(map[string]any)["groups"].([]any)
	if g := dg[0].(map[string]any); g["state"] != "Empty" || len(g["members"].([]any)) != 0 {
		t.Fatalf("describeGroups after the member left = %v, want Empty with no members", dg)
	}
	for _, o := range step("fetchTopicOffsetsByTimestamp").([]any) {
		om := o.(map[string]any)
		if p := int32(om["partition"].(float64)); om["offset"] != strconv.FormatInt(ends[p], 10) {
			t.Fatalf("fetchTopicOffsetsByTimestamp(an hour ahead) partition %d = %v, want the end offset %d", p, om, ends[p])
		}
	}
	groupOffsets := func(name string) map[int32]string {
		t.Helper()
		fo := step(name).([]any)
		out := map[int32]string{}
		for _, p := range fo[0].(map[string]any)["partitions"].([]any) {
			pm := p.(map[string]any)
			out[int32(pm["partition"].(float64))] = fmt.Sprint(pm["offset"])
		}
		return out
	}
	if got := groupOffsets("fetchOffsetsAfterSet"); got[0] != "1" || got[1] != strconv.FormatInt(ends[1], 10) {
		t.Fatalf("fetchOffsets after setOffsets(partition 0 to 1) = %v, want 0:1 and the rest unchanged (ends %v)", got, ends)
	}
	for p, o := range groupOffsets("fetchOffsetsAfterReset") {
		// kafkajs resetOffsets commits -2 (earliest) for each partition.
		if o != "-2" {
			t.Fatalf("fetchOffsets after resetOffsets(earliest): partition %d at %s, want -2", p, o)
		}
	}
	if dg := step("deleteGroups").([]any); len(dg) != 1 || dg[0].(map[string]any)["errorCode"] != float64(0) {
		t.Fatalf("deleteGroups = %v", dg)
	}
	if lg := step("listGroupsAfterDelete").(map[string]any)["groups"].([]any); len(lg) != 0 {
		t.Fatalf("listGroups after deleteGroups = %v", lg)
	}
	step("deleteTopics")
	if r := step("listTopicsAfterDelete"); containsAny(r, topic) {
		t.Fatalf("listTopics after deleteTopics = %v, still holds %s", r, topic)
	}
	s.stop(t, ctx)
	adm := kadmFor(t, n.addr)
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if td.Has(topic) {
		t.Fatalf("kadm still lists %s after kafkajs deleted it", topic)
	}
}

// TestKafkajsConfigs: describeConfigs of a topic created with a
// retention.ms, then alterConfigs of it where the broker serves
// AlterConfigs.
func TestKafkajsConfigs(t *testing.T) {
	modules := needKafkajs(t)
	n := startNode(t)
	const topic = "kafkajs-configs"
	if err := n.b.CreateTopic(ctxT(t, 10*time.Second), topic, 1, map[string]string{"retention.ms": "7200000"}); err != nil {
		t.Fatal(err)
	}
	retention := func(r any) string {
		for _, res := range r.(map[string]any)["resources"].([]any) {
			rm := res.(map[string]any)
			if rm["errorCode"] != float64(0) {
				t.Fatalf("describeConfigs resource %v", rm)
			}
			for _, e := range rm["configEntries"].([]any) {
				if em := e.(map[string]any); em["configName"] == "retention.ms" {
					return fmt.Sprint(em["configValue"])
				}
			}
		}
		return ""
	}
	lines := runKafkajs(t, modules, n.addr, "configs", map[string]any{"topic": topic})
	if len(lines) != 1 {
		t.Fatalf("kafkajs configs printed %v", lines)
	}
	if r := retention(lines[0]["result"]); r != "7200000" {
		t.Fatalf("describeConfigs: retention.ms = %q, want 7200000: %v", r, lines[0])
	}

	if missing := missingAPIs(t, n.addr, kmsg.AlterConfigs.Int16()); len(missing) > 0 {
		t.Skipf("describeConfigs passed; alterConfigs not tried: Sluice does not serve %s yet", strings.Join(missing, ", "))
	}
	lines = runKafkajs(t, modules, n.addr, "configs", map[string]any{"topic": topic, "alter": true, "retention": 3600000})
	if len(lines) != 3 {
		t.Fatalf("kafkajs configs printed %v", lines)
	}
	if r := retention(lines[2]["result"]); r != "3600000" {
		t.Fatalf("describeConfigs after alterConfigs: retention.ms = %q, want 3600000", r)
	}
}

// TestKafkajsTransactions commits a transaction, aborts one and commits
// another that also commits a group's offset (sendOffsets): a
// read_committed franz-go consumer sees only the committed records, a
// read_uncommitted one all of them, and the group's offset is the one
// sent. It runs only where the broker serves the transaction APIs.
func TestKafkajsTransactions(t *testing.T) {
	modules := needKafkajs(t)
	n := startNode(t)
	if missing := missingAPIs(t, n.addr, kmsg.AddPartitionsToTxn.Int16(), kmsg.AddOffsetsToTxn.Int16(), kmsg.TxnOffsetCommit.Int16(), kmsg.EndTxn.Int16()); len(missing) > 0 {
		t.Skipf("Sluice does not serve %s yet; kafkajs transactions need them", strings.Join(missing, ", "))
	}
	const topic, group = "kafkajs-txn", "kafkajs-txn-g"
	createTopic(t, n, topic, 1)
	lines := runKafkajs(t, modules, n.addr, "txn", map[string]any{"topic": topic, "group": group, "transactionalId": "kafkajs-tx",
		"transactions": []map[string]any{
			{"values": []string{"c0", "c1", "c2"}, "commit": true},
			{"values": []string{"a0", "a1"}, "commit": false},
			{"values": []string{"c3"}, "commit": true, "offset": 3},
		}})
	if len(lines) != 3 || lines[0]["step"] != "commit" || lines[1]["step"] != "abort" || lines[2]["step"] != "commit" {
		t.Fatalf("kafkajs txn printed %v", lines)
	}
	checkTransactions(t, n.addr, topic, group)
}

// checkTransactions checks partition 0 of topic after transactions
// that committed c0,c1,c2, aborted a0,a1 and committed c3 with group's
// offset 3: read_committed sees the committed values, read_uncommitted
// all of them, and the group's committed offset is 3.
func checkTransactions(t *testing.T, addr, topic, group string) {
	t.Helper()
	read := func(level kgo.IsolationLevel, n int) string {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(level),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx := ctxT(t, 20*time.Second)
		var got []string
		for len(got) < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumer got %v, want %d records", got, n)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		return strings.Join(got, ",")
	}
	if got := read(kgo.ReadCommitted(), 4); got != "c0,c1,c2,c3" {
		t.Fatalf("read_committed consumer got %s, want c0,c1,c2,c3", got)
	}
	if got := read(kgo.ReadUncommitted(), 6); got != "c0,c1,c2,a0,a1,c3" {
		t.Fatalf("read_uncommitted consumer got %s, want c0,c1,c2,a0,a1,c3", got)
	}
	committed, err := kadmFor(t, addr).FetchOffsets(ctxT(t, 10*time.Second), group)
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	if o, ok := committed.Lookup(topic, 0); !ok || o.At != 3 {
		t.Fatalf("group %s offset after the transaction's offsets: %+v (found %v), want 3", group, o, ok)
	}
}

// TestKafkajsDeleteRecords: deleteTopicRecords moves the log start
// offset. It runs only where the broker serves DeleteRecords.
func TestKafkajsDeleteRecords(t *testing.T) {
	modules := needKafkajs(t)
	n := startNode(t)
	if missing := missingAPIs(t, n.addr, kmsg.DeleteRecords.Int16()); len(missing) > 0 {
		t.Skipf("Sluice does not serve %s yet; kafkajs admin.deleteTopicRecords needs it", strings.Join(missing, ", "))
	}
	const topic = "kafkajs-delete-records"
	createTopic(t, n, topic, 1)
	produceValues(t, n.addr, topic, 0, 10, noSnappy)
	lines := runKafkajs(t, modules, n.addr, "deleteRecords", map[string]any{"topic": topic, "offset": 4})
	o := lines[0]["result"].([]any)[0].(map[string]any)
	if o["low"] != "4" || o["high"] != "10" {
		t.Fatalf("offsets after deleteTopicRecords below 4: %v, want low 4 high 10", o)
	}
}

// TestKafkajsACLs: createAcls then describeAcls, against a broker with
// authorization on (without it the ACL APIs answer SECURITY_DISABLED, as
// Kafka's do). It runs only where the broker serves the ACL APIs.
func TestKafkajsACLs(t *testing.T) {
	modules := needKafkajs(t)
	n := startNode(t, broker.Authorization(true), broker.AllowEveryoneIfNoACL(true))
	if missing := missingAPIs(t, n.addr, kmsg.CreateACLs.Int16(), kmsg.DescribeACLs.Int16()); len(missing) > 0 {
		t.Skipf("Sluice does not serve %s yet; kafkajs admin.createAcls/describeAcls need them", strings.Join(missing, ", "))
	}
	const topic = "kafkajs-acls"
	createTopic(t, n, topic, 1)
	lines := runKafkajs(t, modules, n.addr, "acls", map[string]any{"topic": topic, "principal": "User:alice"})
	if len(lines) != 2 {
		t.Fatalf("kafkajs acls printed %v", lines)
	}
	b, _ := json.Marshal(lines[1]["result"])
	if !strings.Contains(string(b), `"principal":"User:alice"`) || !strings.Contains(string(b), topic) {
		t.Fatalf("describeAcls after createAcls = %s, want User:alice's ACL on %s", b, topic)
	}
}

// noSnappy keeps franz-go from compressing with snappy (its default),
// which kafkajs cannot read without a codec plugin.
var noSnappy = kgo.ProducerBatchCompression(kgo.GzipCompression(), kgo.NoCompression())

func containsAny(list any, s string) bool {
	l, _ := list.([]any)
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func kadmFor(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func endOffsets(t *testing.T, addr, topic string) map[int32]int64 {
	t.Helper()
	ends, err := kadmFor(t, addr).ListEndOffsets(ctxT(t, 10*time.Second), topic)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}
