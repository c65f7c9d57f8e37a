package encap

// Did a probe session's IPIP flows cross the underlay encapsulated? Routes
// alone cannot say: a tunl0 that sends packets on un-encapsulated (the
// emulation's negative control, topo.TunnelEBPFNoEncap) still delivers them
// between nodes on one L2 segment, so a spec that judges routes, or even
// delivery, passes on it. The hop counters (bpf/counter.c, on every node's
// underlay interfaces) already tell the two apart: a packet inside an outer
// protocol-4 header is counted as an inner flow, a bare one as the flow
// itself, and the outer header as a node-to-node flow of protocol 4.
//
// The check reads only the topology and the probe report. It is a package
// of its own, not part of harness/judge, because it reads the topology
// (topo, and through it netlink), which the judge's readers do without.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// ErrNotEncapsulated is wrapped by CheckIPIP when an IPIP flow
// was seen bare on the underlay, or inside no outer header between its two
// nodes.
var ErrNotEncapsulated = errors.New("IPIP not encapsulated on the underlay")

// ErrNoEvidence is wrapped by CheckIPIP when there was
// nothing to judge: no flow between workloads on different nodes of an IPIP
// pool, no hop counters, or no packet counted.
var ErrNoEvidence = errors.New("no IPIP evidence to judge")

// Row is what the underlay counted for one judged flow.
type Row struct {
	Flow     string
	Src, Dst string // the nodes
	// ViaTunnel is the flow's packets at its source node's tunl0 egress
	// (what the node routed into the tunnel; shown, not judged: a packet
	// the tunnel drops is no leak). InnerOut and BareOut are its packets
	// at the source node's underlay egress, inside IPIP and bare; BareIn
	// its bare packets at the destination node's underlay ingress.
	ViaTunnel, InnerOut, BareOut, BareIn uint64
	// Outer is the protocol-4 packets from the source node's address to
	// the destination's at the source's underlay egress (every flow of
	// that node pair together).
	Outer uint64
}

// Evidence is what CheckIPIP judged.
type Evidence struct {
	Tunnel string // the network's tunl0 (topo.TunnelKernel, ...)
	Rows   []Row
	// Inner and Bare total the judged flows' InnerOut and BareOut+BareIn.
	Inner, Bare uint64
}

// Table is the evidence per flow, for a spec's report.
func (e Evidence) Table() string {
	t := results.NewTable("flow", "into tunl0", "inside IPIP out", "bare out", "bare in", "proto 4 node to node").AlignRight()
	for _, r := range e.Rows {
		t.Add(r.Flow, r.ViaTunnel, r.InnerOut, r.BareOut, r.BareIn, r.Outer)
	}
	return t.String()
}

// Layout is where a session's flows ran, as much as the check needs: the
// nodes (their underlay interfaces, own addresses, subnets and workloads)
// and the pools with their IPIP modes. NetworkLayout reads it from a built
// topology; a lab builds its own (harness/lab).
type Layout struct {
	Tunnel string // how tunl0 is made (topo.TunnelKernel, ...); "" none
	Nodes  []*Node
	Pools  []Pool
}

// Pool is an IP pool and its ipipMode: Calico's IPPool values (Always,
// CrossSubnet, Never), which topo and the datastore spell alike.
type Pool struct {
	CIDR     netip.Prefix
	IPIPMode string
}

// Node is one node of a Layout.
type Node struct {
	Name      string
	Underlays []string       // its underlay interfaces (tunl0 is not one)
	Addrs     []netip.Addr   // its own address first, then its interfaces'
	Subnets   []netip.Prefix // its interfaces' subnets (CrossSubnet)
	Workloads []netip.Addr
}

// Encapsulates says whether traffic from src to the workload address a on
// dst goes inside IPIP: a is IPv4 and its pool is IPIP Always, or
// CrossSubnet and dst's own address is on none of src's subnets.
func (l Layout) Encapsulates(src, dst *Node, a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	for _, p := range l.Pools {
		if !p.CIDR.Contains(a) {
			continue
		}
		switch p.IPIPMode {
		case topo.IPIPAlways:
			return true
		case topo.IPIPCrossSubnet:
			return !slices.ContainsFunc(src.Subnets, func(sn netip.Prefix) bool { return sn.Contains(dst.Addrs[0]) })
		}
		return false
	}
	return false
}

