package main

import (
	"strings"
	"testing"
)

func names(ks []brokerKind) string {
	var s []string
	for _, k := range ks {
		s = append(s, k.name)
	}
	return strings.Join(s, ",")
}

// Over n rounds of an even n brokers (2n of an odd n) each broker runs
// in every slot equally often and follows each of the others.
func TestOrderVariesSlotAndPredecessor(t *testing.T) {
	all := []brokerKind{{name: "a"}, {name: "b"}, {name: "c"}, {name: "d"}, {name: "e"}}
	for n := 2; n <= 5; n++ {
		kinds := all[:n]
		rounds := n
		if n%2 == 1 {
			rounds = 2 * n
		}
		slots := map[string]map[int]int{}
		preds := map[string]map[string]bool{}
		for r := 0; r < rounds; r++ {
			got := order(kinds, r)
			seen := map[string]bool{}
			for i, k := range got {
				if seen[k.name] {
					t.Fatalf("%d brokers, round %d: %s twice in %s", n, r, k.name, names(got))
				}
				seen[k.name] = true
				if slots[k.name] == nil {
					slots[k.name], preds[k.name] = map[int]int{}, map[string]bool{}
				}
				slots[k.name][i]++
				if i > 0 {
					preds[k.name][got[i-1].name] = true
				}
			}
		}
		for _, k := range kinds {
			for i := 0; i < n; i++ {
				if slots[k.name][i] != rounds/n {
					t.Errorf("%d brokers: %s ran in slot %d %d times of %d rounds", n, k.name, i, slots[k.name][i], rounds)
				}
			}
			if len(preds[k.name]) != n-1 {
				t.Errorf("%d brokers: %s followed only %v", n, k.name, preds[k.name])
			}
		}
	}
	if got := names(order(all[:4], 1)); got != "b,c,a,d" {
		t.Errorf("4 brokers, round 1: %s, want b,c,a,d", got)
	}
}

func TestParseCPULine(t *testing.T) {
	a, err := parseCPULine("cpu  100 5 50 1000 40 0 7 3 0 0")
	if err != nil {
		t.Fatal(err)
	}
	if a.busy != 165 || a.total != 1205 {
		t.Fatalf("busy %d total %d, want 165 and 1205", a.busy, a.total)
	}
	b, _ := parseCPULine("cpu  105 5 52 1100 40 0 7 3 0 0") // 7 busy of 107
	if !quiet(a, b) {
		t.Error("7 busy ticks of 107 not quiet")
	}
	c, _ := parseCPULine("cpu  130 5 60 1100 40 0 7 3 0 0") // 35 busy of 135
	if quiet(a, c) {
		t.Error("35 busy ticks of 135 quiet")
	}
	if quiet(a, a) {
		t.Error("no time passed, yet quiet")
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu a b c d e f g h"} {
		if _, err := parseCPULine(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
