package groups

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnOffsets: a committed transaction's offsets are written without
// a membership check, but never over a commit made after the
// transaction's decision; RequireStable reports pending ones; CheckMember
// fences stale members.
func TestTxnOffsets(t *testing.T) {
	pending := false
	h := newHarness(t, func(c *Config) {
		c.PendingTxnOffset = func(group, topic string, p int32) bool { return pending && group == "g" && topic == "t" && p == 0 }
	})
	decided := h.clock.Now().UnixMilli()
	if err := h.c.CommitTxnOffsets("g", []TxnOffset{{Topic: "t", Partition: 0, Offset: 10}}, decided); err != nil {
		t.Fatal(err)
	}
	if got := h.fetch("g", "t", 0); got != 10 {
		t.Fatalf("offset %d after the transaction, want 10", got)
	}
	h.clock.Advance(time.Second)
	if code := h.commit("g", "", -1, "t", 0, 20); code != 0 {
		t.Fatal(code)
	}
	// Recovery writes the transaction's offsets again: the newer plain
	// commit stays.
	if err := h.c.CommitTxnOffsets("g", []TxnOffset{{Topic: "t", Partition: 0, Offset: 10}}, decided); err != nil {
		t.Fatal(err)
	}
	if got := h.fetch("g", "t", 0); got != 20 {
		t.Fatalf("offset %d after a repeated transaction commit, want the newer 20", got)
	}
	pending = true
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, "g", true
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if r := h.c.OffsetFetch(nil, req); r.Topics[0].Partitions[0].ErrorCode != errUnstableOffsetCommit {
		t.Fatalf("RequireStable with a pending offset: %+v", r.Topics[0].Partitions[0])
	}
	req.RequireStable = false
	if r := h.c.OffsetFetch(nil, req); r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[0].Offset != 20 {
		t.Fatalf("fetch without RequireStable: %+v", r.Topics[0].Partitions[0])
	}
	ids, gen := h.stableGroup("members", 1)
	if code := h.c.CheckMember("members", ids[0], nil, gen); code != 0 {
		t.Fatalf("current member: %d", code)
	}
	if code := h.c.CheckMember("members", ids[0], nil, gen-1); code != errIllegalGeneration {
		t.Fatalf("stale generation: %d", code)
	}
	if code := h.c.CheckMember("members", "stranger", nil, gen); code != errUnknownMemberID {
		t.Fatalf("unknown member: %d", code)
	}
}
