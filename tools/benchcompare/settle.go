package main

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// settleMachine syncs the filesystems, so that the dirty pages a run
// left are written back before the next run rather than during it, and
// then waits until the machine's processors were busy less than a tenth
// of a window of 100 ms (other processes, the kernel's writeback), for
// at most limit. It returns how long it took and whether the machine was
// found quiet; without /proc/stat it only syncs.
func settleMachine(limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	syscall.Sync()
	last, err := readCPUTicks()
	if err != nil {
		return time.Since(start), true
	}
	for time.Since(start) < limit {
		time.Sleep(100 * time.Millisecond)
		now, err := readCPUTicks()
		if err != nil {
			return time.Since(start), true
		}
		if quiet(last, now) {
			return time.Since(start), true
		}
		last = now
	}
	return time.Since(start), false
}

// cpuTicks is the machine's time in clock ticks from /proc/stat's cpu
// line, busy (user, nice, system, irq, softirq, steal) and total.
type cpuTicks struct{ busy, total uint64 }

// quiet reports whether the processors were busy less than a tenth of
// the time between a and b.
func quiet(a, b cpuTicks) bool {
	total := b.total - a.total
	return total > 0 && 10*(b.busy-a.busy) < total
}

func readCPUTicks() (cpuTicks, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTicks{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTicks{}, errors.New("/proc/stat: empty")
	}
	return parseCPULine(sc.Text())
}

// parseCPULine reads /proc/stat's aggregate line: "cpu user nice system
// idle iowait irq softirq steal ...".
func parseCPULine(line string) (cpuTicks, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}, errors.New("/proc/stat: no aggregate cpu line")
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return cpuTicks{}, err
		}
		v[i] = n
	}
	t := cpuTicks{busy: v[0] + v[1] + v[2] + v[5] + v[6] + v[7]}
	for _, n := range v {
		t.total += n
	}
	return t, nil
}
