//go:build !linux

package broker

// physicalMemory is the machine's memory in bytes (0: unknown).
func physicalMemory() int64 { return 0 }
