//go:build unix

package broker

import "golang.org/x/sys/unix"

// diskSpace returns the size of the filesystem holding dir and the bytes
// an unprivileged writer may still use on it.
func diskSpace(dir string) (total, free uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Blocks) * uint64(st.Bsize), uint64(st.Bavail) * uint64(st.Bsize), nil
}
