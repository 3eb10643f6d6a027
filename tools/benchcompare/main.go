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
// --baseline adds a second Sluice binary (an earlier build) as broker
// sluice-before, interleaved with the others, and --brokers keeps only
// the named brokers. On a disk where consecutive heavy runs alternate in
// speed, a broker's slot in the round matters: swap the binaries and
// run again before reading a difference into a before/after pair.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluicedb/sluice/internal/bench"
)

// workload is one `sluice bench produce` invocation.
type workload struct {
	name string
	args []string
}

var workloads = []workload{
	{"sync-64x100B", []string{"--sync", "--callers", "64", "--size", "100", "--records", "0", "--duration", "8s"}},
	{"sync-1x100B", []string{"--sync", "--callers", "1", "--size", "100", "--records", "0", "--duration", "8s"}},
	{"async-100B-1p", []string{"--callers", "4", "--size", "100", "--records", "3000000"}},
	{"async-100B-256p", []string{"--callers", "4", "--size", "100", "--records", "2000000", "--partitions", "256"}},
	{"async-100B-2000p", []string{"--callers", "4", "--size", "100", "--records", "2000000", "--partitions", "2000"}},
	{"async-16KiB-1p", []string{"--callers", "4", "--size", "16384", "--records", "40000"}},
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
	baseline := flag.String("baseline", "", "a second sluice binary (an earlier build), run as broker sluice-before beside --sluice")
	timeout := flag.Duration("timeout", 0, "passed to each `sluice bench` run as --timeout (0: its default); a loaded machine creates 2000 partitions slowly")
	brokers := flag.String("brokers", "", "comma-separated broker names to run (default all): sluice, sluice-before, kfake-mem, kfake-sync")
	flag.Parse()
	if *sluiceBin == "" || *kfakeBin == "" {
		fmt.Fprintln(os.Stderr, "benchcompare: --sluice and --kfake are required")
		os.Exit(2)
	}
	kinds := []brokerKind{
		{"sluice", func(_, dir string, port int) *exec.Cmd {
			return exec.Command(*sluiceBin, "serve", "--data", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--fsync", "always", "--http", "") // no console: measure the broker alone
		}},
		{"kfake-mem", func(_, _ string, port int) *exec.Cmd {
			return exec.Command(*kfakeBin, "--port", fmt.Sprint(port))
		}},
		{"kfake-sync", func(_, dir string, port int) *exec.Cmd {
			return exec.Command(*kfakeBin, "--port", fmt.Sprint(port), "--data-dir", dir, "--sync")
		}},
	}
	if *baseline != "" {
		kinds = append(kinds[:1], append([]brokerKind{{"sluice-before", func(_, dir string, port int) *exec.Cmd {
			return exec.Command(*baseline, "serve", "--data", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--fsync", "always", "--http", "")
		}}}, kinds[1:]...)...)
	}
	if *brokers != "" {
		var keep []brokerKind
		for _, k := range kinds {
			if slices.Contains(strings.Split(*brokers, ","), k.name) {
				keep = append(keep, k)
			}
		}
		kinds = keep
	}
	sel := workloads
	if *only != "" {
		sel = nil
		for _, w := range workloads {
			if slices.Contains(strings.Split(*only, ","), w.name) {
				sel = append(sel, w)
			}
		}
	}
	results := map[string]map[string][]bench.Result{}
	for _, w := range sel {
		results[w.name] = map[string][]bench.Result{}
		for r := 0; r < *rounds; r++ {
			for _, k := range kinds {
				res, err := runOne(*sluiceBin, k, w, *timeout)
				if err != nil {
					fmt.Fprintf(os.Stderr, "%s on %s: %v\n", w.name, k.name, err)
					continue
				}
				fmt.Fprintf(os.Stderr, "%s %s round %d: %.0f rec/s p50 %v cpu/rec %v\n",
					w.name, k.name, r+1, res.RecordsPerSec(), res.Latency.P50, res.CPUPerRecord())
				results[w.name][k.name] = append(results[w.name][k.name], res)
			}
		}
	}
	printTable(sel, kinds, results)
}

// runOne starts a fresh broker, runs the workload against it once and
// stops the broker.
func runOne(sluiceBin string, k brokerKind, w workload, timeout time.Duration) (bench.Result, error) {
	dir, err := os.MkdirTemp("", "benchcompare-")
	if err != nil {
		return bench.Result{}, err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return bench.Result{}, err
	}
	cmd := k.start(sluiceBin, filepath.Join(dir, "data"), port)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return bench.Result{}, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitListening(addr, 20*time.Second); err != nil {
		return bench.Result{}, err
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

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitListening(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker not listening on %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	fmt.Println("| workload | broker | runs | rec/s (median) | vs kfake-mem | p50 | p99 | broker CPU/record | broker peak RSS |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, w := range sel {
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
			cpu := median(rs, func(r bench.Result) float64 { return float64(r.CPUPerRecord()) / 1e3 })
			rss := median(rs, func(r bench.Result) float64 { return float64(r.BrokerHWM) / (1 << 20) })
			fmt.Printf("| %s | %s | %d | %.0f | %s | %s | %s | %.2f µs | %.0f MiB |\n",
				w.name, k.name, len(rs), rps, ratio, p50.Round(time.Microsecond), p99.Round(time.Microsecond), cpu, rss)
		}
	}
}
