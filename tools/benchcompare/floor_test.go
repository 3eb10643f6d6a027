package main

import (
	"math"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/bench"
)

func p50s(ds ...time.Duration) []bench.Result {
	rs := make([]bench.Result, len(ds))
	for i, d := range ds {
		rs[i].Latency.P50 = d
	}
	return rs
}

// Each broker's median p50 on a one-caller workload is divided by
// kfake-mem's median p50 plus each floor; other workloads, kfake-mem
// itself and workloads without kfake-mem's results give no row.
func TestFloorRows(t *testing.T) {
	sel := []workload{{name: "sync-1x100B-fresh"}, {name: "async-100B-1p"}, {name: "sync-1x100B"}, {name: "sync-64x100B"}}
	kinds := []brokerKind{{name: "sluice"}, {name: "kfake-mem"}, {name: "kfake-sync"}}
	us := time.Microsecond
	results := map[string]map[string][]bench.Result{
		"sync-1x100B-fresh": {
			"sluice":     p50s(300*us, 340*us, 500*us),
			"kfake-mem":  p50s(120*us, 121*us, 130*us),
			"kfake-sync": p50s(630 * us),
		},
		"async-100B-1p": {"sluice": p50s(us), "kfake-mem": p50s(us)},
		"sync-1x100B":   {"sluice": p50s(266 * us)}, // no kfake-mem run
		"sync-64x100B":  {"sluice": p50s(us), "kfake-mem": p50s(us)},
	}
	f := floors{backToBack: 104 * us, peer: 135 * us}
	rows := floorRows(sel, kinds, results, f)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (sluice and kfake-sync on sync-1x100B-fresh): %+v", len(rows), rows)
	}
	want := []struct {
		broker    string
		p50       time.Duration
		b2b, peer float64
	}{
		{"sluice", 340 * us, 340.0 / 225, 340.0 / 256},
		{"kfake-sync", 630 * us, 630.0 / 225, 630.0 / 256},
	}
	for i, w := range want {
		r := rows[i]
		if r.workload != "sync-1x100B-fresh" || r.broker != w.broker || r.p50 != w.p50 || r.base != 121*us {
			t.Errorf("row %d: %+v, want %s at %v over a base of 121µs", i, r, w.broker, w.p50)
		}
		if math.Abs(r.vsBackToBack-w.b2b) > 1e-9 || math.Abs(r.vsPeer-w.peer) > 1e-9 {
			t.Errorf("row %d: ratios %.4f and %.4f, want %.4f and %.4f", i, r.vsBackToBack, r.vsPeer, w.b2b, w.peer)
		}
	}
}

// measureFloors times real writes in the directory it is given.
func TestMeasureFloors(t *testing.T) {
	f, err := measureFloors(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if f.backToBack <= 0 || f.peer <= 0 {
		t.Fatalf("floors %+v: want both above 0", f)
	}
}
