package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of a Chromium binary. Without one the test
// skips, except under CI=true, where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install chromium); CI must run the browser tests")
	}
	t.Skip("chromium is not installed (apt-get install chromium): skipping the browser tests")
	return ""
}

// browser drives one headless Chromium and collects the console errors
// and uncaught exceptions of the pages it loads.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	shot string // directory for screenshots

	mu   sync.Mutex // guards errs
	errs []string
}

func newBrowser(t *testing.T, base string) *browser {
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancel := chromedp.NewContext(actx)
	ctx, tcancel := context.WithTimeout(bctx, 3*time.Minute)
	b := &browser{t: t, ctx: ctx, base: base, shot: t.ArtifactDir()}
	// Subscribe before the first page loads; a goroutine drains the
	// messages until the context ends.
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errs = append(b.errs, m.String()+" at "+m.URL)
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		chromedp.Cancel(bctx) // closes the browser gracefully
		tcancel()
		cancel()
		acancel()
		<-done
	})
	return b
}

func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// open loads a page and waits until it has rendered.
func (b *browser) open(hash string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.base+"/"+hash), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`main[data-loaded=%q]`, hash))))
}

// wait waits until the JavaScript condition is true.
func (b *browser) wait(cond string) {
	b.t.Helper()
	b.run(chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(50*time.Millisecond)))
}

