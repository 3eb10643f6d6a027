package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat. Linux exposes
// them in USER_HZ, which is 100 on every architecture it supports.
const userHZ = 100

// ProcUsage is what a process has used so far, read from /proc.
type ProcUsage struct {
	CPU     time.Duration // utime + stime
	RSS     int64         // resident set size now, bytes
	PeakRSS int64         // high-water mark of the resident set, bytes
	// Faults is the process's minor page faults so far: pages it touched
	// for the first time (or again after giving them back). Unlike CPU
	// time it does not move with the machine's load, so it shows a
	// change in memory use that CPU figures are too noisy to.
	Faults int64
}

// ReadProc reads the CPU time and memory of process pid from /proc.
func ReadProc(pid int) (ProcUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	cpu, faults, err := parseStat(stat)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	u := ProcUsage{CPU: cpu, Faults: faults}
	u.RSS = statusKB(status, "VmRSS:") << 10
	u.PeakRSS = statusKB(status, "VmHWM:") << 10
	return u, nil
}

// parseStat returns utime+stime and the minor faults (minflt) from the
// text of /proc/PID/stat. The command name (field 2) is in parentheses
// and may hold spaces, so the fields are counted from the last ')'.
func parseStat(stat []byte) (time.Duration, int64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); minflt is field 10, utime and stime
	// fields 14 and 15.
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	minflt, err := strconv.ParseInt(f[7], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("minflt: %w", err)
	}
	ut, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return time.Duration(ut+st) * (time.Second / userHZ), minflt, nil
}

// statusKB returns the value in kB of a "Key:   123 kB" line of
// /proc/PID/status, or 0 when the key is absent.
func statusKB(status []byte, key string) int64 {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
