package gcfloor

import (
	"os"
	"runtime"
)

// Pretouch faults in, once at start, the heap that the floor lets the
// process grow into before a collection, and gives it back to the Go heap
// free: the first requests after a start then allocate their frames and
// their new partitions' structures in pages the kernel has already given
// the process, instead of taking a page fault for each new 4 KiB on the
// request path (on a virtual machine a fault can cost more than the work
// it interrupts). It costs the floor's bytes of resident memory and the
// page faults, here rather than later; a process whose first traffic
// would never need that much heap pays them for nothing. The runtime
// keeps the free pages until a later collection finds the heap smaller
// (at the latest its periodic one, two minutes on), after which its
// scavenger returns what is unused to the kernel, as it does any free
// memory. Call it before serving. A nil Floor does nothing.
func (f *Floor) Pretouch() {
	if f == nil {
		return
	}
	touch(f.floor)
}

// touch allocates n bytes, writes one byte of each page, drops them and
// collects, so that their pages are free in the heap and already mapped.
// It allocates them in chunks, as a broker's frames and structures are,
// so that they take the heap's lowest free pages, which later
// allocations take first, including free pages the runtime has returned
// to the kernel since they were last used.
func touch(n int64) {
	const chunk = 256 << 10
	page := os.Getpagesize()
	held := make([][]byte, 0, n/chunk+1)
	for left := n; left > 0; left -= chunk {
		b := make([]byte, min(left, chunk))
		for i := 0; i < len(b); i += page {
			b[i] = 1
		}
		held = append(held, b)
	}
	runtime.KeepAlive(held)
	runtime.GC() // sweeps too: the pages are free when it returns
}