// text returns the rendered text of the element sel, read in one step
// (pages re-render on a timer, so a node found first may be gone when
// a second command asks for its text).
func (b *browser) text(sel string) string {
	b.t.Helper()
	b.wait(fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
	return eval[string](b, fmt.Sprintf(`document.querySelector(%q)?.innerText ?? ""`, sel))
}

func eval[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// screenshot saves the page as NAME.png in the test's artifact directory.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// noErrors fails the test if a page logged an error or shows text that
// only a rendering bug produces.
func (b *browser) noErrors(page string) {
	b.t.Helper()
	if bad := eval[string](b, `(document.querySelector('main').innerText.match(/\b(null|undefined|NaN)\b|\[object Object\]/) || [""])[0]`); bad != "" {
		b.t.Errorf("%s: the page shows %q", page, bad)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("%s: %s", page, e)
	}
	b.errs = nil
}

// offsets returns the offsets shown in the message browser.
func (b *browser) offsets() []int {
	b.t.Helper()
	return eval[[]int](b, `[...document.querySelectorAll('#mb-table tr[data-offset]')].map(r => Number(r.dataset.offset))`)
}

func wantRange(t *testing.T, got []int, from, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("browser shows offsets %v, want %d from %d", got, n, from)
	}
	for i, o := range got {
		if o != from+i {
			t.Fatalf("browser shows offsets %v, want %d from %d", got, n, from)
		}
	}
}

// chartsHavePoints is a condition: every chart on the page has drawn
// a uPlot canvas with at least one data point.
const chartsHavePoints = `(() => { const cs = [...document.querySelectorAll('.chart')];
  return cs.length > 0 && cs.every(c => c.querySelector('canvas') && Number(c.dataset.points) > 0); })()`

func TestConsoleInBrowser(t *testing.T) {
	e := newEnv(t, envOpt{})
	e.createTopic(t, "orders", 3)
	e.createTopic(t, "payments", 1)
	e.waitSamples(t, 1)
	e.produce(t, "orders", 0, 60)
	e.produce(t, "orders", 1, 5)
	e.produce(t, "payments", 0, 3)
	e.commit(t, "billing", "orders", map[int32]int64{0: 20, 1: 5})
	e.waitSamples(t, 2)

	b := newBrowser(t, e.url)

	t.Run("overview", func(t *testing.T) {
		b.t = t
		b.open("#/")
		b.wait(chartsHavePoints)
		cards := b.text("#overview-cards")
		for _, want := range []string{"2 / 4", "always", e.b.Info().DataDir} {
			if !strings.Contains(cards, want) {
				t.Errorf("overview cards lack %q: %s", want, cards)
			}
		}
		if n := eval[int](b, `document.querySelectorAll('.chart canvas').length`); n != 5 {
			t.Errorf("%d charts drawn, want 5", n)
		}
		b.screenshot("overview")
		b.noErrors("overview")
	})

	t.Run("topics", func(t *testing.T) {
		b.t = t
		b.open("#/topics")
		table := b.text("#topics-table")
		if !strings.Contains(table, "orders") || !strings.Contains(table, "payments") || !strings.Contains(table, "65") {
			t.Errorf("topics table: %s", table)
		}
		b.screenshot("topics")
		b.run(chromedp.SendKeys(chromedp.CSS("#topic-search"), "pay"))
		b.wait(`document.querySelectorAll('#topics-table tbody tr').length === 1`)
		if s := b.text("#topics-table tbody"); !strings.Contains(s, "payments") {
			t.Errorf("search for pay shows %s", s)
		}
		b.noErrors("topics")
	})

	t.Run("topic", func(t *testing.T) {
		b.t = t
		b.open("#/topics/orders")
		b.wait(`document.querySelectorAll('#mb-table tr[data-offset]').length === 20`)
		parts := b.text("#partitions")
		for _, want := range []string{"60", "5", "ok"} {
			if !strings.Contains(parts, want) {
				t.Errorf("partitions table lacks %q: %s", want, parts)
			}
		}
		if s := b.text("#configs"); !strings.Contains(s, "retention.ms") || !strings.Contains(s, "default") {
			t.Errorf("configs: %s", s)
		}
		wantRange(t, b.offsets(), 40, 20)
		if s := b.text("#mb-table"); !strings.Contains(s, "k59") || !strings.Contains(s, `{"i":59,"topic":"orders"}`) || !strings.Contains(s, "source=test") {
			t.Errorf("message browser rows lack key, value or header: %.300s", s)
		}
		b.wait(chartsHavePoints)
		b.screenshot("topic")

		// Page back through partition 0, then forward again.
		for _, from := range []int{20, 0} {
			b.run(chromedp.Click(chromedp.CSS("#mb-prev")))
			b.wait(fmt.Sprintf(`document.querySelector('#mb-table tr[data-offset]')?.dataset.offset === "%d"`, from))
			wantRange(t, b.offsets(), from, 20)
		}
		b.run(chromedp.Click(chromedp.CSS("#mb-next")))
		b.wait(`document.querySelector('#mb-table tr[data-offset]')?.dataset.offset === "20"`)
		wantRange(t, b.offsets(), 20, 20)

		// From an offset, with values as hex and as pretty JSON.
		b.run(chromedp.SetValue(chromedp.CSS("#mb-mode"), "offset"),
			chromedp.SetValue(chromedp.CSS("#mb-at"), "55"),
			chromedp.Click(chromedp.CSS("#mb-load")))
		b.wait(`document.querySelector('#mb-table tr[data-offset]')?.dataset.offset === "55"`)
		wantRange(t, b.offsets(), 55, 5)
		b.run(chromedp.SetValue(chromedp.CSS("#mb-format"), "hex"),
			chromedp.Evaluate[chromedp.Void](`document.getElementById('mb-format').dispatchEvent(new Event('change'))`))
		if s := b.text("#mb-table tbody"); !strings.Contains(s, "7b 22 69 22") { // {"i"
			t.Errorf("hex view: %.200s", s)
		}
		b.run(chromedp.SetValue(chromedp.CSS("#mb-format"), "json"),
			chromedp.Evaluate[chromedp.Void](`document.getElementById('mb-format').dispatchEvent(new Event('change'))`))
		if pretty := eval[string](b, `document.querySelectorAll('#mb-table pre.val')[1].textContent`); pretty != "{\n  \"i\": 55,\n  \"topic\": \"orders\"\n}" {
			t.Errorf("JSON view: %q", pretty)
		}
		b.screenshot("topic-browser")
		b.noErrors("topic")
	})

	t.Run("groups", func(t *testing.T) {
		b.t = t
		b.open("#/groups")
		if s := b.text("#groups-table"); !strings.Contains(s, "billing") || !strings.Contains(s, "Empty") || !strings.Contains(s, "40") {
			t.Errorf("groups table: %s", s)
		}
		b.screenshot("groups")
		b.noErrors("groups")
	})

	t.Run("group", func(t *testing.T) {
		b.t = t
		b.open("#/groups/billing")
		b.wait(chartsHavePoints)
		lags := eval[[]string](b, `[...document.querySelectorAll('#offsets-table tbody tr')].map(r => r.cells[1].textContent + ":" + r.cells[2].textContent + ":" + r.cells[4].textContent)`)
		if strings.Join(lags, " ") != "0:20:40 1:5:0" {
			t.Errorf("offsets table (partition:committed:lag) = %v", lags)
		}
		b.screenshot("group")
		b.noErrors("group")
	})
}

// TestSchemasInBrowser: with a schema registry, the Schemas page lists
// subjects with their type, latest version, id and compatibility; a
// subject's page shows each version's schema; the message browser shows
// Avro records decoded with their schema.
func TestSchemasInBrowser(t *testing.T) {
	e := newEnv(t, envOpt{schemas: true})
	e.createTopic(t, "orders", 1)
	id1 := e.registerSchema(t, "orders-value", orderV1)
	id2 := e.registerSchema(t, "orders-value", orderV2)
	e.produceAvro(t, "orders", id1, 5, orderV1)

	b := newBrowser(t, e.url)

	t.Run("schemas", func(t *testing.T) {
		b.t = t
		b.open("#/schemas")
		if nav := b.text("#nav"); !strings.Contains(nav, "Schemas") {
			t.Errorf("navigation lacks Schemas: %s", nav)
		}
		cells := eval[[]string](b, `[...document.querySelectorAll('#subjects-table tbody tr td')].map(c => c.textContent)`)
		if want := []string{"orders-value", "AVRO", "2", fmt.Sprint(id2), "BACKWARD"}; strings.Join(cells, "|") != strings.Join(want, "|") {
			t.Errorf("subjects table %v, want %v", cells, want)
		}
		if s := b.text("#global-compat"); !strings.Contains(s, "BACKWARD") {
			t.Errorf("global level: %s", s)
		}
		b.screenshot("schemas")
		b.noErrors("schemas")
	})

	t.Run("subject", func(t *testing.T) {
		b.t = t
		b.open("#/schemas/orders-value")
		b.wait(`document.querySelector('#schema-text').textContent.includes('"note"')`)
		if s := b.text("#schema-cards"); !strings.Contains(s, fmt.Sprint(id2)) || !strings.Contains(s, "BACKWARD") || !strings.Contains(s, "AVRO") {
			t.Errorf("subject cards: %s", s)
		}
		b.run(chromedp.SetValue(chromedp.CSS("#schema-version"), "1"),
			chromedp.Evaluate[chromedp.Void](`document.getElementById('schema-version').dispatchEvent(new Event('change'))`))
		b.wait(`!document.querySelector('#schema-text').textContent.includes('"note"')`)
		if s := b.text("#schema-text"); !strings.Contains(s, `"name": "Order"`) || !strings.Contains(s, `"qty"`) {
			t.Errorf("version 1 schema: %s", s)
		}
		b.screenshot("subject")
		b.noErrors("subject")
	})

	t.Run("decoded records", func(t *testing.T) {
		b.t = t
		b.open("#/topics/orders")
		b.wait(`document.querySelectorAll('#mb-table tr[data-offset]').length === 5`)
		s := b.text("#mb-table")
		if !strings.Contains(s, fmt.Sprintf("schema %d · AVRO", id1)) || !strings.Contains(s, `{"id":"o-4","qty":4}`) {
			t.Errorf("message browser does not show decoded records: %.400s", s)
		}
		b.run(chromedp.SetValue(chromedp.CSS("#mb-format"), "hex"),
			chromedp.Evaluate[chromedp.Void](`document.getElementById('mb-format').dispatchEvent(new Event('change'))`))
		if s := b.text("#mb-table tbody"); strings.Contains(s, "AVRO") || !strings.Contains(s, "00 00 00 00") {
			t.Errorf("hex view should show the raw bytes: %.300s", s)
		}
		b.screenshot("decoded-records")
		b.noErrors("decoded records")
	})
}
