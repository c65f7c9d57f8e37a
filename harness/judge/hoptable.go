package judge

// Which ToR plane each probe flow took, from the BPF hop counters on the
// nodes' uplinks: the dual-ToR specs judge multipath by this, and report it
// as a table.

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/report/results"
)

// HopPackets is a flow's packet count at one hop ("node-1/eth0 egress"),
// plain and inside IPIP.
func HopPackets(g report.GapReport, hop string) uint64 {
	for _, h := range g.Hops {
		if h.Hop == hop {
			return h.Packets + h.Inner
		}
	}
	return 0
}

// Fabric is what a hop table reads of a cluster (a *harness.Cluster's
// topology): its ToR planes, each node's uplink in a plane, and the node a
// workload address lives on.
type Fabric interface {
	Planes() []string
	// Uplink is node's interface in plane ("" when it has none there).
	Uplink(node, plane string) string
	// WorkloadNode is the node whose workload has a ("" when none).
	WorkloadNode(a netip.Addr) string
}

// uplinkHop is the hop name of node's uplink in plane, in direction dir.
func uplinkHop(f Fabric, node, plane, dir string) string {
	if u := f.Uplink(node, plane); u != "" {
		return node + "/" + u + " " + dir
	}
	return ""
}

// workloadNode is the node whose workload has the flow's address.
func workloadNode(f Fabric, g report.GapReport, dst bool) string {
	if dst {
		return f.WorkloadNode(g.DstAddr)
	}
	return f.WorkloadNode(g.SrcAddr)
}

// PlaneOfFlow is the plane a flow's packets left its source node by: a
// plane name, "both", or "" when none were counted.
func PlaneOfFlow(f Fabric, g report.GapReport) string {
	src := workloadNode(f, g, false)
	var used []string
	for _, p := range f.Planes() {
		if HopPackets(g, uplinkHop(f, src, p, "egress")) > 0 {
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
func FlowsPerPlane(f Fabric, rep *report.Report) map[string]int {
	out := map[string]int{}
	for _, g := range rep.Flows {
		out[PlaneOfFlow(f, g)]++
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

func hopOf(f Fabric, col HopColumn, node string) string {
	if col.Plane != "" {
		return uplinkHop(f, node, col.Plane, col.Direction)
	}
	return node + "/" + col.Interface + " " + col.Direction
}

// HopTable shows, per flow, its packets at the hops the columns name, what
// it received, and any send errors.
func HopTable(f Fabric, rep *report.Report, cols []HopColumn, extra ...func(report.GapReport) (title, value string)) string {
	head := []string{"flow"}
	for _, col := range cols {
		head = append(head, col.Title)
	}
	head = append(head, "received")
	for _, x := range extra {
		t, _ := x(report.GapReport{})
		head = append(head, t)
	}
	t := results.NewTable(append(head, "send errors")...).AlignRight()
	flows := slices.Clone(rep.Flows)
	sort.Slice(flows, func(i, j int) bool { return flows[i].Flow < flows[j].Flow })
	for _, g := range flows {
		src, dst := workloadNode(f, g, false), workloadNode(f, g, true)
		if src == "" || dst == "" {
			continue
		}
		row := []any{g.Flow}
		for _, col := range cols {
			node := src
			if col.Dst {
				node = dst
			}
			row = append(row, HopPackets(g, hopOf(f, col, node)))
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
func PlaneTable(f Fabric, rep *report.Report) string {
	planes := f.Planes()
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
	return HopTable(f, rep, cols, func(g report.GapReport) (string, string) { return "plane", PlaneOfFlow(f, g) })
}
