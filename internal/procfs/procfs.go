// Package procfs reads the few process facts the harness reports from
// /proc: how much memory a process holds.
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
