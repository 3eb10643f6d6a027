package broker

import (
	"path"
	"strconv"
	"strings"
)

// memoryLimit returns host (the machine's memory), or the memory limit of
// the process's cgroup and of every cgroup above it when one is lower:
// cgroup v2's memory.max along the path /proc/self/cgroup names, or
// cgroup v1's memory.limit_in_bytes. A container sees its own limit this
// way (its cgroup namespace makes its cgroup the root). read reads a
// file; what it cannot read or parse is ignored.
func memoryLimit(host int64, read func(string) ([]byte, error)) int64 {
	limit := host
	lower := func(b []byte) {
		v := strings.TrimSpace(string(b))
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 && (limit <= 0 || n < limit) {
			limit = n // "max" (v2) and v1's huge "unlimited" fail or lose
		}
	}
	if cg, err := read("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(cg), "\n") {
			// v2: "0::/path"; v1 memory controller: "N:memory:/path" (or
			// "N:...,memory,...:/path").
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				for p := path.Clean("/" + parts[2]); ; p = path.Dir(p) {
					if b, err := read(path.Join("/sys/fs/cgroup", p, "memory.max")); err == nil {
						lower(b)
					}
					if p == "/" {
						break
					}
				}
			case hasController(parts[1], "memory"):
				if b, err := read(path.Join("/sys/fs/cgroup/memory", path.Clean("/"+parts[2]), "memory.limit_in_bytes")); err == nil {
					lower(b)
				}
				if b, err := read("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
					lower(b) // a container's namespace root
				}
			}
		}
	}
	return limit
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
