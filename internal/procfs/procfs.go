// Package procfs reads the few process and host facts the harness reports
// from /proc: how much memory a process holds, how many packets the kernel
// dropped for want of backlog room, sysctls, and how often the host's shared
// neighbour tables were full.
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

// NeighbourFamily is one of the kernel's neighbour tables (one per family,
// shared by every network namespace).
type NeighbourFamily struct {
	Name     string // "IPv4"
	Sysctl   string // net.ipv4.neigh.default
	StatFile string // /proc/net/stat/arp_cache
}

// NeighbourFamilies are the IPv4 (ARP) and IPv6 (ND) tables.
var NeighbourFamilies = []NeighbourFamily{
	{"IPv4", "net.ipv4.neigh.default", "/proc/net/stat/arp_cache"},
	{"IPv6", "net.ipv6.neigh.default", "/proc/net/stat/ndisc_cache"},
}

// SysctlInt reads an integer sysctl (dotted key) from /proc/sys.
func SysctlInt(key string) (int, error) {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// NeighbourTableFulls is the host's count of neighbour-table overflows, both
// families: the last column (table_fulls) of /proc/net/stat/{arp,ndisc}_cache,
// one hex row per CPU.
func NeighbourTableFulls() uint64 {
	var total uint64
	for _, f := range NeighbourFamilies {
		b, err := os.ReadFile(f.StatFile)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) < 2 {
			continue
		}
		head := strings.Fields(lines[0])
		col := -1
		for i, h := range head {
			if h == "table_fulls" {
				col = i
			}
		}
		if col < 0 {
			continue
		}
		for _, l := range lines[1:] {
			fs := strings.Fields(l)
			if col < len(fs) {
				if v, err := strconv.ParseUint(fs[col], 16, 64); err == nil {
					total += v
				}
			}
		}
	}
	return total
}
