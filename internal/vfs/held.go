package vfs

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Held calls (SyncHeld, WriteAtHeld) make their system call without the
// Go runtime's entry into a blocking one: the calling goroutine keeps its
// processor (P) while the call lasts. Entering a blocking system call
// costs more than the call on a quiet broker: the first one after the
// process idled wakes the runtime's monitor thread (sysmon), which then
// polls every 20 µs, a context switch each time, for as long as the
// process stays busy, and hands the processor of a call that lasts past
// a poll to another thread. A lone synchronous producer's request, whose
// every system call is held (with the connection's socket calls, which
// never block), wakes no other thread at all.
//
// Holding is bounded by holdGate: at most GOMAXPROCS−1 calls hold a
// processor at once, so one is always left for everything else, and none
// does for HoldCooloff after a held call took longer than HoldMaxWait (a
// disk stalling: a stop-the-world pause of the garbage collector waits
// for a held call to return). A call the gate refuses is made as the
// ordinary one; either way the call itself, and so durability, is the
// same.
const (
	// HoldMaxBytes is the largest write or sync callers hold for: the
	// small rounds of a latency-bound writer. Larger ones come from
	// throughput workloads, whose processors are worth more than the
	// hand-off saves.
	HoldMaxBytes = 16 << 10
	// HoldMaxWait: a held call slower than this stops holding for
	// HoldCooloff. It is well above what a busy machine makes of a
	// healthy disk's fdatasync (a few milliseconds; tens when other
	// processes keep both cores busy).
	HoldMaxWait = 100 * time.Millisecond
	HoldCooloff = 10 * time.Second
)

// holdGate admits held calls; see the constants above.
type holdGate struct {
	n     atomic.Int32 // held calls in progress
	after atomic.Int64 // no call holds before this (Unix ns): a recent slow one
}

var gate holdGate

// begin reports whether a call starting at now (Unix ns) may hold its
// processor, with max calls holding at most; if it may, end must follow.
func (g *holdGate) begin(now int64, max int32) bool {
	if max < 1 || now < g.after.Load() {
		return false
	}
	if g.n.Add(1) > max {
		g.n.Add(-1)
		return false
	}
	return true
}

// end closes a held call that began and ended at these times (Unix ns).
func (g *holdGate) end(began, ended int64) {
	g.n.Add(-1)
	if ended-began > int64(HoldMaxWait) {
		g.after.Store(ended + int64(HoldCooloff))
	}
}

// holdBegin admits a held call now; it returns the call's start for
// holdEnd, and false if the call is to be made the ordinary way.
func holdBegin() (int64, bool) {
	if !canHold {
		return 0, false
	}
	now := time.Now().UnixNano()
	return now, gate.begin(now, int32(runtime.GOMAXPROCS(0)-1))
}

func holdEnd(began int64) { gate.end(began, time.Now().UnixNano()) }

// HeldFile is a File that wraps another and passes held calls through
// to it (a write-behind tail, a file made on first need): SyncHeld and
// WriteAtHeld call these instead of the ordinary methods.
type HeldFile interface {
	File
	SyncHeld() (held bool, err error)
	WriteAtHeld(p []byte, off int64) (n int, held bool, err error)
}

// SyncHeld is f.Sync for a sync on the latency path whose caller waits
// for it anyway: for a file of the OS filesystem on Linux the fdatasync
// keeps the calling goroutine's processor when holdGate admits it (see
// the constants above); a HeldFile passes it on; other files sync as
// f.Sync does. It reports whether the call held its processor.
func SyncHeld(f File) (bool, error) {
	switch o := f.(type) {
	case osFile:
		began, ok := holdBegin()
		if !ok {
			return false, o.Sync()
		}
		err := datasyncHeld(o.f)
		holdEnd(began)
		return true, err
	case HeldFile:
		return o.SyncHeld()
	}
	return false, f.Sync()
}

// WriteAtHeld is f.WriteAt for a write on the latency path: a direct
// write that blocks until the device has the bytes (a file opened with
// DirectOpener), or a small write into the page cache just before a
// SyncHeld. For a file of the OS filesystem on Linux it keeps the calling
// goroutine's processor when holdGate admits it, as SyncHeld does; a
// HeldFile passes it on; other files write as f.WriteAt does. It reports
// whether the call held its processor.
func WriteAtHeld(f File, p []byte, off int64) (int, bool, error) {
	switch o := f.(type) {
	case osFile:
		began, ok := holdBegin()
		if !ok {
			n, err := o.WriteAt(p, off)
			return n, false, err
		}
		n, err := writeAtHeld(o.f, p, off)
		holdEnd(began)
		return n, true, err
	case HeldFile:
		return o.WriteAtHeld(p, off)
	}
	n, err := f.WriteAt(p, off)
	return n, false, err
}
