package bench

import (
	"fmt"
	"io"
	"time"
)

// MemoryFloorResult is what touching memory new to the process costs:
// each page's first write faults it in, the kernel allocates and zeroes
// it, and on a virtual machine whose host reclaims the guest's free pages
// the host backs it again too. A broker pays it for every buffer a fresh
// process grows into, which is why a fresh broker's first burst costs
// more CPU per record than a warm one's.
type MemoryFloorResult struct {
	Bytes   int64         `json:"bytes"`
	Pages   int64         `json:"pages"`
	Elapsed time.Duration `json:"elapsed_ns"`
	CPU     time.Duration `json:"cpu_ns"` // this process's user and system time over the touches
}

// memoryPage is the stride of MemoryFloor's writes: one per page of the
// smallest size the kernel hands out.
const memoryPage = 4096

// MemoryFloor allocates n bytes the process has not used before and
// writes one byte per page, timing the writes and the process's CPU.
func MemoryFloor(n int64) (MemoryFloorResult, error) {
	if n < memoryPage {
		return MemoryFloorResult{}, fmt.Errorf("memory size %d: want at least %d bytes", n, memoryPage)
	}
	// A large allocation is made from memory fresh from the OS, which
	// the runtime does not clear (it is known to be zero): the writes
	// below are the first touch of each page.
	b := make([]byte, n)
	cpu0, err := processCPU()
	if err != nil {
		return MemoryFloorResult{}, err
	}
	start := time.Now()
	for i := 0; i < len(b); i += memoryPage {
		b[i] = 1
	}
	elapsed := time.Since(start)
	cpu1, err := processCPU()
	if err != nil {
		return MemoryFloorResult{}, err
	}
	return MemoryFloorResult{Bytes: n, Pages: (n + memoryPage - 1) / memoryPage, Elapsed: elapsed, CPU: cpu1 - cpu0}, nil
}

// WriteMemoryFloor prints a memory floor result in the style of
// WriteFloor.
func WriteMemoryFloor(w io.Writer, r MemoryFloorResult) {
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(r.Pages) }
	fmt.Fprintf(w, "new memory: %d MiB touched, one write per 4 KiB page, in %.3fs (%.2fµs per page), CPU %.3fs (%.2fµs per page)\n",
		r.Bytes>>20, r.Elapsed.Seconds(), per(r.Elapsed), r.CPU.Seconds(), per(r.CPU))
}
