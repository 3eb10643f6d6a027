package integration

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestFranzGoSuite runs franz-go's own kgo test suite, at the version
// go.mod names, against a Sluice broker. Its integration tests read the
// broker's address from KGO_SEEDS: group ETL with every balancer
// (eager, cooperative, static members), transactional ETL
// (GroupTransactSession across rebalances), regex consumption, adding
// partitions while consuming, pausing, purging, large fetches, pooled
// records, and the KIP-848 consumer-group variants (range/848,
// sticky/848, sticky/848/static: they run because ConsumerGroupHeartbeat
// v1 is advertised), and the share-group tests (TestShareGroup,
// TestShareGroupETL, TestShareGroupAckOnClose, TestShareGroupOffsetsAdmin,
// TestConsumeRegexShareSkipsInternal: they run because ShareFetch and
// ShareAcknowledge v2 are advertised, and set share.auto.offset.reset and
// share.record.lock.duration.ms on their groups as GROUP configs) ...
// Tests for features Sluice does not serve (OAUTHBEARER) skip
// themselves; SCRAM ones need KGO_TEST_SCRAM, which this test does not
// set (Sluice's own security tests cover SCRAM with kgo).

func TestFranzGoSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs franz-go's kgo test suite (a minute or two)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		needTool(t, "go is not on PATH")
	}
	n := startNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "-timeout=9m", "-v", "github.com/twmb/franz-go/pkg/kgo")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+n.addr, "KGO_TEST_RF=1", "KGO_TEST_RECORDS=10000")
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) > 80 {
			lines = lines[len(lines)-80:]
		}
		t.Fatalf("franz-go's kgo suite against Sluice: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if !strings.Contains(string(out), "ok  \tgithub.com/twmb/franz-go/pkg/kgo") {
		t.Fatalf("franz-go's kgo suite did not report ok:\n%s", out)
	}
	// The share-group tests ran and passed (they skip themselves when the
	// broker does not advertise ShareFetch and ShareAcknowledge v2).
	for _, name := range []string{"TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal"} {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("franz-go's kgo suite did not pass %s", name)
		}
	}
}
