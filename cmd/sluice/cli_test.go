package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicedb/sluice/broker"
	"github.com/sluicedb/sluice/broker/brokertest"
)

// result is what one sluice invocation printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// sluice runs the command line in-process with stdin and returns what it
// printed and its exit code.
func sluice(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

// ok runs the command line and fails the test unless it exits 0.
func ok(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := sluice(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("sluice %q exited %d:\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// fails runs the command line and fails the test unless it exits with
// code and says want on stderr.
func fails(t *testing.T, code int, want string, stdin string, args ...string) result {
	t.Helper()
	r := sluice(t, stdin, args...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		t.Fatalf("sluice %q: exit %d, stderr %q; want exit %d saying %q", args, r.code, r.stderr, code, want)
	}
	return r
}

// TestTopicCommands runs every topic subcommand, with flags before and
// after the positional arguments and before the subcommand.
func TestTopicCommands(t *testing.T) {
	addr := brokertest.Start(t).Addr()

	r := ok(t, "", "topic", "create", "-b", addr, "-p", "2", "-c", "retention.ms=3600000", "before")
	if r.stdout != "created before (2 partitions)\n" {
		t.Fatalf("create printed %q", r.stdout)
	}
	ok(t, "", "topic", "create", "after", "-p", "3", "--config", "segment.bytes=1048576", "-b", addr)
	if r := ok(t, "", "-b", addr, "topic", "create", "--partitions=1", "first", "second"); r.stdout != "created first (1 partition)\ncreated second (1 partition)\n" {
		t.Fatalf("create of one-partition topics printed %q", r.stdout)
	}

	r = ok(t, "", "topic", "list", "-b", addr)
	want := "NAME    PARTITIONS  REPLICAS\nafter   3           1\nbefore  2           1\nfirst   1           1\nsecond  1           1\n"
	if r.stdout != want {
		t.Fatalf("topic list printed\n%s\nwant\n%s", r.stdout, want)
	}

	ok(t, "a:1\nb:2\n", "produce", "-b", addr, "-t", "after", "-p", "1", "-K", ":")
	r = ok(t, "", "topic", "describe", "after", "-b", addr)
	for _, re := range []string{
		`(?m)^NAME +after$`, `(?m)^PARTITIONS +3$`,
		`(?m)^0 +0 +0 +0 +\S+$`, `(?m)^1 +0 +0 +2 +\S+$`,
		`(?m)^segment\.bytes +1048576 +DYNAMIC_TOPIC_CONFIG$`,
		`(?m)^retention\.ms +\d+ +DEFAULT_CONFIG$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Fatalf("topic describe output does not match %s:\n%s", re, r.stdout)
		}
	}

	r = ok(t, "", "topic", "add-partitions", "before", "-n", "2", "-b", addr)
	if r.stdout != "added 2 partition(s) to before\n" {
		t.Fatalf("add-partitions printed %q", r.stdout)
	}
	if r := ok(t, "", "topic", "describe", "-b", addr, "before"); !strings.Contains(r.stdout, "PARTITIONS  4\n") {
		t.Fatalf("after add-partitions, describe printed\n%s", r.stdout)
	}

	// alter-config works once the broker serves IncrementalAlterConfigs;
	// until then the broker's refusal is shown and the exit code is 1.
	r = sluice(t, "", "topic", "alter-config", "before", "--set", "retention.ms=1000", "-b", addr)
	switch r.code {
	case 0:
		d := ok(t, "", "topic", "describe", "before", "-b", addr)
		if !regexp.MustCompile(`(?m)^retention\.ms +1000 +DYNAMIC_TOPIC_CONFIG$`).MatchString(d.stdout) {
			t.Fatalf("alter-config succeeded but describe shows\n%s", d.stdout)
		}
	case 1:
		if !strings.Contains(r.stderr, "does not support this request") {
			t.Fatalf("alter-config failed without saying why: %q", r.stderr)
		}
	default:
		t.Fatalf("alter-config exited %d: %s", r.code, r.stderr)
	}

	// The broker's own message, in full.
	fails(t, 1, `topic create bad: INVALID_CONFIG: unknown topic config "bogus.key"; supported: cleanup.policy`, "",
		"topic", "create", "bad", "-c", "bogus.key=1", "-b", addr)
	fails(t, 1, `topic create before: TOPIC_ALREADY_EXISTS`, "", "topic", "create", "before", "-b", addr)
	fails(t, 1, `topic describe nope: topic "nope" does not exist`, "", "topic", "describe", "nope", "-b", addr)
	fails(t, 1, `topic add-partitions nope: topic "nope" does not exist`, "", "topic", "add-partitions", "nope", "-n", "1", "-b", addr)
	fails(t, 1, `topic delete nope: UNKNOWN_TOPIC_OR_PARTITION`, "", "topic", "delete", "nope", "-b", addr)
	fails(t, 2, "want key=value", "", "topic", "create", "x", "-c", "novalue", "-b", addr)
	fails(t, 2, "want one or more topic names", "", "topic", "delete", "-b", addr)

	if r := ok(t, "", "topic", "list", "-b", addr); strings.Contains(r.stdout, "nope") {
		t.Fatalf("looking up a missing topic created it:\n%s", r.stdout)
	}

	r = ok(t, "", "topic", "delete", "first", "-b", addr, "second")
	if r.stdout != "deleted first\ndeleted second\n" {
		t.Fatalf("delete printed %q", r.stdout)
	}
	if r := ok(t, "", "topic", "list", "-b", addr); strings.Contains(r.stdout, "first") {
		t.Fatalf("deleted topic still listed:\n%s", r.stdout)
	}
}

// TestTopicDeleteActsOnGivenBroker checks that -b after the topic name
// picks the broker: the topic of the same name elsewhere survives.
func TestTopicDeleteActsOnGivenBroker(t *testing.T) {
	a, b := brokertest.Start(t).Addr(), brokertest.Start(t).Addr()
	t.Setenv("SLUICE_BROKERS", a) // the default the command must not use
	ok(t, "", "topic", "create", "victim", "-b", a)
	ok(t, "", "topic", "create", "victim", "-b", b)
	ok(t, "", "topic", "delete", "victim", "-b", b)
	if r := ok(t, "", "topic", "list", "-b", b); strings.Contains(r.stdout, "victim") {
		t.Fatalf("victim still on %s:\n%s", b, r.stdout)
	}
	if r := ok(t, "", "topic", "list"); !strings.Contains(r.stdout, "victim") {
		t.Fatalf("victim deleted on %s (SLUICE_BROKERS) too:\n%s", a, r.stdout)
	}
}

// TestProduceConsume covers produce's and consume's flags.
func TestProduceConsume(t *testing.T) {
	addr := brokertest.Start(t).Addr()
	t.Setenv("SLUICE_BROKERS", addr)
	ok(t, "", "topic", "create", "t", "-p", "2")

	r := ok(t, "a:1\nb:2\nc:3\n", "produce", "-t", "t", "-K", ":", "-p", "0", "-H", "h1=x", "-H", "h2=y")
	if want := "produced 3 records (6 bytes) to t\n  partition 0: 3 records at offsets 0-2\n"; r.stderr != want {
		t.Fatalf("produce summary %q, want %q", r.stderr, want)
	}
	file := filepath.Join(t.TempDir(), "records")
	if err := os.WriteFile(file, []byte("d=4|e=5|f=6|"), 0o644); err != nil {
		t.Fatal(err)
	}
	// acks=1 is answered before the fsync, so its records become visible
	// with the next fsync: the acks=all writes that follow.
	ok(t, "", "produce", "-f", file, "-D", "|", "-K", "=", "-t", "t", "-p", "1", "-z", "gzip", "--acks", "1")
	ok(t, "", "produce", "-f", file, "-D", "|", "-K", "=", "-t", "t", "-p", "1", "-z", "zstd")
	ok(t, "g\n", "produce", "-t", "t", "-p", "1", "--acks", "all")
	ok(t, "", "topic", "create", "noacks")
	r = ok(t, "x\ny\n", "produce", "-t", "noacks", "--acks", "0", "-p", "0")
	if want := "produced 2 records (2 bytes) to noacks\n  partition 0: 2 records (offsets unknown with acks=0)\n"; r.stderr != want {
		t.Fatalf("produce --acks 0 summary %q, want %q", r.stderr, want)
	}

	consume := func(args ...string) string {
		t.Helper()
		return ok(t, "", append([]string{"consume", "-t", "t"}, args...)...).stdout
	}
	if got, want := consume("-p", "0", "-e", "-f", `%t %p %o %k=%v %h\t|\\\n`), "t 0 0 a=1 h1=x,h2=y\t|\\\nt 0 1 b=2 h1=x,h2=y\t|\\\nt 0 2 c=3 h1=x,h2=y\t|\\\n"; got != want {
		t.Fatalf("consume -f printed %q, want %q", got, want)
	}
	if got, want := consume("-e", "-p", "1", "-f", `%k%v,`), "d4,e5,f6,d4,e5,f6,g,"; got != want {
		t.Fatalf("partition 1 holds %q, want %q (file, delimiter, compression, acks 1 and 0)", got, want)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-o", "end"}, ""},
		{[]string{"-o", "1000000"}, ""},
		{[]string{"-o", "2", "-p", "0"}, "2 c3\n"},
		{[]string{"-o", "-1"}, "2 c3\n6 g\n"},
		{[]string{"-o", "@0", "-p", "0"}, "0 a1\n1 b2\n2 c3\n"},
		{[]string{"-o", "@4102444800000"}, ""}, // 2100-01-01: after every record
		{[]string{"-o", "@2100-01-01T00:00:00Z"}, ""},
		{[]string{"-p", "1", "-c", "2"}, "0 d4\n1 e5\n"},
	}
	for _, c := range cases {
		args := append([]string{"-e", "-f", `%o %k%v\n`}, c.args...)
		if c.args[0] == "-p" {
			args = args[1:] // -c without -e
		}
		// Records of different partitions may interleave in any order.
		if got := consume(args...); sortedLines(got) != sortedLines(c.want) {
			t.Fatalf("consume %q printed %q, want %q", args, got, c.want)
		}
	}

	var rec jsonRecord
	out := consume("-J", "-c", "1", "-p", "0")
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if rec.Topic != "t" || rec.Partition != 0 || rec.Offset != 0 || rec.Key == nil || *rec.Key != "a" || rec.Value != "1" ||
		len(rec.Headers) != 2 || rec.Headers[1] != (jsonHeader{"h2", "y"}) || rec.Timestamp <= 0 {
		t.Fatalf("--json printed %q", out)
	}

	fails(t, 1, `consume: topic "nope" does not exist`, "", "consume", "-t", "nope", "-e")
	fails(t, 1, `produce: topic "nope" does not exist`, "x\n", "produce", "-t", "nope")
	fails(t, 1, `topic "t" has no partition 7`, "", "consume", "-t", "t", "-p", "7", "-e")
	fails(t, 2, `--offset "later"`, "", "consume", "-t", "t", "-o", "later")
	fails(t, 2, "unknown verb %x", "", "consume", "-t", "t", "-f", "%x")
	fails(t, 2, `--partitions "x"`, "", "consume", "-t", "t", "-p", "x")
	fails(t, 2, "-p and -G do not go together", "", "consume", "-t", "t", "-p", "0", "-G", "g")
	fails(t, 2, "--acks \"2\"", "", "produce", "-t", "t", "--acks", "2")
	fails(t, 2, "--topic (-t) is required", "", "produce")
}

// TestGroupCommands consumes in a group, then lists, describes, seeks
// and deletes it; seek refuses while the group has a member.
func TestGroupCommands(t *testing.T) {
	addr := brokertest.Start(t).Addr()
	t.Setenv("SLUICE_BROKERS", addr)
	ok(t, "", "topic", "create", "g", "-p", "2")
	ok(t, "a\nb\nc\n", "produce", "-t", "g", "-p", "0")

	for round, want := range []string{"0 a\n1 b\n2 c\n", ""} {
		if got := ok(t, "", "consume", "-t", "g", "-G", "grp", "-e", "-f", `%o %v\n`).stdout; got != want {
			t.Fatalf("round %d: consume -G printed %q, want %q (the second resumes at the committed end)", round, got, want)
		}
	}
	if r := ok(t, "", "group", "list"); !regexp.MustCompile(`(?m)^grp +Empty +classic +consumer$`).MatchString(r.stdout) {
		t.Fatalf("group list printed\n%s", r.stdout)
	}
	r := ok(t, "", "group", "describe", "grp")
	for _, re := range []string{`(?m)^STATE +Empty$`, `(?m)^g +0 +3 +3 +0 +-$`, `(?m)^g +1 +- +0 +0 +-$`} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Fatalf("group describe does not match %s:\n%s", re, r.stdout)
		}
	}

	// A live member: seek must refuse, as Kafka does.
	assigned := make(chan struct{})
	var once sync.Once
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("g"),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(assigned) }) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	<-assigned
	fails(t, 1, `group seek: group "grp" has 1 member(s)`, "", "group", "seek", "grp", "--to", "beginning")
	r = ok(t, "", "group", "describe", "grp")
	if !regexp.MustCompile(`(?m)^MEMBER +CLIENT +HOST +ASSIGNED\n\S+ +kgo +\S+ +g\[0,1\]$`).MatchString(r.stdout) {
		t.Fatalf("group describe with a member printed\n%s", r.stdout)
	}
	cancel()
	<-polled
	cl.Close() // leaves the group

	r = ok(t, "", "group", "seek", "grp", "--to", "1")
	if want := "TOPIC  PARTITION  OFFSET\ng      0          1\ng      1          0\n"; r.stdout != want {
		t.Fatalf("seek printed %q, want %q", r.stdout, want)
	}
	if got := ok(t, "", "consume", "-t", "g", "-G", "grp", "-e", "-f", `%o %v\n`).stdout; got != "1 b\n2 c\n" {
		t.Fatalf("after seek --to 1, consume -G printed %q", got)
	}
	ok(t, "", "group", "seek", "fresh", "--to", "end", "--topic", "g")
	if r := ok(t, "", "group", "describe", "fresh"); !regexp.MustCompile(`(?m)^g +0 +3 +3 +0 +-$`).MatchString(r.stdout) {
		t.Fatalf("group seek --topic on a new group, then describe:\n%s", r.stdout)
	}

	fails(t, 1, `group describe: group "nope" does not exist`, "", "group", "describe", "nope")
	fails(t, 1, `group seek: group "nope" does not exist`, "", "group", "seek", "nope", "--to", "end")
	fails(t, 2, "--to is required", "", "group", "seek", "grp")
	if r := ok(t, "", "group", "delete", "grp", "fresh"); r.stdout != "deleted group grp\ndeleted group fresh\n" {
		t.Fatalf("group delete printed %q", r.stdout)
	}
	fails(t, 1, `group delete: group "grp" does not exist`, "", "group", "delete", "grp")
}

// TestDeadBroker checks that client commands fail, not hang, against a
// closed port and against a broker that accepts but never answers.
func TestDeadBroker(t *testing.T) {
	closed := freeAddr(t)
	for _, args := range [][]string{{"topic", "list"}, {"produce", "-t", "x"}, {"consume", "-t", "x"}, {"group", "list"}} {
		fails(t, 1, "cannot reach "+closed+": connection refused", "a\n", append(args, "-b", closed)...)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards conns
		conns []net.Conn
	)
	wg.Add(1)
	go func() { // accept and never answer
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	}()
	silent := ln.Addr().String()
	for _, args := range [][]string{{"topic", "list"}, {"produce", "-t", "x"}} {
		fails(t, 1, "no answer from "+silent+" within 200ms", "a\n", append(args, "-b", silent, "--timeout", "200ms")...)
	}
}

// TestProduceRefusedUntilTimeout checks that records a broker keeps
// refusing with a retriable error fail after --timeout with a message
// that says what may have happened.
func TestProduceRefusedUntilTimeout(t *testing.T) {
	addr := brokertest.Start(t, broker.DiskLowWatermark(math.MaxInt64)).Addr()
	ok(t, "", "topic", "create", "full", "-b", addr)
	r := fails(t, 1, "1 of 1 records failed: records have timed out", "x\n", "produce", "-t", "full", "-b", addr, "--timeout", "1s")
	if !strings.Contains(r.stderr, "KAFKA_STORAGE_ERROR") {
		t.Fatalf("stderr %q does not name the likely cause", r.stderr)
	}
}

// TestUsage checks help and exit codes for command-line mistakes.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"topic", "--help"}, {"topic", "create", "-h"}, {"help", "consume"}} {
		if r := ok(t, "", args...); !strings.Contains(r.stdout, "Usage:") {
			t.Fatalf("%q printed no usage: %q", args, r.stdout)
		}
	}
	fails(t, 2, `unknown command "topc" for "sluice"; did you mean topic?`, "", "topc")
	fails(t, 2, `unknown command "lst" for "sluice topic"`, "", "topic", "lst")
	if r := fails(t, 2, "sluice: missing subcommand\n", ""); strings.Contains(r.stderr, "sluice: sluice") {
		t.Errorf("root without a command: stderr %q names sluice twice", r.stderr)
	}
	fails(t, 2, "sluice: topic: missing subcommand\n", "", "topic")
	fails(t, 2, "unknown flag: --bogus", "", "topic", "list", "--bogus")
	fails(t, 2, `invalid argument "soon" for "--timeout"`, "", "topic", "list", "--timeout", "soon")
	fails(t, 2, `sluice: topic list: want no arguments, got 1 argument(s) ["extra"]`, "", "topic", "list", "extra")
}

// TestCompletion checks that each shell's completion script is generated.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "__start_sluice",
		"zsh":  "#compdef sluice",
		"fish": "complete -c sluice",
	} {
		if r := ok(t, "", "completion", shell); !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: no %q in %d bytes", shell, want, len(r.stdout))
		}
	}
	// Completion of subcommand names goes through cobra's hidden __complete.
	if r := ok(t, "", "__complete", "topic", "de"); !strings.Contains(r.stdout, "delete") || !strings.Contains(r.stdout, "describe") {
		t.Errorf("__complete topic de printed %q", r.stdout)
	}
}

// sortedLines returns s with its lines sorted.
func sortedLines(s string) string {
	lines := strings.SplitAfter(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// TestConsumeCorruptBatch checks that a CRC error while consuming points
// to sluice repair. The broker is restarted after a clean shutdown, so
// it does not rescan the log and serves the damaged batch.
func TestConsumeCorruptBatch(t *testing.T) {
	dir := t.TempDir()
	start := func() *broker.Broker {
		b, err := broker.New(broker.DataDir(dir), broker.ListenAddr("127.0.0.1:0"))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(); err != nil {
			b.Close()
			t.Fatal(err)
		}
		return b
	}
	b := start()
	ok(t, "", "topic", "create", "dmg", "-b", b.Addr())
	ok(t, strings.Repeat("v", 64)+"\n", "produce", "-t", "dmg", "-b", b.Addr())
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, "topics", "dmg", "0", "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(strings.Repeat("v", 64)))
	if i < 0 {
		t.Fatalf("value not found in %s", seg)
	}
	data[i+10] = 'x'
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b = start()
	defer b.Close()
	fails(t, 1, "sluice repair --data DIR --topic dmg --partition 0", "", "consume", "-t", "dmg", "-e", "-b", b.Addr())
}
