package console

import (
	"testing"
)

// axisOverlaps is a condition's value: for every drawn chart, the pairs
// of neighbouring time-axis labels that overlap, as "chart: a|b".
const axisOverlaps = `(() => {
  const bad = [];
  const ctx = document.createElement('canvas').getContext('2d');
  for (const c of document.querySelectorAll('.chart')) {
    const u = c._chart;
    if (!u) continue;
    const ax = u.axes[0];
    const vals = ax._values || [], splits = ax._splits || [];
    ctx.font = Array.isArray(ax.font) ? ax.font[0] : ax.font;
    const ratio = window.devicePixelRatio || 1;
    let prevRight = -Infinity, prev = "";
    splits.forEach((s, i) => {
      const label = String(vals[i] ?? "");
      if (label === "") return;
      const w = Math.max(...label.split("\n").map((l) => ctx.measureText(l).width)) / ratio;
      const x = u.valToPos(s, "x");
      if (x - w / 2 < prevRight + 4) bad.push(c.dataset.chart + ": " + prev + "|" + label);
      prevRight = x + w / 2;
      prev = label;
    });
  }
  return bad;
})()`

// TestChartTimeLabelsDoNotOverlap fills a few minutes of history and
// checks that no two labels of a chart's time axis overlap.
func TestChartTimeLabelsDoNotOverlap(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "orders", 1)
	e.produce(t, "orders", 0, 10)
	e.waitSamples(t, 3)
	b := newBrowser(t, e.url)
	b.open("#/")
	b.wait(chartsHavePoints)
	b.wait(`[...document.querySelectorAll('.chart')].every((c) => c._chart && (c._chart.axes[0]._splits || []).length > 1)`)
	if bad := eval[[]string](b, axisOverlaps); len(bad) > 0 {
		b.screenshot("axis-overlap")
		t.Fatalf("time-axis labels overlap: %v", bad)
	}
	b.noErrors("overview")
}
