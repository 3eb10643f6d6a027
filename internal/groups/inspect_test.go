package groups

import (
	"reflect"
	"testing"
)

func TestSummaries(t *testing.T) {
	h := newHarness(t, nil)
	members, gen := h.stableGroup("live", 2)
	if code := h.commit("live", members[0], gen, "t", 1, 40); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	for p, off := range map[int32]int64{2: 7, 0: 5} {
		if code := h.commit("idle", "", -1, "t", p, off); code != 0 {
			t.Fatalf("commit: %d", code)
		}
	}
	got := h.c.Summaries()
	if len(got) != 2 || got[0].ID != "idle" || got[1].ID != "live" {
		t.Fatalf("summaries = %+v", got)
	}
	idle, live := got[0], got[1]
	if idle.State != "Empty" || idle.Members != 0 ||
		!reflect.DeepEqual(idle.Offsets, []CommittedOffset{{"t", 0, 5}, {"t", 2, 7}}) {
		t.Errorf("idle = %+v", idle)
	}
	if live.State != "Stable" || live.Members != 2 || live.ProtocolType != "consumer" ||
		!reflect.DeepEqual(live.Offsets, []CommittedOffset{{"t", 1, 40}}) {
		t.Errorf("live = %+v", live)
	}
	h.c.Close()
	if s := h.c.Summaries(); s != nil {
		t.Errorf("after Close: %+v", s)
	}
}
