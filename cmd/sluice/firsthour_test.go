package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/broker/brokertest"
)

// TestProduceLargeRecord writes a 2 MiB record to a topic whose
// max.message.bytes allows it: the client's batch limit follows the
// topic, and --max-message-bytes lowers it.
func TestProduceLargeRecord(t *testing.T) {
	addr := brokertest.Fast(t).Addr()
	ok(t, "", "topic", "create", "big", "-b", addr, "-c", "max.message.bytes=4194304")
	value := strings.Repeat("x", 2<<20)
	r := ok(t, value+"\n", "produce", "-t", "big", "-b", addr)
	if !strings.Contains(r.stderr, "1 record") {
		t.Fatalf("produce summary %q", r.stderr)
	}
	r = ok(t, "", "consume", "-t", "big", "-b", addr, "-e", "-f", "%o %v\n")
	if r.stdout != "0 "+value+"\n" {
		t.Fatalf("consumed %d bytes, want offset 0 and the 2 MiB value", len(r.stdout))
	}
	fails(t, 1, "MESSAGE_TOO_LARGE", value+"\n", "produce", "-t", "big", "-b", addr, "--max-message-bytes", "1048576")
	fails(t, 2, "--max-message-bytes -1", "x\n", "produce", "-t", "big", "-b", addr, "--max-message-bytes", "-1")
}

// TestTopicDescribeSizes checks that topic describe shows each
// partition's size from Sluice's DescribeLogDirs, not "-".
func TestTopicDescribeSizes(t *testing.T) {
	addr := brokertest.Fast(t).Addr()
	ok(t, "", "topic", "create", "sized", "-b", addr, "-p", "2")
	ok(t, "a:1\nb:2\n", "produce", "-b", addr, "-t", "sized", "-p", "1", "-K", ":")
	r := ok(t, "", "topic", "describe", "sized", "-b", addr)
	for _, re := range []string{`(?m)^0 +0 +0 +0 +0$`, `(?m)^1 +0 +0 +2 +[1-9]\d*$`} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Fatalf("topic describe output does not match %s:\n%s", re, r.stdout)
		}
	}
}
