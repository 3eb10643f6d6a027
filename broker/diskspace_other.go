//go:build !unix

package broker

// diskSpace is not measured on this platform.
func diskSpace(string) (total, usable int64) { return -1, -1 }
