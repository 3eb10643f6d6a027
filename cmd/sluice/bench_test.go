package main

import (
	"bytes"
	"encoding/json"
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
