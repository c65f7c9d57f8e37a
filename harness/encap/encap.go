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
	"github.com/birdcage/birdcage/harness/probe"
	"github.com/birdcage/birdcage/harness/results"
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

// CheckIPIP judges every flow of rep between workloads on
// different nodes whose destination is in an IPIP pool (Always, or
// CrossSubnet between nodes on different subnets): at the source node's
// underlay egress its packets were counted inside IPIP and never bare, no
// bare one reached the destination node's underlay ingress, and the source
// counted at least as many protocol-4 packets from its own address to the
// destination node's as the flows between them sent inside IPIP. An error
// wrapping ErrNotEncapsulated names each flow and what was seen; one
// wrapping ErrNoEvidence says why nothing could be judged.
func CheckIPIP(net *topo.Network, rep *probe.Report) (Evidence, error) {
	ev := Evidence{Tunnel: net.Tunnel}
	if rep == nil {
		return ev, fmt.Errorf("%w: no probe report", ErrNoEvidence)
	}
	var problems, empty []string
	inner := map[[2]string]uint64{} // per (source, destination) node
	for _, g := range rep.Flows {
		src, dst := net.NodeOfWorkloadAddr(g.SrcAddr), net.NodeOfWorkloadAddr(g.DstAddr)
		if src == nil || dst == nil || src == dst || !encapsulates(net.Topology, src, dst, g.DstAddr) {
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
		src, _ := net.Node(r.Src)
		dst, _ := net.Node(r.Dst)
		outer, seen := outerCount(rep, src, dst)
		ev.Rows[i].Outer = outer
		if want := inner[pair]; want > outer && want > 0 {
			problems = append(problems, fmt.Sprintf("%s→%s: %d packets inside IPIP at %s's underlay egress but %d protocol-4 packets from %s to %s there (outer flows seen: %s)",
				r.Src, r.Dst, want, r.Src, outer, nodeAddrs(src), dst.Address.Addr(), seen))
			inner[pair] = 0 // said once per node pair
		}
	}
	if len(problems) > 0 {
		return ev, fmt.Errorf("%w (tunl0: %s; %d IPIP flows judged):\n  %s",
			ErrNotEncapsulated, tunnelName(net.Tunnel), len(ev.Rows), strings.Join(append(problems, empty...), "\n  "))
	}
	if len(empty) > 0 {
		return ev, fmt.Errorf("%w (tunl0: %s; %d IPIP flows judged):\n  %s",
			ErrNoEvidence, tunnelName(net.Tunnel), len(ev.Rows), strings.Join(empty, "\n  "))
	}
	return ev, nil
}

func tunnelName(t string) string {
	if t == "" {
		return "none"
	}
	return t
}

// encapsulates says whether traffic from src to the workload address a on
// dst goes inside IPIP: a's pool is IPIP Always, or CrossSubnet and dst's
// address is on none of src's subnets.
func encapsulates(t *topo.Topology, src, dst *topo.NodeNS, a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	for _, p := range t.Pools {
		cidr, err := netip.ParsePrefix(p.CIDR)
		if err != nil || !cidr.Contains(a) {
			continue
		}
		switch p.IPIPMode {
		case topo.IPIPAlways:
			return true
		case topo.IPIPCrossSubnet:
			for _, ifc := range src.Spec.Interfaces {
				if pfx, err := netip.ParsePrefix(ifc.Address); err == nil && pfx.Masked().Contains(dst.Address.Addr()) {
					return false
				}
			}
			return true
		}
		return false
	}
	return false
}

// underlayCount sums a flow's counts at nd's underlay interfaces (every
// interface of its spec; tunl0 is not one) in one direction; ok is false
// when the report has none of those hops.
func underlayCount(g probe.GapReport, nd *topo.NodeNS, dir string) (c probe.HopCount, ok bool) {
	for _, ifc := range nd.Spec.Interfaces {
		name := nd.Name + "/" + ifc.Name + " " + dir
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
// (for the message).
func outerCount(rep *probe.Report, src, dst *topo.NodeNS) (uint64, string) {
	hops := map[string]bool{}
	for _, ifc := range src.Spec.Interfaces {
		hops[src.Name+"/"+ifc.Name+" egress"] = true
	}
	from, to := nodeAddrs(src), nodeAddrs(dst)
	var n uint64
	var seen []string
	for _, tc := range rep.Tunnels {
		if !hops[tc.Hop] {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s→%s ×%d at %s", tc.Src, tc.Dst, tc.Packets, tc.Hop))
		if slices.Contains(from, tc.Src) && slices.Contains(to, tc.Dst) {
			n += tc.Packets
		}
	}
	if len(seen) == 0 {
		return n, "none"
	}
	return n, strings.Join(seen, ", ")
}

// nodeAddrs are a node's own address and its interfaces' addresses: an
// outer header's source is the one the kernel picks for the route to the
// far node, its destination that node's address (the route's gateway).
func nodeAddrs(nd *topo.NodeNS) []netip.Addr {
	out := []netip.Addr{nd.Address.Addr()}
	for _, ifc := range nd.Spec.Interfaces {
		if p, err := netip.ParsePrefix(ifc.Address); err == nil && !slices.Contains(out, p.Addr()) {
			out = append(out, p.Addr())
		}
	}
	return out
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
