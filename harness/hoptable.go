package harness

// Which ToR plane each probe flow took, from the BPF hop counters on the
// nodes' uplinks: the dual-ToR specs judge multipath by this, and report it
// as a table.

import (
	"fmt"
	"slices"
	"sort"

	"github.com/birdcage/birdcage/harness/probe"
)

// HopPackets is a flow's packet count at one hop ("node-1/eth0 egress"),
// plain and inside IPIP.
func HopPackets(g probe.GapReport, hop string) uint64 {
	for _, h := range g.Hops {
		if h.Hop == hop {
			return h.Packets + h.Inner
		}
	}
	return 0
}

// uplinkHop is the hop name of node's uplink in plane, in direction dir.
func (c *Cluster) uplinkHop(node, plane, dir string) string {
	for _, u := range c.Net.Topology.Uplinks(node) {
		if u.Plane == plane {
			return node + "/" + u.Interface + " " + dir
		}
	}
	return ""
}

// workloadNode is the node whose workload has the flow's address.
func (c *Cluster) workloadNode(g probe.GapReport, dst bool) string {
	a := g.SrcAddr
	if dst {
		a = g.DstAddr
	}
	if nd := c.Net.NodeOfWorkloadAddr(a); nd != nil {
		return nd.Name
	}
	return ""
}

// PlaneOfFlow is the plane a flow's packets left its source node by: a
// plane name, "both", or "" when none were counted.
func (c *Cluster) PlaneOfFlow(g probe.GapReport) string {
	src := c.workloadNode(g, false)
	var used []string
	for _, p := range c.Net.Topology.Planes() {
		if HopPackets(g, c.uplinkHop(src, p, "egress")) > 0 {
			used = append(used, p)
		}
	}
	switch len(used) {
	case 0:
		return ""
	case 1:
		return used[0]
	}
	return "both"
}

// FlowsPerPlane counts a report's flows by the plane they left by.
func (c *Cluster) FlowsPerPlane(rep *probe.Report) map[string]int {
	out := map[string]int{}
	for _, g := range rep.Flows {
		out[c.PlaneOfFlow(g)]++
	}
	return out
}

// HopColumn is one column of a hop table: a flow's packets at one
// interface of its source node (Dst false) or its destination's, in one
// direction ("egress", "ingress"). With Plane set, the interface is that
// node's uplink in the plane.
type HopColumn struct {
	Title     string
	Dst       bool
	Interface string
	Plane     string
	Direction string
}

func (c *Cluster) hopOf(col HopColumn, node string) string {
	if col.Plane != "" {
		return c.uplinkHop(node, col.Plane, col.Direction)
	}
	return node + "/" + col.Interface + " " + col.Direction
}

// HopTable shows, per flow, its packets at the hops the columns name, what
// it received, and any send errors.
func (c *Cluster) HopTable(rep *probe.Report, cols []HopColumn, extra ...func(probe.GapReport) (title, value string)) string {
	head := []string{"flow"}
	for _, col := range cols {
		head = append(head, col.Title)
	}
	head = append(head, "received")
	for _, x := range extra {
		t, _ := x(probe.GapReport{})
		head = append(head, t)
	}
	t := NewTable(append(head, "send errors")...).AlignRight()
	flows := slices.Clone(rep.Flows)
	sort.Slice(flows, func(i, j int) bool { return flows[i].Flow < flows[j].Flow })
	for _, g := range flows {
		src, dst := c.workloadNode(g, false), c.workloadNode(g, true)
		if src == "" || dst == "" {
			continue
		}
		row := []any{g.Flow}
		for _, col := range cols {
			node := src
			if col.Dst {
				node = dst
			}
			row = append(row, HopPackets(g, c.hopOf(col, node)))
		}
		row = append(row, g.Received)
		for _, x := range extra {
			_, v := x(g)
			row = append(row, v)
		}
		errs := "-"
		if len(g.SendErrors) > 0 {
			errs = fmt.Sprint(g.SendErrors)
		}
		t.Add(append(row, errs)...)
	}
	return t.String()
}

// PlaneTable is the hop table of a dual-ToR cluster: per flow, its packets
// at the source's uplink of each plane (egress) and the destination's
// (ingress), and the plane it left by.
func (c *Cluster) PlaneTable(rep *probe.Report) string {
	planes := c.Net.Topology.Planes()
	var cols []HopColumn
	for _, dst := range []bool{false, true} {
		for _, p := range planes {
			col := HopColumn{Title: "out plane " + p, Plane: p, Direction: "egress"}
			if dst {
				col = HopColumn{Title: "in plane " + p, Plane: p, Dst: true, Direction: "ingress"}
			}
			cols = append(cols, col)
		}
	}
	return c.HopTable(rep, cols, func(g probe.GapReport) (string, string) { return "plane", c.PlaneOfFlow(g) })
}
