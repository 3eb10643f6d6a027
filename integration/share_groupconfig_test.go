package integration

import (
	"regexp"
	"strings"
	"testing"
)

// TestShareGroupConfigDocCommands runs the per-group settings commands
// of docs/share-groups.md against a broker whose share groups start at
// latest: the group set to earliest reads the records produced before
// it joined, and a lock duration below the bounds is refused.
func TestShareGroupConfigDocCommands(t *testing.T) {
	n := startNode(t)
	out := runDocCommands(t, n, docBlock(t, "docs/share-groups.md", "share-config-doc-commands"))
	for _, re := range []string{`(?m)^share.auto.offset.reset +earliest +GROUP_CONFIG$`, `(?m)^share.record.lock.duration.ms +30000 +DEFAULT_CONFIG$`,
		`(?m)^share.isolation.level +read_uncommitted +DEFAULT_CONFIG$`,
		`INVALID_CONFIG: group nightly: share.record.lock.duration.ms 5000 is outside \[15000, 60000\]`, `(?m)^refused$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output does not match %s:\n%s", re, out)
		}
	}
	if !strings.Contains(out, "accepted x\naccepted y\naccepted z\n") {
		t.Errorf("the earliest group did not accept x, y and z in order:\n%s", out)
	}
}
