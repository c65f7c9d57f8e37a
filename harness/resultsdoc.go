package harness

import (
	"fmt"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"

	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// CurrentRunEnv describes where this process runs, on machine m.
func CurrentRunEnv(m machine.Profile, build string) *results.RunEnv {
	e := &results.RunEnv{Where: m.Where(), VMAccel: m.Accel, ProbeRate: m.Rate(), TimeoutScale: m.Scale(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Tunnel: topo.ChosenTunnel(), Build: results.CurrentBuild(build)}
	// BIRD prints its version on stderr: "BIRD version 2.0.12".
	if out, err := exec.Command("bird", "--version").CombinedOutput(); err == nil || len(out) > 0 {
		e.BIRDVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "BIRD version ")
	}
	return e
}

// maxRouteEventsPerNode bounds a scenario's route events in the results.
const maxRouteEventsPerNode = 4000

// clusterRouteEvents is every node's route timeline restricted to the
// main-table routes inside the topology's pools (the cluster routes a
// handover is about), for the report's swimlanes. Bounded per node; a node
// with more events keeps the first ones and says so in notes.
func (c *Cluster) clusterRouteEvents() (map[string][]event.Event, []string) {
	var pools []netip.Prefix
	for _, p := range c.Net.Topology.Pools {
		if pf, err := netip.ParsePrefix(p.CIDR); err == nil {
			pools = append(pools, pf.Masked())
		}
	}
	in := func(d netip.Prefix) bool {
		for _, p := range pools {
			if p.Bits() <= d.Bits() && p.Contains(d.Addr()) {
				return true
			}
		}
		return false
	}
	out := map[string][]event.Event{}
	var notes []string
	for _, n := range c.nodes {
		m := c.Timeline(n.Name)
		if m == nil {
			continue
		}
		var evs []event.Event
		total := 0
		for _, e := range m.Events() {
			if e.Route.Table != kroute.MainTable || !in(e.Route.Dst) {
				continue
			}
			total++
			if len(evs) < maxRouteEventsPerNode {
				evs = append(evs, e)
			}
		}
		if total > len(evs) {
			notes = append(notes, fmt.Sprintf("route events of %s: the first %d of %d kept in the results", n.Name, len(evs), total))
		}
		if len(evs) > 0 {
			out[n.Name] = evs
		}
	}
	return out, notes
}
