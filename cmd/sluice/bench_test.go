package main

import (
	"bytes"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/broker/brokertest"
	"github.com/sluicedb/sluice/internal/bench"
)

// TestBenchCommand runs the README's bench commands against an embedded
// broker and checks their JSON summaries.
func TestBenchCommand(t *testing.T) {
	b := brokertest.Start(t)
	run := func(args ...string) bench.Result {
		t.Helper()
		cmd := newBenchCmd()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append(args, "-b", b.Addr(), "--json"))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v (%s)", args, err, errOut.String())
		}
		var res bench.Result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("%v: %v in %q", args, err, out.String())
		}
		return res
	}
	p := run("produce", "-t", "b", "--records", "500", "--size", "64", "--partitions", "4", "--callers", "8", "--sync", "--compression", "zstd")
	if p.Records != 500 || p.Bytes != 500*64 || p.Latency.P99 <= 0 {
		t.Fatalf("produce: %+v", p)
	}
	c := run("consume", "-t", "b")
	if c.Records != 500 || c.Bytes != 500*64 {
		t.Fatalf("consume: %+v", c)
	}

	// --duration alone runs for a time, not for the default 100000
	// records (at 100 records/s those would take 1000 s).
	if d := run("produce", "-t", "d", "--duration", "100ms", "--rate", "100"); d.Records <= 0 || d.Records >= 100000 {
		t.Fatalf("produce --duration: %d records", d.Records)
	}

	cmd := newBenchCmd()
	cmd.SetArgs([]string{"consume", "-b", b.Addr(), "-t", "nope"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || err.Error() != `bench consume: topic "nope" does not exist (bench produce -t nope fills it)` {
		t.Fatalf("bench consume of a missing topic: %v", err)
	}

	cmd = newBenchCmd()
	cmd.SetArgs([]string{"produce", "-b", b.Addr(), "--acks", "some"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--acks") {
		t.Fatalf("bad --acks: %v", err)
	}
}

// TestBenchRunLength checks how --records and --duration bound a run.
func TestBenchRunLength(t *testing.T) {
	for _, c := range []struct {
		args     []string
		records  int64
		duration time.Duration
		err      string
	}{
		{nil, 100000, 0, ""},
		{[]string{"--records", "5"}, 5, 0, ""},
		{[]string{"--duration", "10s"}, 0, 10 * time.Second, ""},
		{[]string{"--records", "0", "--duration", "1s"}, 0, time.Second, ""},
		{[]string{"--records", "5", "--duration", "1s"}, 0, 0, "not both"},
		{[]string{"--records", "0"}, 0, 0, "needs a --duration"},
		{[]string{"--records", "-1"}, 0, 0, "want 0 or more"},
	} {
		cmd := newBenchProduceCmd()
		if err := cmd.Flags().Parse(c.args); err != nil {
			t.Fatal(err)
		}
		var cfg bench.ProduceConfig
		cfg.Records, _ = cmd.Flags().GetInt64("records")
		cfg.Duration, _ = cmd.Flags().GetDuration("duration")
		err := runLength(cmd.Flags(), &cfg)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one saying %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || cfg.Records != c.records || cfg.Duration != c.duration {
			t.Errorf("%q: records %d, duration %v, error %v; want %d, %v", c.args, cfg.Records, cfg.Duration, err, c.records, c.duration)
		}
	}
}

// TestBenchFloorREADME runs the README's bench floor commands (a data
// directory of the test's own in place of ./sluice-data, fewer writes and
// records) and checks their JSON results; then bench floor's refusals.
func TestBenchFloorREADME(t *testing.T) {
	var lines []string
	for _, block := range fencedBlocks(t, "sh") {
		for _, line := range strings.Split(block, "\n") {
			if strings.Contains(line, "bench floor") || strings.Contains(line, "--floor") {
				lines = append(lines, line)
			}
		}
	}
	if len(lines) < 2 {
		t.Fatalf("README shows %d bench floor commands, want one of bench floor and one of bench produce --floor", len(lines))
	}
	dir := t.TempDir()
	addr := brokertest.Start(t).Addr()
	for _, line := range lines {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		args, ok := strings.CutPrefix(strings.TrimSpace(line), "./sluice bench ")
		if !ok {
			t.Fatalf("README line %q does not start with ./sluice bench", line)
		}
		argv := strings.Fields(strings.ReplaceAll(args, "./sluice-data", dir))
		var out, errOut bytes.Buffer
		cmd := newBenchCmd()
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		if argv[0] == "floor" {
			argv = append(argv, "--ops", "100", "--json")
		} else {
			argv = append(argv, "-b", addr, "--records", "200", "--json")
		}
		cmd.SetArgs(argv)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v (%s)", argv, err, errOut.String())
		}
		var floor *bench.FloorResult
		if argv[0] == "floor" {
			floor = new(bench.FloorResult)
			if err := json.Unmarshal(out.Bytes(), floor); err != nil {
				t.Fatalf("%v: %v in %q", argv, err, out.String())
			}
		} else {
			var res bench.Result
			if err := json.Unmarshal(out.Bytes(), &res); err != nil {
				t.Fatalf("%v: %v in %q", argv, err, out.String())
			}
			if res.Records != 200 || res.Latency.P50 <= 0 || res.Floor == nil {
				t.Fatalf("%v: %+v", argv, res)
			}
			floor = res.Floor
		}
		if floor.Dir != dir || floor.Ops <= 0 || floor.Latency.P50 <= 0 || floor.Latency.P99 < floor.Latency.P50 || floor.Latency.Max < floor.Latency.P99 ||
			runtime.GOOS == "linux" && floor.CPU <= 0 {
			t.Fatalf("%v: floor %+v", argv, floor)
		}
		if strings.Contains(line, "--partitions") {
			files := floor.Files
			if files == nil || files.Partitions < 1 || files.Bytes != 16384 || files.Elapsed <= 0 || files.Dir != dir {
				t.Fatalf("%v: files floor %+v", argv, files)
			}
			left, err := os.ReadDir(dir)
			if err != nil || len(left) != 0 {
				t.Fatalf("%v: scratch files left behind: %v %v", argv, left, err)
			}
		} else if floor.Files != nil {
			t.Fatalf("%v: a files floor without --partitions", argv)
		}
		if strings.Contains(line, "--memory") {
			mem := floor.Memory
			if mem == nil || mem.Bytes != 64<<20 || mem.Pages != 64<<8 || mem.Elapsed <= 0 || runtime.GOOS == "linux" && mem.CPU <= 0 {
				t.Fatalf("%v: memory floor %+v", argv, mem)
			}
		} else if floor.Memory != nil {
			t.Fatalf("%v: a memory floor without --memory", argv)
		}
		if strings.Contains(line, "--segments") {
			seg := floor.Segments
			if seg == nil || seg.Bytes != 64<<20 || seg.Files != bench.SegmentsFloorFiles || seg.Elapsed <= 0 || runtime.GOOS == "linux" && seg.CPUPerMiB() <= 0 {
				t.Fatalf("%v: segments floor %+v", argv, seg)
			}
			left, err := os.ReadDir(dir)
			if err != nil || len(left) != 0 {
				t.Fatalf("%v: scratch files left behind: %v %v", argv, left, err)
			}
		} else if floor.Segments != nil {
			t.Fatalf("%v: a segments floor without --segments", argv)
		}
		if strings.Contains(line, "peer 100us") != (floor.Peer == 100*time.Microsecond) {
			t.Fatalf("%v: peer %v", argv, floor.Peer)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"floor", "--data", dir, "--ops", "5", "--duration", "1s"}, "not both"},
		{[]string{"floor", "--data", dir, "--ops", "0"}, "--ops 0"},
		{[]string{"floor", "--data", dir, "--size", "0"}, "--size 0"},
		{[]string{"floor", "--data", dir, "--ops", "5", "--partitions", "-1"}, "--partitions -1"},
		{[]string{"floor", "--data", dir, "--ops", "5", "--memory", "-1"}, "--memory -1"},
		{[]string{"floor", "--data", dir, "--ops", "5", "--segments", "-1"}, "--segments -1"},
		{[]string{"floor", "--data", dir, "--ops", "5", "--peer", "-1ms"}, "--peer -1ms"},
		{[]string{"produce", "-b", addr, "--floor", dir, "--floor-peer", "-1ms"}, "--floor-peer -1ms"},
		{[]string{"floor", "--data", dir + "/missing"}, "no such file or directory"},
	} {
		cmd := newBenchCmd()
		cmd.SetArgs(c.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
}
