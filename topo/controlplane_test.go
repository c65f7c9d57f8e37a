package topo

import (
	"net/netip"
	"strings"
	"testing"
)

// The control-plane host takes the highest address of the first node's
// segment that no interface (nor gateway) of the topology holds.
func TestControlPlaneAddress(t *testing.T) {
	n := &Network{Nodes: []*NodeNS{
		{Spec: Node{Name: "node-1", Interfaces: []Interface{{Name: "eth0", Switch: "lan", Address: "10.10.0.11/24", Gateway: "10.10.0.254"}}}},
		{Spec: Node{Name: "node-2", Interfaces: []Interface{{Name: "eth0", Switch: "lan", Address: "10.10.0.253/24"}}}},
	}}
	sw, p, gw, err := n.controlPlaneSegment()
	if err != nil || sw != "lan" || p.String() != "10.10.0.0/24" || gw.String() != "10.10.0.254" {
		t.Fatalf("segment = %q %s gw %s, %v; want lan 10.10.0.0/24 gw 10.10.0.254", sw, p, gw, err)
	}
	a, err := n.freeAddress(p)
	if err != nil || a != netip.MustParseAddr("10.10.0.252") {
		t.Errorf("free address = %s, %v; want 10.10.0.252 (.255 broadcast, .254 the gateway, .253 node-2)", a, err)
	}
	if _, err := (&Network{}).AddControlPlane(); err == nil || !strings.Contains(err.Error(), "no node has an interface") {
		t.Errorf("no nodes: error %v; want one saying no node has a switched interface", err)
	}
}
