package topo

import (
	"net/netip"
	"slices"
	"testing"
)

func TestFactsOfTheDualToRTopology(t *testing.T) {
	tp, err := Builtin("dualtor")
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Planes(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("planes %v, want [a b]", got)
	}
	if p := tp.PlaneOf("tor-2b"); p != "b" {
		t.Errorf("tor-2b in plane %q, want b", p)
	}
	want := []Uplink{
		{Interface: "eth0", Gateway: netip.MustParseAddr("10.11.2.1"), Router: "tor-2a", Plane: "a"},
		{Interface: "eth1", Gateway: netip.MustParseAddr("10.12.2.1"), Router: "tor-2b", Plane: "b"},
	}
	if got := tp.Uplinks("node-3"); !slices.Equal(got, want) {
		t.Errorf("node-3 uplinks %+v, want %+v", got, want)
	}
	// Every uplink's gateway is the one the node's interface is configured
	// with: the ToR answers on the switch the node sits on.
	for _, nd := range tp.Nodes {
		for _, u := range tp.Uplinks(nd.Name) {
			for _, ifc := range nd.Interfaces {
				if ifc.Name == u.Interface && ifc.Gateway != u.Gateway.String() {
					t.Errorf("%s %s: uplink gateway %s, interface gateway %s", nd.Name, ifc.Name, u.Gateway, ifc.Gateway)
				}
			}
		}
	}
	if got := len(tp.RouterSwitchAddrs()); got != 4 {
		t.Errorf("%d router addresses on switches, want 4 (one per ToR)", got)
	}
	if tp.Uplinks("no-such-node") != nil || tp.PlaneOf("no-such-router") != "" {
		t.Error("unknown names must give nothing")
	}
}

func TestFactsOfABuiltNetwork(t *testing.T) {
	b1, b2 := netip.MustParsePrefix("10.65.1.0/26"), netip.MustParsePrefix("10.65.2.0/26")
	n1 := &NodeNS{Namespace: Namespace{Name: "node-1"}, Address: netip.MustParsePrefix("10.0.0.1/24"),
		Blocks: []Block{{CIDR: b1, Pool: Pool{Name: "p"}}}, Workloads: []*Workload{{IPv4: netip.MustParseAddr("10.65.1.5")}}}
	n2 := &NodeNS{Namespace: Namespace{Name: "node-2"}, Address: netip.MustParsePrefix("10.0.0.2/24"),
		Blocks: []Block{{CIDR: b2, Pool: Pool{Name: "p"}}}}
	net := &Network{Nodes: []*NodeNS{n1, n2}}
	if net.NodeOfBlock(b2) != n2 || net.NodeOfBlock(netip.MustParsePrefix("10.65.3.0/26")) != nil {
		t.Error("NodeOfBlock")
	}
	if net.NodeByAddress(netip.MustParseAddr("10.0.0.1")) != n1 || net.NodeByAddress(netip.MustParseAddr("10.65.1.5")) != nil {
		t.Error("NodeByAddress: a workload's address is not a node's")
	}
	if net.NodeOfWorkloadAddr(netip.MustParseAddr("10.65.1.5")) != n1 || net.NodeOfWorkloadAddr(netip.MustParseAddr("10.0.0.1")) != nil {
		t.Error("NodeOfWorkloadAddr")
	}
	if b, ok := n1.Block("p"); !ok || b != b1 {
		t.Error("Block")
	}
	if _, ok := n1.Block("q"); ok {
		t.Error("Block of a pool the node has no block in")
	}
}
