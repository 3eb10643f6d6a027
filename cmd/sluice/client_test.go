package main

import (
	"bytes"
	"strings"
	"testing"

	"sluice/broker/brokertest"
)

// TestClientCommands drives topic, produce, consume and group against an
// embedded broker and checks what each prints.
func TestClientCommands(t *testing.T) {
	b := brokertest.Start(t)
	addr := b.Addr()
	run := func(name string, fn func() error) {
		t.Helper()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var out bytes.Buffer
	run("topic create", func() error {
		return topicCmd([]string{"create", "-b", addr, "-p", "2", "-c", "retention.ms=3600000", "cli"}, &out)
	})
	if !strings.Contains(out.String(), "created cli with 2 partitions") {
		t.Fatalf("topic create printed %q", out.String())
	}
	out.Reset()
	run("topic list", func() error { return topicCmd([]string{"list", "-b", addr}, &out) })
	if !strings.Contains(out.String(), "cli") || !strings.Contains(out.String(), "2") {
		t.Fatalf("topic list printed %q", out.String())
	}
	if err := topicCmd([]string{"create", "-b", addr, "-c", "cleanup.policy=compact", "compacted"}, &out); err == nil {
		t.Fatal("topic create with cleanup.policy=compact succeeded; Sluice refuses compaction")
	}

	var stderr bytes.Buffer
	run("produce", func() error {
		return produceCmd([]string{"-b", addr, "-t", "cli", "-K", ":", "-p", "0"}, strings.NewReader("a:1\nb:2\nc:3\n"), &stderr)
	})
	if !strings.Contains(stderr.String(), "produced 3 records") {
		t.Fatalf("produce printed %q", stderr.String())
	}

	out.Reset()
	run("consume", func() error {
		return consumeCmd([]string{"-b", addr, "-t", "cli", "-e", "-f", "%p %o %k=%v\\n"}, &out)
	})
	if got, want := out.String(), "0 0 a=1\n0 1 b=2\n0 2 c=3\n"; got != want {
		t.Fatalf("consume printed %q, want %q", got, want)
	}

	for round, want := range []string{"0 0 a=1\n0 1 b=2\n0 2 c=3\n", ""} {
		out.Reset()
		run("consume -G", func() error {
			return consumeCmd([]string{"-b", addr, "-t", "cli", "-e", "-G", "cli-group", "-f", "%p %o %k=%v\\n"}, &out)
		})
		if out.String() != want {
			t.Fatalf("consume -G round %d printed %q, want %q (the second round resumes at the committed end)", round, out.String(), want)
		}
	}
	out.Reset()
	run("group describe", func() error { return groupCmd([]string{"describe", "-b", addr, "cli-group"}, &out) })
	if !strings.Contains(out.String(), "cli-group") || !strings.Contains(out.String(), "cli") {
		t.Fatalf("group describe printed %q", out.String())
	}
	out.Reset()
	run("group list", func() error { return groupCmd([]string{"list", "-b", addr}, &out) })
	if !strings.Contains(out.String(), "cli-group") {
		t.Fatalf("group list printed %q", out.String())
	}
	out.Reset()
	run("topic delete", func() error { return topicCmd([]string{"delete", "-b", addr, "cli"}, &out) })
	if !strings.Contains(out.String(), "deleted cli") {
		t.Fatalf("topic delete printed %q", out.String())
	}
}
