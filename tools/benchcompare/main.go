// Command benchcompare runs `sluice bench` workloads against Sluice and
// kfake, each broker in a process of its own started fresh for every run,
// interleaving the brokers and repeating each pairing, and prints a
// Markdown table of medians with each broker's own CPU time per record
// (utime+stime from /proc) and its peak memory.
//
//	go build -o bin/sluice ./cmd/sluice
//	go build -o bin/kfakeserver ./tools/kfakeserver
//	go run ./tools/benchcompare --sluice bin/sluice --kfake bin/kfakeserver --rounds 3
//
// Broker sluice is Sluice on its default configuration (console, metrics
// and schema registry on); sluice-bare is the same binary without them.
// --baseline adds a second Sluice binary (an earlier build) as brokers
// sluice-before and sluice-before-bare, interleaved with the others, and
// --brokers keeps only the named brokers (by default all but the bare
// ones). A run pays for what the run before it left (dirty
// pages written back, freed inodes), so a broker's slot in the round and
// the broker before it matter: the rounds follow a balanced Latin square,
// each broker running in every slot and after each of the others as
// often (see order). Before each run benchcompare syncs the
// filesystems and waits, up to 10 s, for a machine whose processors are
// idle (see settleMachine); the wait is printed with the run. With a
// one-caller synchronous workload it first measures the disk's
// fdatasync floor and prints each broker's p50 against it (floor.go;
// --floor=false skips it).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/bench"
)

// workload is one `sluice bench produce` invocation, or, when run is
// set, a measurement benchcompare makes itself with a franz-go client
// (see builtin.go).
type workload struct {
	name string
	args []string
	run  func(addr string, pid int) (bench.Result, error)
	// create: the result is one topic creation (Records partitions in
	// Elapsed, BrokerCPU for it), printed in a table of its own.
	create bool
}

var workloads = []workload{
	{name: "sync-64x100B", args: []string{"--sync", "--callers", "64", "--size", "100", "--records", "0", "--duration", "8s"}},
	{name: "sync-1x100B", args: []string{"--sync", "--callers", "1", "--size", "100", "--records", "0", "--duration", "8s"}},
	{name: "async-100B-1p", args: []string{"--callers", "4", "--size", "100", "--records", "3000000"}},
	{name: "async-100B-256p", args: []string{"--callers", "4", "--size", "100", "--records", "2000000", "--partitions", "256"}},
	{name: "async-100B-2000p", args: []string{"--callers", "4", "--size", "100", "--records", "2000000", "--partitions", "2000"}},
	{name: "async-16KiB-1p", args: []string{"--callers", "4", "--size", "16384", "--records", "40000"}},
	// The first 3,000 synchronous requests after a fresh start: the
	// table's max column is the slowest, the first writes included.
	{name: "sync-1x100B-fresh", args: []string{"--sync", "--callers", "1", "--size", "100", "--records", "3000"}},
	{name: "create-256p", run: createTopic(256), create: true},
	{name: "create-2000p", run: createTopic(2000), create: true},
	{name: "cold-sticky-256p", run: coldSticky(256, 300000, false)},
	{name: "cold-sticky-2000p", run: coldSticky(2000, 300000, false)},
	// The same on a broker that has served as many records first.
	{name: "cold-sticky-256p-served", run: coldSticky(256, 300000, true)},
	{name: "cold-sticky-2000p-served", run: coldSticky(2000, 300000, true)},
}

// brokerKind is how to start one broker in its own process.
type brokerKind struct {
	name  string
	start func(bin, dir string, port int) *exec.Cmd
}

