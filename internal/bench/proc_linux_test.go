package bench

import (
	"os"
	"syscall"
	"testing"
)

// TestReadProcFaults: touching 4 MiB of memory freshly mapped faults its
// pages in, and ReadProc counts them (two faults if the kernel backs them
// with huge pages).
func TestReadProcFaults(t *testing.T) {
	b, err := syscall.Mmap(-1, 0, 4<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	before, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	after, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Faults - before.Faults; got < 2 {
		t.Fatalf("%d page faults for 4 MiB of new memory", got)
	}
}
