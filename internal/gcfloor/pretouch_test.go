package gcfloor

import (
	"os"
	"runtime"
	"syscall"
	"testing"
)

// TestPretouchMapsTheFloorsPages: after Pretouch, filling half the
// floor with new objects takes a page fault for few of their pages: the
// pages were mapped by Pretouch and left free in the heap. Without it,
// each new page of a growing heap faults once.
func TestPretouchMapsTheFloorsPages(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory faults beside the heap's pages")
	}
	const floor = 64 << 20
	f := start(floor, "", nil)
	if f == nil {
		t.Fatal("no floor started with GOGC unset")
	}
	defer f.Stop()
	f.Pretouch()

	page := os.Getpagesize()
	const chunk, total = 256 << 10, floor / 2
	held := make([][]byte, 0, total/chunk)
	before := minorFaults(t)
	for range total / chunk {
		b := make([]byte, chunk)
		for i := 0; i < len(b); i += page {
			b[i] = 1
		}
		held = append(held, b)
	}
	faults := minorFaults(t) - before
	runtime.KeepAlive(held)
	pages := int64(total / page)
	t.Logf("%d page faults for %d new pages", faults, pages)
	if faults > pages/4 {
		t.Fatalf("%d page faults filling %d pages after Pretouch; want at most %d", faults, pages, pages/4)
	}
}

// TestPretouchNilFloor: a floor that did not start (GOGC set) touches
// nothing.
func TestPretouchNilFloor(t *testing.T) {
	var f *Floor
	f.Pretouch()
}

// minorFaults is the process's count of page faults served without I/O.
func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}
