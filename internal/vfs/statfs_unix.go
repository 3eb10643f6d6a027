//go:build unix

package vfs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Usage reports statfs's available and total bytes for dir.
func (osFS) Usage(dir string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Usage{}, fmt.Errorf("vfs: statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize) // int64 on Linux, uint32 on some other systems
	return Usage{Free: uint64(st.Bavail) * bs, Total: uint64(st.Blocks) * bs}, nil
}
