package encap

// Holds encap.go's judgement in place on crafted reports: an encapsulated
// session passes; a bare packet on either end's underlay, inner packets
// without protocol-4 packets between the two nodes' addresses, and a flow
// nothing was counted for fail, naming the flow; a report with no IPIP flow
// to judge fails as unjudgeable, not as a pass. The root test
// (encap_root_test.go) runs it on real traffic on both emulations.

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/topo"
)

// encapNet is the ipip built-in as if built: node-N has workload
// 10.245.N.1 (its block's pool is ipip-pool, Always).
func encapNet(t *testing.T, tp *topo.Topology) *topo.Network {
	t.Helper()
	n := &topo.Network{Topology: tp, Tunnel: topo.TunnelEBPF}
	for i, nd := range tp.Nodes {
		addr := netip.MustParsePrefix(nd.Interfaces[0].Address)
		wl := &topo.Workload{Node: nd.Name, IPv4: netip.AddrFrom4([4]byte{10, 245, byte(i + 1), 1})}
		n.Nodes = append(n.Nodes, &topo.NodeNS{Namespace: topo.Namespace{Name: nd.Name}, Spec: nd, Address: addr, Workloads: []*topo.Workload{wl}, Tunnel: true})
	}
	return n
}

func ipipBuiltin(t *testing.T) *topo.Topology {
	t.Helper()
	tp, err := topo.Builtin("ipip")
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// encapFlow is one crafted flow from node-(s+1) to node-(d+1): its packets
// at the source's eth0 egress (inside IPIP and bare) and the
// destination's eth0 ingress (bare).
type encapFlow struct {
	s, d                    int
	innerOut, bareOut, bare uint64
}

func encapReport(n *topo.Network, flows []encapFlow, tunnels ...probe.TunnelCount) *probe.Report {
	rep := &probe.Report{Tunnels: tunnels}
	for _, f := range flows {
		src, dst := n.Nodes[f.s], n.Nodes[f.d]
		rep.Flows = append(rep.Flows, probe.GapReport{
			Flow:    fmt.Sprintf("%s/wl-0->%s/wl-0", src.Name, dst.Name),
			SrcAddr: src.Workloads[0].IPv4, DstAddr: dst.Workloads[0].IPv4, Sent: 100,
			Hops: []probe.HopCount{
				{Hop: src.Name + "/eth0 egress", Inner: f.innerOut, Packets: f.bareOut},
				{Hop: src.Name + "/tunl0 egress", Packets: f.innerOut + f.bareOut},
				{Hop: dst.Name + "/eth0 ingress", Inner: f.innerOut, Packets: f.bare},
			},
		})
	}
	return rep
}

func outer(n *topo.Network, s, d int, packets uint64) probe.TunnelCount {
	return probe.TunnelCount{Hop: n.Nodes[s].Name + "/eth0 egress", Src: n.Nodes[s].Address.Addr(), Dst: n.Nodes[d].Address.Addr(), Packets: packets}
}

func TestCheckIPIPEncapsulated(t *testing.T) {
	n := encapNet(t, ipipBuiltin(t))
	// node-1 -> node-2 (same subnet) and node-1 -> node-3 (across the router).
	good := []encapFlow{{s: 0, d: 1, innerOut: 100}, {s: 0, d: 2, innerOut: 90}}
	goodOuter := []probe.TunnelCount{outer(n, 0, 1, 100), outer(n, 0, 2, 95)}

	t.Run("encapsulated passes", func(t *testing.T) {
		ev, err := CheckIPIP(n, encapReport(n, good, goodOuter...))
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Rows) != 2 || ev.Inner != 190 || ev.Bare != 0 || ev.Rows[1].Outer != 95 {
			t.Errorf("evidence %+v", ev)
		}
		if !strings.Contains(ev.Table(), "node-1/wl-0->node-3/wl-0") {
			t.Errorf("table names no flow:\n%s", ev.Table())
		}
	})

	for _, c := range []struct {
		name    string
		flows   []encapFlow
		tunnels []probe.TunnelCount
		want    error
		says    []string
	}{
		{"bare on the source's underlay (the no-encap emulation)", []encapFlow{{s: 0, d: 1, bareOut: 100, bare: 100}, good[1]}, goodOuter,
			ErrNotEncapsulated, []string{"node-1/wl-0->node-2/wl-0", "bare, not inside IPIP: 100 packets at node-1's underlay egress", "tunl0: ebpf"}},
		{"bare only at the destination", []encapFlow{good[0], {s: 0, d: 2, innerOut: 90, bare: 3}}, goodOuter,
			ErrNotEncapsulated, []string{"node-1/wl-0->node-3/wl-0", "3 at node-3's underlay ingress"}},
		{"inner packets but no outer header between the two nodes", good, []probe.TunnelCount{outer(n, 0, 1, 100), outer(n, 0, 3, 95)},
			ErrNotEncapsulated, []string{"node-1→node-3: 90 packets inside IPIP", "0 protocol-4 packets", "10.10.1.11→10.10.2.14 ×95"}},
		{"a flow with nothing counted", []encapFlow{good[0], {s: 0, d: 2}}, goodOuter,
			ErrNoEvidence, []string{"node-1/wl-0->node-3/wl-0", "no packet counted at node-1's underlay egress"}},
		{"no IPIP flow (same node)", []encapFlow{{s: 1, d: 1, innerOut: 100}}, goodOuter,
			ErrNoEvidence, []string{"none of the report's 1 flows"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := CheckIPIP(n, encapReport(n, c.flows, c.tunnels...))
			if !errors.Is(err, c.want) {
				t.Fatalf("want an error wrapping %q, got %v", c.want, err)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not say %q:\n%v", s, err)
				}
			}
		})
	}

	t.Run("no hop counters", func(t *testing.T) {
		rep := encapReport(n, good, goodOuter...)
		for i := range rep.Flows {
			rep.Flows[i].Hops = nil
		}
		if _, err := CheckIPIP(n, rep); !errors.Is(err, ErrNoEvidence) || !strings.Contains(err.Error(), "NoHops") {
			t.Errorf("want ErrNoEvidence naming NoHops, got %v", err)
		}
	})
}

// CrossSubnet encapsulates only between subnets: the same-subnet flow is not
// judged (its bare packets are right), the other one is.
func TestCheckIPIPEncapsulatedCrossSubnet(t *testing.T) {
	tp := ipipBuiltin(t)
	tp.Pools[0].IPIPMode = topo.IPIPCrossSubnet
	n := encapNet(t, tp)
	flows := []encapFlow{{s: 0, d: 1, bareOut: 100, bare: 100}, {s: 0, d: 2, innerOut: 90}}
	ev, err := CheckIPIP(n, encapReport(n, flows, outer(n, 0, 2, 90)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Rows) != 1 || ev.Rows[0].Dst != "node-3" {
		t.Errorf("want only node-1 -> node-3 judged, got %+v", ev.Rows)
	}
	// ...and the cross-subnet one still fails when bare.
	flows[1] = encapFlow{s: 0, d: 2, bareOut: 90}
	if _, err := CheckIPIP(n, encapReport(n, flows)); !errors.Is(err, ErrNotEncapsulated) {
		t.Errorf("cross-subnet bare flow: want ErrNotEncapsulated, got %v", err)
	}
}
