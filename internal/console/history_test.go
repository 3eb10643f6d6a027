package console

import (
	"math"
	"testing"
	"time"

	"github.com/sluicedb/sluice/broker"
)

func TestHistoryRing(t *testing.T) {
	h := newHistory(3, time.Second)
	t0 := time.Unix(1000, 0)
	h.record(t0, map[string]float64{"a": 1})
	h.record(t0.Add(time.Second), map[string]float64{"a": 2, "b": 20})
	h.record(t0.Add(2*time.Second), map[string]float64{"b": 30})
	h.record(t0.Add(3*time.Second), map[string]float64{"a": 4, "b": 40}) // overwrites the first slot
	s := h.query([]string{"a", "b", "missing"}, nil, 10, nil)
	if len(s.Times) != 3 || s.Times[0] != t0.Add(time.Second).UnixMilli() || s.Times[2] != t0.Add(3*time.Second).UnixMilli() {
		t.Fatalf("times = %v", s.Times)
	}
	vals := func(name string) []float64 {
		var out []float64
		for _, v := range s.Series[name] {
			if v == nil {
				out = append(out, -1)
			} else {
				out = append(out, *v)
			}
		}
		return out
	}
	if got := vals("a"); len(got) != 3 || got[0] != 2 || got[1] != -1 || got[2] != 4 {
		t.Errorf("a = %v, want [2 gap 4]", got)
	}
	if got := vals("b"); len(got) != 3 || got[0] != 20 || got[1] != 30 || got[2] != 40 {
		t.Errorf("b = %v", got)
	}
	if _, ok := s.Series["missing"]; ok {
		t.Error("an unknown series was answered")
	}
	if v, ok := h.latest("b"); !ok || v != 40 {
		t.Errorf("latest(b) = %v, %v", v, ok)
	}
	if s := h.query(nil, []string{"a", "b"}, 1, nil); len(s.Series) != 1 {
		t.Errorf("limit 1 gave %d series", len(s.Series))
	}
	h.forget("b")
	if s := h.query(nil, []string{""}, 10, nil); len(s.Series) != 1 {
		t.Errorf("after forget: %v", keys(s.Series))
	}
}

func TestQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4, 8}
	snap := func(counts ...uint64) broker.Histogram {
		return broker.Histogram{Bounds: bounds, Counts: counts, Count: counts[len(counts)-1]}
	}
	then := snap(10, 10, 10, 10)
	cases := []struct {
		name string
		now  broker.Histogram
		q    float64
		want float64
		ok   bool
	}{
		{"nothing new", snap(10, 10, 10, 10), 0.5, 0, false},
		{"all in (2,4]", snap(10, 10, 20, 20), 0.5, 3, true}, // halfway through the bucket
		{"p99 in (4,8]", snap(10, 10, 20, 30), 0.99, 4 + 4*(19.8-10)/10, true},
		{"p50 in first bucket", snap(20, 20, 20, 20), 0.5, 0.5, true},
	}
	for _, c := range cases {
		got, ok := quantile(c.q, c.now, then)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: quantile = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if m, ok := mean(broker.Histogram{Count: 14, Sum: 50}, broker.Histogram{Count: 10, Sum: 30}); !ok || m != 5 {
		t.Errorf("mean = %v, %v", m, ok)
	}
}
