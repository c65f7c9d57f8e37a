package harness

// What the judges in harness/judge read of a built cluster: the small
// interfaces they take (a node's routes, exports and workloads, the
// cluster's nodes and blocks, its fabric) implemented here, and the
// cluster-level forms of the handover, hop-table and flow-plan reads that
// scenarios call as methods. The judging itself is harness/judge's.

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/topo"
)

// NodeName is the node's name (the matchers' failure messages say it).
func (n *Node) NodeName() string { return n.Name }

// HasWorkloadAddr reports whether one of the node's workloads has a.
func (n *Node) HasWorkloadAddr(a netip.Addr) bool { return n.NS.HasWorkloadAddr(a) }

// ExportedRoutes is what n's BIRD exports to one of its protocols (a BGP
// session, kernel4, kernel6), with the kernel's refusals flagged.
func (n *Node) ExportedRoutes(ctx context.Context, protocol string) ([]bird.Route, error) {
	if n.Calico != nil {
		return n.Calico.BIRD().Routes(ctx, "export "+protocol)
	}
	return n.BIRD.Client().Routes(ctx, "export "+protocol)
}

// ExportedPrefixes is the prefixes of ExportedRoutes: what
// judge.BeExportedTo reads.
func (n *Node) ExportedPrefixes(ctx context.Context, protocol string) ([]netip.Prefix, error) {
	rs, err := n.ExportedRoutes(ctx, protocol)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Prefix)
	}
	return out, nil
}

// NodeNames lists the cluster's nodes in topology order.
func (c *Cluster) NodeNames() []string {
	out := make([]string, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n.Name)
	}
	return out
}

// NodeRoutes is all of a node's main-table routes (both families): what
// judge.HaveRemoteBlockRoutes reads, one dump per node.
func (c *Cluster) NodeRoutes(node string) ([]kroute.Route, error) {
	if n := c.lookup(node); n != nil {
		return n.Routes(netip.Prefix{})
	}
	return nil, fmt.Errorf("no node %q in topology %s", node, c.Net.Topology.Name)
}

var (
	_ judge.RouteSource      = (*Node)(nil)
	_ judge.ExportSource     = (*Node)(nil)
	_ judge.WorkloadHost     = (*Node)(nil)
	_ judge.BlockRouteSource = (*Cluster)(nil)
	_ judge.Fabric           = (*Fabric)(nil)
)

// Handovers reads, for every node and remote block, how the route moved
// from the protocol `from` to `to` (the new owner is toOwner) in
// [start, end], with confd's reconfigure and the programmer's restart
// after start.
func (m *Measure) Handovers(from, to kroute.Protocol, toOwner judge.Owner, start, end int64) judge.Handovers {
	var nodes []judge.HandoverNode
	for _, n := range m.c.Nodes() {
		hn := judge.HandoverNode{Name: n.Name, Timeline: m.c.Timeline(n.Name), Blocks: m.c.RemoteBlocks(n.Name)}
		for _, a := range n.ConfdActions() {
			if a.SeenMono >= start {
				hn.BIRDConfigured = a.ConfiguredMono
				break
			}
		}
		for _, r := range n.programmerRestarts() {
			if r.ExitMono >= start && r.ProgrammedMono != 0 {
				hn.Programmed = r.ProgrammedMono
				break
			}
		}
		nodes = append(nodes, hn)
	}
	return judge.ReadHandovers(nodes, judge.HandoverChange{From: from, To: to, ToBIRD: toOwner == judge.ByBIRD, Start: start, End: end, ScanTime: m.c.Timing().BIRDScanTime})
}

// ConfdReactMs is, over every node's confd reaction after start, the
// longest from the change reaching it to `birdc configure` returning, less
// the model's latency: what the harness's render and BIRD's configure took.
func (m *Measure) ConfdReactMs(start int64) float64 {
	var worst float64
	lat := m.c.Timing().ConfdLatency
	for _, n := range m.c.Nodes() {
		for _, a := range n.ConfdActions() {
			if a.SeenMono >= start {
				worst = max(worst, monoclock.Ms(a.ConfiguredMono-a.SeenMono-int64(lat)))
			}
		}
	}
	return worst
}

// PlanFlows is judge.PlanFlows over net's nodes with a workload.
func PlanFlows(net *topo.Network, focus []string, sample int, seed uint64) (judge.FlowPlan, error) {
	var nodes []judge.NodeEndpoint
	for _, nd := range net.Nodes {
		if len(nd.Workloads) > 0 {
			nodes = append(nodes, judge.NodeEndpoint{Node: nd.Name, Endpoint: Endpoint(nd.Workloads[0])})
		}
	}
	return judge.PlanFlows(nodes, focus, sample, seed)
}
