package main

// The floor of a lone synchronous producer's latency, measured by
// benchcompare itself so that the table states it from the same machine
// and run: kfake-mem's p50 (the request's round trip with no disk) plus
// one small write and fdatasync of a pre-zeroed file where the runs'
// data directories are made, back to back and each after a peer that
// answers in 100 µs (bench floor and bench floor --peer 100us).

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/bench"
)

// floorPeer is the peer's answer time of the second floor: about what a
// client takes to send its next request.
const floorPeer = 100 * time.Microsecond

// floors are the two fdatasync floors' p50s.
type floors struct {
	dir        string
	backToBack time.Duration
	peer       time.Duration
}

// measureFloors measures both floors in dir.
func measureFloors(dir string) (floors, error) {
	ctx := context.Background()
	f := floors{dir: dir}
	for _, p := range []time.Duration{0, floorPeer} {
		res, err := bench.Floor(ctx, bench.FloorConfig{Dir: dir, Ops: 2000, Size: 4096, Peer: p})
		if err != nil {
			return f, err
		}
		if p == 0 {
			f.backToBack = res.Latency.P50
		} else {
			f.peer = res.Latency.P50
		}
	}
	return f, nil
}

// syncOne reports whether w is a workload of one synchronous caller,
// whose p50 the floors bound.
func syncOne(w workload) bool { return strings.HasPrefix(w.name, "sync-1x") }

// floorRow is one broker's p50 on a one-caller workload against the
// floors: ratios to kfake-mem's p50 of the same workload plus each
// floor.
type floorRow struct {
	workload, broker string
	p50              time.Duration
	base             time.Duration // kfake-mem's p50
	vsBackToBack     float64
	vsPeer           float64
}

// floorRows computes the rows for every one-caller workload in sel and
// every broker but kfake-mem; none without kfake-mem's results.
func floorRows(sel []workload, kinds []brokerKind, results map[string]map[string][]bench.Result, f floors) []floorRow {
	p50 := func(r bench.Result) float64 { return float64(r.Latency.P50) }
	var rows []floorRow
	for _, w := range sel {
		if !syncOne(w) {
			continue
		}
		ref := results[w.name]["kfake-mem"]
		if len(ref) == 0 {
			continue
		}
		base := time.Duration(median(ref, p50))
		for _, k := range kinds {
			rs := results[w.name][k.name]
			if k.name == "kfake-mem" || len(rs) == 0 {
				continue
			}
			v := time.Duration(median(rs, p50))
			rows = append(rows, floorRow{
				workload: w.name, broker: k.name, p50: v, base: base,
				vsBackToBack: float64(v) / float64(base+f.backToBack),
				vsPeer:       float64(v) / float64(base+f.peer),
			})
		}
	}
	return rows
}

// printFloors prints the floors and, for each one-caller workload, every
// broker's p50 against them.
func printFloors(rows []floorRow, f floors) {
	if len(rows) == 0 {
		return
	}
	fmt.Println()
	fmt.Printf("Floors in %s (4 KiB write + fdatasync of a pre-zeroed file, p50, measured before the rounds): back to back %v, after a %v peer %v.\n",
		f.dir, f.backToBack.Round(time.Microsecond), floorPeer, f.peer.Round(time.Microsecond))
	fmt.Println()
	fmt.Println("| workload | broker | p50 | vs kfake-mem p50 + floor, back to back | vs kfake-mem p50 + floor, after a peer |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %v | %.2f× (%v) | %.2f× (%v) |\n", r.workload, r.broker, r.p50.Round(time.Microsecond),
			r.vsBackToBack, (r.base + f.backToBack).Round(time.Microsecond), r.vsPeer, (r.base + f.peer).Round(time.Microsecond))
	}
}
