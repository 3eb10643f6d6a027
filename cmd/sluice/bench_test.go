package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sluice/broker/brokertest"
	"sluice/internal/bench"
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

	cmd := newBenchCmd()
	cmd.SetArgs([]string{"produce", "-b", b.Addr(), "--acks", "some"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--acks") {
		t.Fatalf("bad --acks: %v", err)
	}
}
