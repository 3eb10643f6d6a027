package broker

import (
	"os"
	"syscall"
)

// physicalMemory is the memory the broker may use in bytes (0: unknown):
// the machine's, or less when the process's cgroup (a container) is
// limited to less.
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return memoryLimit(int64(si.Totalram)*int64(si.Unit), os.ReadFile)
}
