package harness

import (
	"fmt"
	"strconv"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/procfs"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/topo"
)

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

// checkNeighbourTables compares what the topology needs with the host's
// limits; over them it raises the limits for the run (opted in) or returns
// a warning for the log and the results.
func checkNeighbourTables(r *run.Run, t *topo.Topology, raise bool) (warnings []string, raised bool, err error) {
	v4, v6 := t.NeighbourEntries()
	for i, need := range []int{v4, v6} {
		f := procfs.NeighbourFamilies[i]
		limit, err := procfs.SysctlInt(f.Sysctl + ".gc_thresh3")
		if err != nil || need <= limit {
			continue // no such family here, or room enough
		}
		if !raise {
			warnings = append(warnings, fmt.Sprintf(
				"topology %s needs about %d %s neighbour entries, more than the host-wide limit %s.gc_thresh3=%d that every namespace shares: expect ARP/ND failures and slow BGP sessions (figures would measure the emulator). Use route reflectors (generated:...,rr=2), fewer nodes, or %s=1 to raise the limit for this run",
				t.Name, need, f.Name, f.Sysctl, limit, env.RaiseNeighLimits))
			continue
		}
		// gc_thresh2 is the soft limit the garbage collector works to;
		// both get twice the need, so entries are not churned either.
		for _, k := range []string{"gc_thresh2", "gc_thresh3"} {
			if err := r.SetHostSysctl(f.Sysctl+"."+k, strconv.Itoa(2*need)); err != nil {
				return warnings, raised, err
			}
		}
		raised = true
	}
	return warnings, raised, nil
}

// NeighbourTableOverflows is how often the host's shared neighbour table
// was full since the cluster started (any run's namespaces count: the table
// is shared). Non-zero means lost ARP/ND resolutions during the run.
func (m *Measure) NeighbourTableOverflows() uint64 {
	return procfs.NeighbourTableFulls() - m.c.neighFullsAtStart
}
