package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/topo"
)

// RaiseNeighbourLimitsEnv opts a run into raising the host's neighbour
// table limits when the topology needs more than they allow (see
// Options.RaiseNeighbourLimits).
const RaiseNeighbourLimitsEnv = "BIRDCAGE_RAISE_NEIGH_LIMITS"

// The kernel keeps one IPv4 (arp_cache) and one IPv6 (ndisc_cache)
// neighbour table for all network namespaces together, and its gc_thresh3
// (1024 by default) is host-wide. An emulated cluster puts every node's
// neighbours into that one table: an L2 full mesh of N nodes needs N(N-1)
// entries for its BGP sessions alone, so past ~32 nodes ARP fails ("neighbor
// table overflow"), TCP connects to peers go unanswered, and BGP sessions
// come up only as BIRD retries and entries age out. Measured here: a 40-node
// mesh converged in 40.6 s against 6.1 s at 30 nodes, and 4.8 s at 40 nodes
// with two route reflectors. A real cluster has a table per host and never
// sees this, so a run that overflows measures the emulator.
type neighbourFamily struct {
	name     string // "IPv4"
	sysctl   string // net.ipv4.neigh.default
	statFile string // /proc/net/stat/arp_cache
}

var neighbourFamilies = []neighbourFamily{
	{"IPv4", "net.ipv4.neigh.default", "/proc/net/stat/arp_cache"},
	{"IPv6", "net.ipv6.neigh.default", "/proc/net/stat/ndisc_cache"},
}

// checkNeighbourTables compares what the topology needs with the host's
// limits; over them it raises the limits for the run (opted in) or returns
// a warning for the log and the results.
func checkNeighbourTables(r *run.Run, t *topo.Topology, raise bool) (warnings []string, raised bool, err error) {
	v4, v6 := t.NeighbourEntries()
	for i, need := range []int{v4, v6} {
		f := neighbourFamilies[i]
		limit, err := readSysctlInt(f.sysctl + ".gc_thresh3")
		if err != nil || need <= limit {
			continue // no such family here, or room enough
		}
		if !raise {
			warnings = append(warnings, fmt.Sprintf(
				"topology %s needs about %d %s neighbour entries, more than the host-wide limit %s.gc_thresh3=%d that every namespace shares: expect ARP/ND failures and slow BGP sessions (figures would measure the emulator). Use route reflectors (generated:...,rr=2), fewer nodes, or %s=1 to raise the limit for this run",
				t.Name, need, f.name, f.sysctl, limit, RaiseNeighbourLimitsEnv))
			continue
		}
		// gc_thresh2 is the soft limit the garbage collector works to;
		// both get twice the need, so entries are not churned either.
		for _, k := range []string{"gc_thresh2", "gc_thresh3"} {
			if err := r.SetHostSysctl(f.sysctl+"."+k, strconv.Itoa(2*need)); err != nil {
				return warnings, raised, err
			}
		}
		raised = true
	}
	return warnings, raised, nil
}

func readSysctlInt(key string) (int, error) {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// neighbourTableFulls is the host's count of neighbour-table overflows, both
// families: the last column (table_fulls) of /proc/net/stat/{arp,ndisc}_cache,
// one hex row per CPU.
func neighbourTableFulls() uint64 {
	var total uint64
	for _, f := range neighbourFamilies {
		b, err := os.ReadFile(f.statFile)
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

// NeighbourTableOverflows is how often the host's shared neighbour table
// was full since the cluster started (any run's namespaces count: the table
// is shared). Non-zero means lost ARP/ND resolutions during the run.
func (c *Cluster) NeighbourTableOverflows() uint64 {
	return neighbourTableFulls() - c.neighFullsAtStart
}
