package txn

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicedb/sluice/internal/vfs"
)

func openTest(t *testing.T, s *sink, mod func(*Config)) *Coordinator {
	t.Helper()
	clock := time.Unix(1_700_000_000, 0)
	cfg := s.config(vfs.NewMem(), func() time.Time { return clock })
	cfg.PartitionExists = func(topic string, p int32) bool { return topic != "missing" }
	if mod != nil {
		mod(&cfg)
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestInitProducerIDFencingAndRetry(t *testing.T) {
	c := openTest(t, newSink(), nil)
	if _, _, code := c.InitProducerID("a", 0, -1, -1); code != codeBadTimeout {
		t.Fatalf("timeout 0: code %d", code)
	}
	if _, _, code := c.InitProducerID("a", int32(time.Hour/time.Millisecond), -1, -1); code != codeBadTimeout {
		t.Fatalf("timeout above the maximum: code %d", code)
	}
	pid, e0, code := c.InitProducerID("a", 1000, -1, -1)
	if code != 0 || e0 != 0 {
		t.Fatalf("first init: %d %d %d", pid, e0, code)
	}
	// KIP-360: the producer bumps its own epoch.
	pid1, e1, code := c.InitProducerID("a", 1000, pid, e0)
	if code != 0 || pid1 != pid || e1 != 1 {
		t.Fatalf("bump: %d %d %d", pid1, e1, code)
	}
	// Its retry (the answer was lost) gets the same answer.
	if p, e, code := c.InitProducerID("a", 1000, pid, e0); code != 0 || p != pid || e != e1 {
		t.Fatalf("retried bump: %d %d %d", p, e, code)
	}
	// Another epoch is fenced.
	if _, _, code := c.InitProducerID("a", 1000, pid, 7); code != codeFenced {
		t.Fatalf("stale epoch: code %d", code)
	}
	// A new incarnation without an id bumps too, and fences epoch 1.
	if _, e2, code := c.InitProducerID("a", 1000, -1, -1); code != 0 || e2 != 2 {
		t.Fatalf("new incarnation: %d %d", e2, code)
	}
	if codes := c.AddPartitions("a", pid, e1, []TopicPartition{{"t", 0}}); codes[0] != codeFenced {
		t.Fatalf("AddPartitions of the fenced incarnation: %v", codes)
	}
	if codes := c.AddPartitions("a", pid+1, 2, []TopicPartition{{"t", 0}}); codes[0] != codeMapping {
		t.Fatalf("AddPartitions with another producer id: %v", codes)
	}
	if codes := c.AddPartitions("nope", pid, 2, []TopicPartition{{"t", 0}}); codes[0] != codeMapping {
		t.Fatalf("AddPartitions of an unknown id: %v", codes)
	}
}

func TestTransactionErrors(t *testing.T) {
	s := newSink()
	member := int16(0)
	c := openTest(t, s, func(cfg *Config) {
		cfg.CheckMember = func(group, m string, _ *string, gen int32) int16 { return member }
	})
	pid, ep, _ := c.InitProducerID("a", 60000, -1, -1)
	if code := c.EndTxn("a", pid, ep, true); code != codeBadState {
		t.Fatalf("EndTxn with no transaction: %d", code)
	}
	codes := c.AddPartitions("a", pid, ep, []TopicPartition{{"t", 0}, {"missing", 0}})
	if codes[0] != codeNotAttempted || codes[1] != codeUnknownPart {
		t.Fatalf("AddPartitions with an unknown partition: %v", codes)
	}
	if codes := c.AddPartitions("a", pid, ep, []TopicPartition{{"t", 0}}); codes[0] != 0 {
		t.Fatalf("AddPartitions: %v", codes)
	}
	if codes := c.CommitOffsets("a", "g", pid, ep, -1, "", nil, []Offset{{Topic: "t", Offset: 1}}); codes[0] != codeBadState {
		t.Fatalf("TxnOffsetCommit before AddOffsetsToTxn: %v", codes)
	}
	if code := c.AddOffsets("a", pid, ep, "g"); code != 0 {
		t.Fatal(code)
	}
	member = kerr.IllegalGeneration.Code
	if codes := c.CommitOffsets("a", "g", pid, ep, 3, "m", nil, []Offset{{Topic: "t", Offset: 1}}); codes[0] != member {
		t.Fatalf("TxnOffsetCommit of a stale generation: %v", codes)
	}
	member = 0
	if codes := c.CommitOffsets("a", "g", pid, ep, 4, "m", nil, []Offset{{Topic: "t", Offset: 1}, {Topic: "missing", Offset: 1}}); codes[0] != 0 || codes[1] != codeUnknownPart {
		t.Fatalf("TxnOffsetCommit: %v", codes)
	}
	if !c.PendingOffset("g", "t", 0) || c.PendingOffset("g", "t", 1) || c.PendingOffset("h", "t", 0) {
		t.Fatal("PendingOffset does not reflect the staged offset")
	}
	if code := c.CheckProduce(pid, ep, "t", 1); code != codeBadState {
		t.Fatalf("produce to a partition not added: %d", code)
	}
	if code := c.CheckProduce(pid, ep, "t", 0); code != 0 {
		t.Fatalf("produce to an added partition: %d", code)
	}

	// A marker failure: the decision stands (CONCURRENT_TRANSACTIONS, the
	// partition refuses the producer), the sweep completes it later.
	failing := errors.New("disk gone")
	c.cfg.WriteMarkers = func(int64, int16, bool, []TopicPartition, int16) error { return failing }
	if code := c.EndTxn("a", pid, ep, true); code != codeConcurrent {
		t.Fatalf("EndTxn with failing markers: %d", code)
	}
	if code := c.CheckProduce(pid, ep, "t", 0); code != codeBadState {
		t.Fatalf("produce while the commit is being completed: %d", code)
	}
	if codes := c.AddPartitions("a", pid, ep, []TopicPartition{{"t", 0}}); codes[0] != codeConcurrent {
		t.Fatalf("AddPartitions while the commit is being completed: %v", codes)
	}
	if code := c.EndTxn("a", pid, ep, false); code != codeBadState {
		t.Fatalf("abort of a decided commit: %d", code)
	}
	// The offsets may already be written (the commit is decided), but
	// they stay pending for RequireStable fetches until the markers are.
	if !c.PendingOffset("g", "t", 0) {
		t.Fatal("offsets of a commit whose markers are not written are not pending")
	}
	c.cfg.WriteMarkers = newSink().config(nil, nil).WriteMarkers
	c.Sweep()
	if st := c.Describe([]string{"a"})[0]; st.State != CompleteCommit {
		t.Fatalf("after the sweep: %s", st.State)
	}
	if s.offsets["g"][TopicPartition{"t", 0}] != 1 || c.PendingOffset("g", "t", 0) {
		t.Fatalf("offsets after the commit: %v", s.offsets)
	}
	// A retried EndTxn of the finished commit succeeds; the other decision does not.
	if code := c.EndTxn("a", pid, ep, true); code != 0 {
		t.Fatalf("retried commit: %d", code)
	}
	if code := c.EndTxn("a", pid, ep, false); code != codeBadState {
		t.Fatalf("abort after commit: %d", code)
	}
}
