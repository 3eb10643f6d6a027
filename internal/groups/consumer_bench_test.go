package groups

import (
	"fmt"
	"testing"
)

// BenchmarkConsumerGroupStable100 measures the coordinator's work for 100
// consumer-protocol members to join a group on a 400-partition topic and
// reach a stable assignment (every member at the assignment epoch with
// its target), over the in-memory store: the heartbeats' processing,
// without network or fsync. It reports the heartbeats that took.
func BenchmarkConsumerGroupStable100(b *testing.B) {
	ts := &topicSet{}
	ts.set("t", 400)
	beats := 0
	for i := 0; b.Loop(); i++ {
		h := newHarness(b, consumerCfg(ts))
		group := fmt.Sprintf("g%d", i)
		ms := make([]*cmem, 100)
		for k := range ms {
			ms[k] = newCmem(b, h.c, ts, group, fmt.Sprintf("m%03d", k), "t")
			ms[k].join()
			beats++
		}
		for round := 0; ; round++ {
			if round > 50 {
				b.Fatal("no stable assignment after 50 rounds")
			}
			for _, m := range ms {
				m.mustBeat()
				beats++
			}
			if describe(b, h.c, group).State == "Stable" {
				break
			}
		}
		_ = h.c.Close()
	}
	b.ReportMetric(float64(beats)/float64(b.N), "heartbeats/op")
}
