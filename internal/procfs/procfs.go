// Package procfs reads the few process facts the harness reports from
// /proc: how much memory a process holds, and how many packets the kernel
// dropped for want of backlog room.
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSS is the process's resident set size in bytes (VmRSS in
// /proc/PID/status).
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS in /proc/%d/status", pid, pid)
}

// SoftnetDropped is how many packets the kernel has dropped, over every
// CPU, because a per-CPU input backlog was full (net.core.netdev_max_backlog):
// the second column of /proc/net/softnet_stat, summed. The count is of the
// caller's network namespace's kernel, which is the machine's (the file is
// not per namespace).
func SoftnetDropped() (int64, error) {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0, err
	}
	return parseSoftnetDropped(string(b))
}

func parseSoftnetDropped(s string) (int64, error) {
	var total int64
	for i, l := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			return 0, fmt.Errorf("/proc/net/softnet_stat line %d: %d columns, want at least 2", i+1, len(f))
		}
		v, err := strconv.ParseInt(f[1], 16, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/net/softnet_stat line %d: dropped %q: %w", i+1, f[1], err)
		}
		total += v
	}
	return total, nil
}
