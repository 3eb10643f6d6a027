// Package gcfloor keeps the Go collector from running while the heap is
// small: after each collection it sets the GC percentage so that the
// next one starts when the heap has grown by at least a floor of bytes
// above what the last one left live, or by GOGC's usual 100 % when that
// is more.
//
// A broker's live heap is small next to the bytes that pass through it:
// a fresh `sluice serve` holding a few MiB of live objects would collect
// every few MiB of request frames and new partitions' bytes, marking
// every partition's structures each time. With a floor of 64 MiB the
// heap may hold up to that much more garbage before a collection, and
// the collector runs a few times less often until the live heap passes
// 64 MiB, after which the percentage is GOGC's default again.
//
// Only a process's main package should start it (`sluice serve` does):
// the GC percentage is the whole process's, and a program embedding the
// broker keeps its own.
package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// active is set while a floor runs: the GC percentage is one per
// process, so a second Start (two brokers served by one process) leaves
// the first in charge.
var active atomic.Bool

// maxPercent bounds the percentage set (a nearly empty heap would ask
// for an unbounded one).
const maxPercent = 10000

// minHeap is the Go runtime's least heap goal at a GC percentage of 100:
// before the first collection there is no live heap to scale from.
const minHeap = 4 << 20

// Percent returns the GC percentage that starts the next collection once
// the heap has grown by floor bytes above live, or by base percent of
// live when that is more (base: the percentage without a floor).
func Percent(live, floor int64, base int) int {
	if live <= 0 {
		live = minHeap * int64(base) / 100 // the runtime's own goal then
		if live <= 0 {
			live = minHeap
		}
	}
	if floor <= 0 || live*int64(base)/100 >= floor {
		return base
	}
	p := int64(math.Ceil(float64(floor) * 100 / float64(live)))
	return int(min(p, maxPercent))
}

// Floor is a started floor (Start).
type Floor struct {
	floor int64
	base  int
	onGC  func(percent int) // after each retune; for tests

	mu      sync.Mutex
	stopped bool
	percent int
}

// Start sets the floor, in bytes, and keeps it after every collection
// until Stop. It changes nothing when the GOGC environment variable is
// set (its value is the user's choice), floor is not positive or another
// floor runs; it then returns nil, whose Stop does nothing.
func Start(floor int64, gogcEnv string) *Floor {
	return start(floor, gogcEnv, nil)
}

func start(floor int64, gogcEnv string, onGC func(int)) *Floor {
	if gogcEnv != "" || floor <= 0 || !active.CompareAndSwap(false, true) {
		return nil
	}
	base := percentNow()
	if base < 0 {
		active.Store(false)
		return nil // collection is off: nothing to raise
	}
	f := &Floor{floor: floor, base: base, onGC: onGC}
	f.retune(liveHeap())
	f.arm()
	return f
}

// Stop restores the percentage the floor found and stops retuning.
func (f *Floor) Stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	debug.SetGCPercent(f.base)
	active.Store(false)
}

// Percent returns the GC percentage set last.
func (f *Floor) Percent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.percent
}

// sentinel is allocated for each collection to find: its finalizer runs
// after the cycle that found it unreachable. It holds a pointer so that
// it is not a tiny allocation (which may share a block and never be
// finalized alone).
type sentinel struct{ f *Floor }

// arm allocates the next sentinel.
func (f *Floor) arm() {
	runtime.SetFinalizer(&sentinel{f: f}, func(s *sentinel) {
		if s.f.retune(liveHeap()) {
			s.f.arm()
		}
	})
}

// retune sets the percentage for live bytes left live by the last
// collection; it reports false once stopped.
func (f *Floor) retune(live int64) bool {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return false
	}
	p := Percent(live, f.floor, f.base)
	if p != f.percent {
		debug.SetGCPercent(p)
		f.percent = p
	}
	onGC := f.onGC
	f.mu.Unlock()
	if onGC != nil {
		onGC(p)
	}
	return true
}

// percentNow returns the runtime's GC percentage, without setting it.
func percentNow() int {
	return int(readUint64("/gc/gogc:percent"))
}

// liveHeap returns the heap bytes the last collection marked live (0
// before the first).
func liveHeap() int64 { return int64(readUint64("/gc/heap/live:bytes")) }

// readUint64 reads one runtime metric (0 if this runtime lacks it).
func readUint64(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
