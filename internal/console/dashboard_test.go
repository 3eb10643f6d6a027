package console

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestGrafanaDashboardUsesRealMetrics checks that every series the
// Grafana dashboard in docs/ queries is exported by a broker with
// topics, traffic and a group, so the dashboard cannot drift from the
// metric names.
func TestGrafanaDashboardUsesRealMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			ID      int
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpt{})
	e.createTopic(t, "orders", 2)
	e.produce(t, "orders", 0, 3)
	e.commit(t, "g", "orders", map[int32]int64{0: 1})
	fams := scrape(t, e)
	name := regexp.MustCompile(`\bsluice_[a-z_]+`)
	ids := map[int]bool{}
	used := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				used++
				base := m
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(m, suf); ok && fams[b] != nil {
						base = b
					}
				}
				if fams[base] == nil {
					t.Errorf("panel %q queries %s, which /metrics does not export", p.Title, m)
				}
			}
		}
	}
	if used < 20 {
		t.Fatalf("only %d metric references found", used)
	}
}
