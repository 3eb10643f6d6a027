package main

import (
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestServeGCHeapFloor checks the README's account of serve's garbage
// collector settings through the broker's own /metrics: with GOGC unset
// the percentage is raised for the small heap of a fresh broker
// (internal/gcfloor); with GOGC set, serve uses it as given.
func TestServeGCHeapFloor(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want func(p float64) bool
		says string
	}{
		{"GOGC unset", []string{"GOGC="}, func(p float64) bool { return p > 100 }, "above Go's default 100"},
		{"GOGC=150", []string{"GOGC=150"}, func(p float64) bool { return p == 150 }, "150, the user's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, httpAddr := freeAddr(t), freeAddr(t)
			cmd, stderr := startServeArgs(t, addr, append([]string{"SLUICE_HTTP=" + httpAddr}, tc.env...), "serve", "--data", t.TempDir(), "--listen", addr)
			defer stopServe(t, cmd, stderr)
			p := gogcPercent(t, "http://"+httpAddr+"/metrics")
			if !tc.want(p) {
				t.Fatalf("go_gc_gogc_percent is %v, want %s", p, tc.says)
			}
		})
	}
}

func TestGCHeapFloorSize(t *testing.T) {
	for _, tc := range []struct{ limit, want int64 }{
		{math.MaxInt64, 64 << 20}, // no GOMEMLIMIT
		{1 << 30, 64 << 20},
		{128 << 20, 32 << 20}, // a quarter of a small limit
	} {
		if got := gcHeapFloor(tc.limit); got != tc.want {
			t.Errorf("gcHeapFloor(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

var gogcLine = regexp.MustCompile(`(?m)^go_gc_gogc_percent (\S+)$`)

// gogcPercent reads go_gc_gogc_percent from a serve's /metrics once the
// HTTP server answers.
func gogcPercent(t *testing.T, url string) float64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				m := gogcLine.FindSubmatch(body)
				if m == nil {
					t.Fatalf("no go_gc_gogc_percent in %s", url)
				}
				p, err := strconv.ParseFloat(string(m[1]), 64)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
