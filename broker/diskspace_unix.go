//go:build unix

package broker

import "golang.org/x/sys/unix"

// diskSpace returns the total and available bytes of the filesystem
// holding dir, or -1, -1.
func diskSpace(dir string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize)
}