func main() {
	sluiceBin := flag.String("sluice", "", "sluice binary (go build ./cmd/sluice)")
	kfakeBin := flag.String("kfake", "", "kfakeserver binary (go build ./tools/kfakeserver)")
	rounds := flag.Int("rounds", 3, "runs of each workload on each broker (interleaved)")
	only := flag.String("workloads", "", "comma-separated workload names (default all)")
	baseline := flag.String("baseline", "", "a second sluice binary (an earlier build), run as brokers sluice-before and sluice-before-bare beside --sluice")
	timeout := flag.Duration("timeout", 0, "passed to each `sluice bench` run as --timeout (0: its default); a loaded machine creates 2000 partitions slowly")
	floor := flag.Bool("floor", true, "with a one-caller synchronous workload (sync-1x*) and kfake-mem selected: first measure the disk's fdatasync floor where the runs' data directories are made, back to back and after a 100 µs peer, and print each broker's p50 against kfake-mem's p50 plus each floor")
	brokers := flag.String("brokers", "", "comma-separated broker names to run (default all but the -bare ones): sluice (its default configuration: console, metrics and schema registry on), sluice-bare (--http '' and no schema registry: the broker alone), sluice-before and sluice-before-bare (--baseline), kfake-mem, kfake-sync")
	flag.Parse()
	if *sluiceBin == "" || *kfakeBin == "" {
		fmt.Fprintln(os.Stderr, "benchcompare: --sluice and --kfake are required")
		os.Exit(2)
	}
	// serve starts a Sluice binary: its default configuration (console,
	// metrics and the schema registry on a free port instead of the
	// default 9644), or bare, without them (the broker alone).
	serve := func(bin, dir string, port int, bare bool) *exec.Cmd {
		listen := fmt.Sprintf("127.0.0.1:%d", port)
		if bare {
			cmd := exec.Command(bin, "serve", "--data", dir, "--listen", listen, "--http", "")
			cmd.Env = append(os.Environ(), "SLUICE_SCHEMA_REGISTRY=") // builds without a schema registry ignore the variable
			return cmd
		}
		hp, err := bench.FreePort()
		if err != nil {
			hp = port + 1
		}
		return exec.Command(bin, "serve", "--data", dir, "--listen", listen, "--http", fmt.Sprintf("127.0.0.1:%d", hp))
	}
	kinds := []brokerKind{
		{"sluice", func(_, dir string, port int) *exec.Cmd { return serve(*sluiceBin, dir, port, false) }},
		{"sluice-bare", func(_, dir string, port int) *exec.Cmd { return serve(*sluiceBin, dir, port, true) }},
		{"kfake-mem", func(_, _ string, port int) *exec.Cmd {
			return exec.Command(*kfakeBin, "--port", fmt.Sprint(port))
		}},
		{"kfake-sync", func(_, dir string, port int) *exec.Cmd {
			return exec.Command(*kfakeBin, "--port", fmt.Sprint(port), "--data-dir", dir, "--sync")
		}},
	}
	if *baseline != "" {
		kinds = append(kinds[:2], append([]brokerKind{
			{"sluice-before", func(_, dir string, port int) *exec.Cmd { return serve(*baseline, dir, port, false) }},
			{"sluice-before-bare", func(_, dir string, port int) *exec.Cmd { return serve(*baseline, dir, port, true) }},
		}, kinds[2:]...)...)
	}
	var keep []brokerKind
	for _, k := range kinds {
		if *brokers == "" && !strings.HasSuffix(k.name, "-bare") || slices.Contains(strings.Split(*brokers, ","), k.name) {
			keep = append(keep, k)
		}
	}
	kinds = keep
	sel := workloads
	if *only != "" {
		sel = nil
		for _, w := range workloads {
			if slices.Contains(strings.Split(*only, ","), w.name) {
				sel = append(sel, w)
			}
		}
	}
	var fl floors // fl.dir is set once measured
	if *floor && slices.ContainsFunc(sel, syncOne) && slices.ContainsFunc(kinds, func(k brokerKind) bool { return k.name == "kfake-mem" }) {
		settleMachine(10 * time.Second)
		var err error
		// Where runOne makes the runs' data directories.
		if fl, err = measureFloors(os.TempDir()); err != nil {
			fmt.Fprintf(os.Stderr, "benchcompare: floor: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "floor in %s: p50 back to back %v, after a %v peer %v\n", fl.dir, fl.backToBack, floorPeer, fl.peer)
	}
	results := map[string]map[string][]bench.Result{}
	defer removeLeftovers()
	for _, w := range sel {
		results[w.name] = map[string][]bench.Result{}
		for r := 0; r < *rounds; r++ {
			// A run pays for what the one before it left (dirty pages
			// being written back, freed inodes, a warm or cold CPU
			// cache): order varies the slot and the predecessor.
			for _, k := range order(kinds, r) {
				waited, quiet := settleMachine(10 * time.Second)
				res, err := runOne(*sluiceBin, k, w, *timeout)
				if err != nil {
					fmt.Fprintf(os.Stderr, "%s on %s: %v\n", w.name, k.name, err)
					continue
				}
				note := ""
				if !quiet {
					note = " (machine still busy after the wait)"
				}
				fmt.Fprintf(os.Stderr, "%s %s round %d: %.0f rec/s p50 %v cpu/rec %v, %d page faults, settled %v%s\n",
					w.name, k.name, r+1, res.RecordsPerSec(), res.Latency.P50, res.CPUPerRecord(), res.BrokerFaults, waited.Round(time.Millisecond), note)
				results[w.name][k.name] = append(results[w.name][k.name], res)
			}
		}
	}
	printTable(sel, kinds, results)
	if fl.dir != "" {
		printFloors(floorRows(sel, kinds, results, fl), fl)
	}
}

// order returns the brokers in the order round r runs them: row r of a
// balanced Latin square (Williams' design), so that over n rounds of n
// brokers each runs once in every slot and, for an even n, after each of
// the others once; for an odd n the rows of the second n rounds are the
// first n reversed, which takes 2n rounds to give the same balance (a
// plain rotation keeps every broker's predecessor).
func order(kinds []brokerKind, r int) []brokerKind {
	n := len(kinds)
	out := make([]brokerKind, n)
	for i := range out {
		// The first row: 0, 1, n-1, 2, n-2, ...; row r adds r.
		s := (i + 1) / 2
		if i%2 == 0 && i > 0 {
			s = n - i/2
		}
		out[i] = kinds[(s+r)%n]
	}
	if n%2 == 1 && (r/n)%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// leftovers are the runs' data directories, removed when benchcompare
// ends (runOne).
var leftovers []string

func removeLeftovers() {
	for _, d := range leftovers {
		os.RemoveAll(d)
	}
}

// runOne starts a fresh broker, runs the workload against it once and
// stops the broker.
func runOne(sluiceBin string, k brokerKind, w workload, timeout time.Duration) (bench.Result, error) {
	dir, err := os.MkdirTemp("", "benchcompare-")
	if err != nil {
		return bench.Result{}, err
	}
	// Removed at the end of the whole run, not now: on ext4 without a
	// journal, allocating an inode skips (and reads) every inode freed in
	// the last minute or so, so removing a run's thousands of partition
	// files would tax the next broker's file creation with the
	// harness's own deletions.
	leftovers = append(leftovers, dir)
	port, err := bench.FreePort()
	if err != nil {
		return bench.Result{}, err
	}
	cmd := k.start(sluiceBin, filepath.Join(dir, "data"), port)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return bench.Result{}, err
	}
	defer bench.StopProcess(cmd, 20*time.Second)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := bench.WaitListening(addr, 20*time.Second); err != nil {
		return bench.Result{}, err
	}
	if w.run != nil {
		return w.run(addr, cmd.Process.Pid)
	}
	args := append([]string{"bench", "produce", "-b", addr, "-t", "bench", "--json", "--interval", "0",
		"--broker-pid", fmt.Sprint(cmd.Process.Pid)}, w.args...)
	if timeout > 0 {
		args = append(args, "--timeout", timeout.String())
	}
	var out, stderr bytes.Buffer
	b := exec.Command(sluiceBin, args...)
	b.Stdout, b.Stderr = &out, &stderr
	if err := b.Run(); err != nil {
		return bench.Result{}, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var res bench.Result
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &res); err == nil {
			return res, nil
		}
	}
	return res, errors.New("no JSON summary in the output")
}

func median(rs []bench.Result, f func(bench.Result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

func printTable(sel []workload, kinds []brokerKind, results map[string]map[string][]bench.Result) {
	var creates []workload
	fmt.Println("| workload | broker | runs | rec/s (median) | vs kfake-mem | p50 | p99 | max | broker CPU/record | broker peak RSS | broker page faults |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, w := range sel {
		if w.create {
			creates = append(creates, w)
			continue
		}
		base := median(results[w.name]["kfake-mem"], bench.Result.RecordsPerSec)
		for _, k := range kinds {
			rs := results[w.name][k.name]
			if len(rs) == 0 {
				continue
			}
			rps := median(rs, bench.Result.RecordsPerSec)
			ratio := "-"
			if base > 0 {
				ratio = fmt.Sprintf("%.2f×", rps/base)
			}
			p50 := time.Duration(median(rs, func(r bench.Result) float64 { return float64(r.Latency.P50) }))
			p99 := time.Duration(median(rs, func(r bench.Result) float64 { return float64(r.Latency.P99) }))
			mx := time.Duration(median(rs, func(r bench.Result) float64 { return float64(r.Latency.Max) }))
			cpu := median(rs, func(r bench.Result) float64 { return float64(r.CPUPerRecord()) / 1e3 })
			rss := median(rs, func(r bench.Result) float64 { return float64(r.BrokerHWM) / (1 << 20) })
			faults := median(rs, func(r bench.Result) float64 { return float64(r.BrokerFaults) })
			fmt.Printf("| %s | %s | %d | %.0f | %s | %s | %s | %s | %.2f µs | %.0f MiB | %.0f |\n",
				w.name, k.name, len(rs), rps, ratio, p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond), cpu, rss, faults)
		}
	}
	if len(creates) == 0 {
		return
	}
	fmt.Println()
	fmt.Println("| workload | broker | runs | CreateTopics wall (median; range) | broker CPU (median) |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	for _, w := range creates {
		for _, k := range kinds {
			rs := results[w.name][k.name]
			if len(rs) == 0 {
				continue
			}
			wall := func(r bench.Result) float64 { return float64(r.Elapsed) }
			lo, hi := rs[0].Elapsed, rs[0].Elapsed
			for _, r := range rs {
				lo, hi = min(lo, r.Elapsed), max(hi, r.Elapsed)
			}
			cpu := time.Duration(median(rs, func(r bench.Result) float64 { return float64(r.BrokerCPU) }))
			fmt.Printf("| %s | %s | %d | %s (%s–%s) | %s |\n", w.name, k.name, len(rs),
				time.Duration(median(rs, wall)).Round(100*time.Microsecond), lo.Round(100*time.Microsecond), hi.Round(100*time.Microsecond), cpu.Round(time.Millisecond))
		}
	}
}