func (l Layout) nodeOf(a netip.Addr) *Node {
	for _, n := range l.Nodes {
		if slices.Contains(n.Workloads, a) {
			return n
		}
	}
	return nil
}

func (l Layout) node(name string) *Node {
	for _, n := range l.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// NetworkLayout is a built topology's layout.
func NetworkLayout(net *topo.Network) Layout {
	l := Layout{Tunnel: net.Tunnel}
	for _, p := range net.Topology.Pools {
		if cidr, err := netip.ParsePrefix(p.CIDR); err == nil {
			l.Pools = append(l.Pools, Pool{CIDR: cidr, IPIPMode: p.IPIPMode})
		}
	}
	for _, nd := range net.Nodes {
		n := &Node{Name: nd.Name, Addrs: []netip.Addr{nd.Address.Addr()}}
		for _, ifc := range nd.Spec.Interfaces {
			n.Underlays = append(n.Underlays, ifc.Name)
			if p, err := netip.ParsePrefix(ifc.Address); err == nil {
				n.Subnets = append(n.Subnets, p.Masked())
				if !slices.Contains(n.Addrs, p.Addr()) {
					n.Addrs = append(n.Addrs, p.Addr())
				}
			}
		}
		for _, w := range nd.Workloads {
			for _, a := range []netip.Addr{w.IPv4, w.IPv6} {
				if a.IsValid() {
					n.Workloads = append(n.Workloads, a)
				}
			}
		}
		l.Nodes = append(l.Nodes, n)
	}
	return l
}

// CheckIPIP is Check on a built topology's layout.
func CheckIPIP(net *topo.Network, rep *probe.Report) (Evidence, error) {
	return Check(NetworkLayout(net), rep)
}

// Check judges every flow of rep between workloads on different nodes
// that l says goes inside IPIP: at the source node's underlay egress its
// packets were counted inside IPIP and never bare, no bare one reached the
// destination node's underlay ingress, and the source counted at least as
// many protocol-4 packets from its own addresses to the destination node's
// as the flows between them sent inside IPIP. An error wrapping
// ErrNotEncapsulated names each flow and what was seen; one wrapping
// ErrNoEvidence says why nothing could be judged.
func Check(l Layout, rep *probe.Report) (Evidence, error) {
	ev := Evidence{Tunnel: l.Tunnel}
	if rep == nil {
		return ev, fmt.Errorf("%w: no probe report", ErrNoEvidence)
	}
	var problems, empty []string
	inner := map[[2]string]uint64{} // per (source, destination) node
	for _, g := range rep.Flows {
		src, dst := l.nodeOf(g.SrcAddr), l.nodeOf(g.DstAddr)
		if src == nil || dst == nil || src == dst || !l.Encapsulates(src, dst, g.DstAddr) {
			continue
		}
		out, okOut := underlayCount(g, src, "egress")
		in, okIn := underlayCount(g, dst, "ingress")
		if !okOut || !okIn {
			return ev, fmt.Errorf("%w: flow %s: no hop counters on %s's or %s's underlay interfaces (a session started with NoHops?)",
				ErrNoEvidence, g.Flow, src.Name, dst.Name)
		}
		row := Row{Flow: g.Flow, Src: src.Name, Dst: dst.Name, ViaTunnel: judge.HopPackets(g, src.Name+"/"+topo.TunnelDevice+" egress"),
			InnerOut: out.Inner, BareOut: out.Packets, BareIn: in.Packets}
		ev.Rows = append(ev.Rows, row)
		ev.Inner += out.Inner
		ev.Bare += out.Packets + in.Packets
		inner[[2]string{src.Name, dst.Name}] += out.Inner
		what := fmt.Sprintf("%s (%s→%s)", g.Flow, g.SrcAddr, g.DstAddr)
		switch {
		case out.Packets > 0 || in.Packets > 0:
			problems = append(problems, fmt.Sprintf("%s: bare, not inside IPIP: %d packets at %s's underlay egress, %d at %s's underlay ingress (%d inside IPIP; %d into tunl0)",
				what, out.Packets, src.Name, in.Packets, dst.Name, out.Inner, row.ViaTunnel))
		case out.Inner == 0:
			empty = append(empty, fmt.Sprintf("%s: no packet counted at %s's underlay egress, inside IPIP or bare (sent %d)", what, src.Name, g.Sent))
		}
	}
	if len(ev.Rows) == 0 {
		return ev, fmt.Errorf("%w: none of the report's %d flows is between workloads on different nodes of an IPIP pool", ErrNoEvidence, len(rep.Flows))
	}
	for i, r := range ev.Rows {
		pair := [2]string{r.Src, r.Dst}
		src, dst := l.node(r.Src), l.node(r.Dst)
		outer, seen := outerCount(rep, src, dst)
		ev.Rows[i].Outer = outer
		if want := inner[pair]; want > outer && want > 0 {
			problems = append(problems, fmt.Sprintf("%s→%s: %d packets inside IPIP at %s's underlay egress but %d protocol-4 packets from %s to %s there (outer flows seen: %s)",
				r.Src, r.Dst, want, r.Src, outer, src.Addrs, dst.Addrs[0], seen))
			inner[pair] = 0 // said once per node pair
		}
	}
	if len(problems) > 0 {
		return ev, fmt.Errorf("%w (tunl0: %s; %d IPIP flows judged):\n  %s",
			ErrNotEncapsulated, tunnelName(l.Tunnel), len(ev.Rows), strings.Join(append(problems, empty...), "\n  "))
	}
	if len(empty) > 0 {
		return ev, fmt.Errorf("%w (tunl0: %s; %d IPIP flows judged):\n  %s",
			ErrNoEvidence, tunnelName(l.Tunnel), len(ev.Rows), strings.Join(empty, "\n  "))
	}
	return ev, nil
}

func tunnelName(t string) string {
	if t == "" {
		return "none"
	}
	return t
}

// underlayCount sums a flow's counts at nd's underlay interfaces in one
// direction; ok is false when the report has none of those hops.
func underlayCount(g probe.GapReport, nd *Node, dir string) (c probe.HopCount, ok bool) {
	for _, ifn := range nd.Underlays {
		name := nd.Name + "/" + ifn + " " + dir
		for _, h := range g.Hops {
			if h.Hop == name {
				ok = true
				c.Packets += h.Packets
				c.Inner += h.Inner
			}
		}
	}
	return c, ok
}

// outerCount sums the protocol-4 packets from any of src's addresses to
// dst's at src's underlay egress, and lists every outer flow counted there
// (for the message). An outer header's source is the address the kernel
// picks for the route to the far node, its destination that node's
// address (the route's gateway).
func outerCount(rep *probe.Report, src, dst *Node) (uint64, string) {
	hops := map[string]bool{}
	for _, ifn := range src.Underlays {
		hops[src.Name+"/"+ifn+" egress"] = true
	}
	var n uint64
	var seen []string
	for _, tc := range rep.Tunnels {
		if !hops[tc.Hop] {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s→%s ×%d at %s", tc.Src, tc.Dst, tc.Packets, tc.Hop))
		if slices.Contains(src.Addrs, tc.Src) && slices.Contains(dst.Addrs, tc.Dst) {
			n += tc.Packets
		}
	}
	if len(seen) == 0 {
		return n, "none"
	}
	return n, strings.Join(seen, ", ")
}

// ExplainNotFlowing says, on a network with tunl0, which IPIP flows of rep
// left bare: a tunnel that does not encapsulate is why flows across a
// router never deliver. Anything else it leaves to the caller (nil).
func ExplainNotFlowing(net *topo.Network, rep *probe.Report) error {
	if net.Tunnel == "" {
		return nil
	}
	if _, err := CheckIPIP(net, rep); errors.Is(err, ErrNotEncapsulated) {
		return err
	}
	return nil
}
