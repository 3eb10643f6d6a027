package broker

import (
	"testing"
	"time"
)

// TestTopicConfigLongDurations checks that retention.ms and segment.ms
// values too long for a time.Duration mean "practically forever", not a
// wrapped-around duration: retention.ms=20000000000000 (about 630 years)
// must not become a retention of a few weeks that deletes data.
func TestTopicConfigLongDurations(t *testing.T) {
	const century = 100 * 365 * 24 * time.Hour
	for _, ms := range []string{"9223372036854", "9223372036855", "10000000000000", "20000000000000", "4611686018427387904"} {
		c, err := parseTopicConfig(map[string]string{"retention.ms": ms, "segment.ms": ms})
		if err != nil {
			t.Fatalf("%s: %v", ms, err)
		}
		sc := c.storage()
		if sc.RetentionAge >= 0 && sc.RetentionAge < century {
			t.Errorf("retention.ms=%s gives a retention of %v", ms, sc.RetentionAge)
		}
		if sc.SegmentAge >= 0 && sc.SegmentAge < century {
			t.Errorf("segment.ms=%s gives a segment age of %v", ms, sc.SegmentAge)
		}
	}
}
