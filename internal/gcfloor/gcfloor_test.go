package gcfloor

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor int64
		base, want  int
	}{
		{0, 64 * mib, 100, 1600},      // before the first collection: the runtime's 4 MiB goal, raised to 64
		{8 * mib, 64 * mib, 100, 800}, // next collection at 72 MiB
		{6 * mib, 64 * mib, 100, 1067},
		{64 * mib, 64 * mib, 100, 100}, // GOGC's own growth is the floor's
		{100 * mib, 64 * mib, 100, 100},
		{40 * mib, 64 * mib, 200, 200}, // 80 MiB of growth at 200 %: more than the floor
		{1 << 10, 64 * mib, 100, maxPercent},
		{8 * mib, 0, 100, 100}, // no floor
	} {
		if got := Percent(tc.live, tc.floor, tc.base); got != tc.want {
			t.Errorf("Percent(live %d, floor %d, base %d) = %d, want %d", tc.live, tc.floor, tc.base, got, tc.want)
		}
	}
}

// TestFloorRetunesAfterEachCollection: a started floor raises the GC
// percentage for this test's small heap at once and again after a
// collection, to what Percent gives for the heap left live; Stop puts
// back the percentage it found and ends the retuning.
func TestFloorRetunesAfterEachCollection(t *testing.T) {
	const floor = 256 << 20
	base := percentNow()
	tuned := make(chan int, 16)
	f := start(floor, "", func(p int) {
		select {
		case tuned <- p:
		default:
		}
	})
	if f == nil {
		t.Fatal("no floor started with GOGC unset")
	}
	defer f.Stop()
	if g := Start(floor, ""); g != nil {
		g.Stop()
		t.Fatal("a second floor started beside the first")
	}
	<-tuned // Start's own retune
	if got := percentNow(); got <= base || got != f.Percent() {
		t.Fatalf("after Start the GC percentage is %d (the floor set %d); want above %d for a heap this small", got, f.Percent(), base)
	}
	runtime.GC()
	select {
	case p := <-tuned:
		want := Percent(liveHeap(), floor, base)
		if p != want || percentNow() != want {
			t.Fatalf("after a collection the floor set %d (the runtime has %d); want %d for %d live bytes", p, percentNow(), want, liveHeap())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no retune after a collection")
	}
	f.Stop()
	if got := percentNow(); got != base {
		t.Fatalf("after Stop the GC percentage is %d, want the %d found", got, base)
	}
	if f.retune(liveHeap()) {
		t.Fatal("a stopped floor retuned")
	}
}

// TestFloorLeavesGOGC: with GOGC set, or no floor, nothing changes.
func TestFloorLeavesGOGC(t *testing.T) {
	before := percentNow()
	for _, tc := range []struct {
		floor int64
		env   string
	}{{64 << 20, "200"}, {64 << 20, "off"}, {0, ""}} {
		f := Start(tc.floor, tc.env)
		if f != nil {
			f.Stop()
			t.Fatalf("Start(%d, GOGC=%q) started a floor", tc.floor, tc.env)
		}
		f.Stop() // a nil floor's Stop does nothing
		if got := percentNow(); got != before {
			t.Fatalf("Start(%d, GOGC=%q) changed the GC percentage from %d to %d", tc.floor, tc.env, before, got)
		}
	}
}
