package harness

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/birdcage/birdcage/topo"
)

// The dual-ToR facts a scenario asks the fabric, on the built-in dualtor
// topology's own description (no namespaces): every node has one uplink per
// plane, a ToR serves its rack, a block is its node's.
func TestFabricDualToRFacts(t *testing.T) {
	tp, err := topo.Builtin("dualtor")
	if err != nil {
		t.Fatal(err)
	}
	block := netip.MustParsePrefix("10.65.1.0/26")
	net := &topo.Network{Topology: tp}
	for _, n := range tp.Nodes {
		nd := &topo.NodeNS{Namespace: topo.Namespace{Name: n.Name}}
		if n.Name == "node-3" {
			nd.Blocks = []topo.Block{{CIDR: block}}
		}
		net.Nodes = append(net.Nodes, nd)
	}
	f := (&Cluster{Net: net}).Fabric()
	if got := f.Planes(); len(got) != 2 {
		t.Fatalf("planes %v, want two", got)
	}
	both := f.UplinkPaths("node-1")
	if len(both) != 2 || !slices.IsSorted(both) {
		t.Fatalf("node-1's uplink paths %v: want one per plane, sorted", both)
	}
	plane := f.PlaneOf("tor-1a")
	rest := f.UplinkPathsExcept("node-1", plane)
	if len(rest) != 1 || !slices.Contains(both, rest[0]) {
		t.Fatalf("node-1's paths without plane %s: %v (of %v)", plane, rest, both)
	}
	if got := f.Behind("tor-1a"); !slices.Equal(got, []string{"node-1", "node-2"}) {
		t.Errorf("behind tor-1a: %v, want node-1 and node-2 (rack 1)", got)
	}
	if got := f.BlockOwner(block); got != "node-3" {
		t.Errorf("owner of %s: %q, want node-3", block, got)
	}
	if got := f.BlockOwner(netip.MustParsePrefix("10.99.0.0/26")); got != "" {
		t.Errorf("owner of a block nobody has: %q, want none", got)
	}
}
