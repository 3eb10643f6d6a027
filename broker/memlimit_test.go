package broker

import (
	"os"
	"testing"
)

// TestMemoryLimit: the memory sizing defaults (queued request bytes,
// new partitions' bytes in memory) follow a cgroup's limit when it is
// below the machine's memory, along the cgroup's path for v2 and for v1,
// and ignore "max", v1's unlimited value and what cannot be read.
func TestMemoryLimit(t *testing.T) {
	const host = 16 << 30
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, os.ErrNotExist
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"no cgroup", nil, host},
		{"v2 unlimited", map[string]string{"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "max\n"}, host},
		{"v2 container", map[string]string{"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "536870912\n"}, 512 << 20},
		{"v2 limit above the process's cgroup", map[string]string{
			"/proc/self/cgroup": "0::/system.slice/sluice.service\n",
			"/sys/fs/cgroup/system.slice/sluice.service/memory.max": "max\n",
			"/sys/fs/cgroup/system.slice/memory.max":                "1073741824\n",
		}, 1 << 30},
		{"v2 the lowest along the path", map[string]string{
			"/proc/self/cgroup":             "0::/a/b\n",
			"/sys/fs/cgroup/a/b/memory.max": "268435456\n",
			"/sys/fs/cgroup/a/memory.max":   "1073741824\n",
		}, 256 << 20},
		{"limit above the machine", map[string]string{"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "68719476736\n"}, host},
		{"v1 limited", map[string]string{
			"/proc/self/cgroup": "12:cpu,cpuacct:/x\n9:memory:/docker/abc\n",
			"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "2147483648\n",
		}, 2 << 30},
		{"v1 unlimited", map[string]string{
			"/proc/self/cgroup":                           "9:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, host},
		{"garbage", map[string]string{"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "lots\n"}, host},
	} {
		if got := memoryLimit(host, files(tc.files)); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := memoryLimit(0, files(map[string]string{"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "1048576"})); got != 1<<20 {
		t.Errorf("machine memory unknown, cgroup limited: %d", got)
	}
}

// TestPendingBudgetFollowsMemory: new partitions keep at most 64 MiB in
// memory, a 32nd of a smaller machine's or container's memory.
func TestPendingBudgetFollowsMemory(t *testing.T) {
	for _, tc := range []struct{ mem, want int64 }{
		{0, 64 << 20}, {24 << 30, 64 << 20}, {2 << 30, 64 << 20}, {512 << 20, 16 << 20}, {16 << 20, 1 << 20},
	} {
		if got := pendingBudgetFor(tc.mem); got != tc.want {
			t.Errorf("memory %d: budget %d, want %d", tc.mem, got, tc.want)
		}
	}
}
