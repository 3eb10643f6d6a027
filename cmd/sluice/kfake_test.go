package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestAgainstKfake runs the client commands against franz-go's kfake, a
// second implementation of the Kafka protocol, including alter-config,
// which kfake serves.
func TestAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]

	ok(t, "", "topic", "create", "k", "-p", "2", "-b", addr)
	if r := ok(t, "", "topic", "list", "-b", addr); !regexp.MustCompile(`(?m)^k +2 +1$`).MatchString(r.stdout) {
		t.Fatalf("topic list printed\n%s", r.stdout)
	}
	ok(t, "", "topic", "alter-config", "k", "--set", "retention.ms=1234", "-b", addr)
	r := ok(t, "", "topic", "describe", "k", "-b", addr)
	if !regexp.MustCompile(`(?m)^retention\.ms +1234 +DYNAMIC_TOPIC_CONFIG$`).MatchString(r.stdout) {
		t.Fatalf("after alter-config, describe printed\n%s", r.stdout)
	}
	ok(t, "", "topic", "alter-config", "k", "--delete", "retention.ms", "-b", addr)
	if r := ok(t, "", "topic", "describe", "k", "-b", addr); strings.Contains(r.stdout, "1234") {
		t.Fatalf("after alter-config --delete, describe printed\n%s", r.stdout)
	}
	ok(t, "a:1\nb:2\n", "produce", "-t", "k", "-K", ":", "-p", "1", "-b", addr)
	if got := ok(t, "", "consume", "-t", "k", "-e", "-G", "kg", "-f", `%p %o %k=%v\n`, "-b", addr).stdout; got != "1 0 a=1\n1 1 b=2\n" {
		t.Fatalf("consume printed %q", got)
	}
	if got := ok(t, "", "consume", "-t", "k", "-e", "-o", "end", "-b", addr).stdout; got != "" {
		t.Fatalf("consume -o end printed %q", got)
	}
	if r := ok(t, "", "group", "describe", "kg", "-b", addr); !regexp.MustCompile(`(?m)^k +1 +2 +2 +0 +-$`).MatchString(r.stdout) {
		t.Fatalf("group describe printed\n%s", r.stdout)
	}
	ok(t, "", "group", "seek", "kg", "--to", "beginning", "-b", addr)
	ok(t, "", "group", "delete", "kg", "-b", addr)
	ok(t, "", "topic", "add-partitions", "k", "-n", "1", "-b", addr)
	fails(t, 1, `topic describe nope: topic "nope" does not exist`, "", "topic", "describe", "nope", "-b", addr)
	ok(t, "", "topic", "delete", "k", "--yes", "-b", addr)
}
