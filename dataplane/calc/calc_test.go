// These tests hold the calculation to the ownership matrix: for every pool
// class (IPIP Always, IPIP CrossSubnet on and off the connected subnet,
// no-encap direct and via a gateway) and every programClusterRoutes value,
// the programmer wants exactly the routes of the classes it owns, in the
// shape Felix programs them; local workloads are always wanted; borrowed
// addresses get their own route.
package calc

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/dataplane/route"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// cluster: node-1 (this node) and node-2 share 10.0.1.0/24; node-3 is on
// 10.0.2.0/24, reached through the gateway 10.0.1.1.
func cluster() *datastore.Cluster {
	return &datastore.Cluster{
		Pools: []datastore.IPPool{
			{Name: "ipip-always", CIDR: "10.65.0.0/16", IPIPMode: datastore.EncapAlways},
			{Name: "ipip-cross", CIDR: "10.66.0.0/16", IPIPMode: datastore.EncapCrossSubnet},
			{Name: "flat", CIDR: "10.67.0.0/16", IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapNever},
			{Name: "flat6", CIDR: "fd00:67::/48"},
		},
		Nodes: []datastore.Node{
			{Name: "node-1", IPv4Address: "10.0.1.11/24", IPv6Address: "fd00:1::11/64",
				Uplinks: []datastore.Uplink{{Interface: "eth0", Address: "10.0.1.11/24", Gateway: "10.0.1.1"},
					{Interface: "eth0", Address: "fd00:1::11/64"}}},
			{Name: "node-2", IPv4Address: "10.0.1.12/24", IPv6Address: "fd00:1::12/64"},
			{Name: "node-3", IPv4Address: "10.0.2.13/24"},
		},
		Blocks: []datastore.BlockAffinity{
			{CIDR: "10.65.1.0/26", Node: "node-1"},
			{CIDR: "10.65.2.0/26", Node: "node-2"},
			{CIDR: "10.65.3.0/26", Node: "node-3"},
			{CIDR: "10.66.2.0/26", Node: "node-2"},
			{CIDR: "10.66.3.0/26", Node: "node-3"},
			{CIDR: "10.67.1.0/26", Node: "node-1"},
			{CIDR: "10.67.2.0/26", Node: "node-2"},
			{CIDR: "10.67.3.0/26", Node: "node-3"},
			{CIDR: "fd00:67:0:2::/122", Node: "node-2"},
		},
		Workloads: []datastore.Workload{
			{Name: "local", Node: "node-1", Interface: "cali1", Addresses: []string{"10.65.1.5/32"}},
			// A local workload with an address from node-2's block.
			{Name: "local-borrower", Node: "node-1", Interface: "cali2", Addresses: []string{"10.67.2.9/32"}},
			// node-2's workload borrowing from node-3's IPIP block.
			{Name: "remote-borrower", Node: "node-2", Interface: "cali9", Addresses: []string{"10.65.3.7/32"}},
			// node-3's workload borrowing from this node's no-encap block.
			{Name: "borrows-mine", Node: "node-3", Interface: "cali8", Addresses: []string{"10.67.1.20/32"}},
			// A remote workload in its own node's block: covered by the block route.
			{Name: "plain", Node: "node-2", Interface: "cali7", Addresses: []string{"10.65.2.3/32"}},
		},
	}
}

var (
	ipipRoutes = []string{
		"10.65.2.0/26 via 10.0.1.12 dev tunl0 onlink",
		"10.65.3.0/26 via 10.0.2.13 dev tunl0 onlink",
		"10.65.3.7/32 via 10.0.1.12 dev tunl0 onlink",
		"10.66.2.0/26 via 10.0.1.12 dev eth0 onlink", // CrossSubnet, same subnet
		"10.66.3.0/26 via 10.0.2.13 dev tunl0 onlink",
	}
	noEncapRoutes = []string{
		"10.67.1.20/32 via 10.0.1.1 dev eth0 onlink", // borrowed from us by node-3, off-subnet
		"10.67.2.0/26 via 10.0.1.12 dev eth0 onlink",
		"10.67.3.0/26 via 10.0.1.1 dev eth0 onlink",
		"fd00:67:0:2::/122 via fd00:1::12 dev eth0 onlink",
	}
	localRoutes = []string{
		"10.65.1.5/32 dev cali1 scope link",
		"10.67.2.9/32 dev cali2 scope link",
	}
)

func render(r Result) []string {
	var s []string
	for _, rt := range r.Routes {
		s = append(s, rt.String())
	}
	slices.Sort(s)
	return s
}

func sorted(parts ...[]string) []string {
	var s []string
	for _, p := range parts {
		s = append(s, p...)
	}
	slices.Sort(s)
	return s
}

func TestDesiredRoutesPerOwnership(t *testing.T) {
	for _, tc := range []struct {
		owner config.ProgramClusterRoutes
		want  []string
	}{
		{config.Disabled, sorted(localRoutes)},
		{config.EnabledIPIPOnly, sorted(localRoutes, ipipRoutes)},
		{config.EnabledNoEncapOnly, sorted(localRoutes, noEncapRoutes)},
		{config.Enabled, sorted(localRoutes, ipipRoutes, noEncapRoutes)},
	} {
		t.Run(string(tc.owner), func(t *testing.T) {
			r := DesiredRoutes(cluster(), "node-1", tc.owner, Options{})
			if got := render(r); !slices.Equal(got, tc.want) {
				t.Errorf("routes for %s:\n got  %q\n want %q", tc.owner, got, tc.want)
			}
			// Every route of a class we do not own is reported as skipped with
			// the reason naming the owner.
			for _, s := range r.Skipped {
				if !strings.Contains(s.Reason, "leaves") && !strings.Contains(s.Reason, "IPv4 only") {
					t.Errorf("unexpected skip %s: %s", s.Dst, s.Reason)
				}
			}
		})
	}
}

// TestPoolClassByOwnership is the matrix in miniature: one remote block per
// pool class, every value, one expected route (or none).
func TestPoolClassByOwnership(t *testing.T) {
	classes := []struct {
		name string
		pool datastore.IPPool
		node string // remote node the block is affine to
		want string
		ipip bool
	}{
		{"ipip-always/same-subnet", datastore.IPPool{CIDR: "10.65.0.0/16", IPIPMode: "Always"}, "node-2", "10.65.0.0/26 via 10.0.1.12 dev tunl0 onlink", true},
		{"ipip-always/other-subnet", datastore.IPPool{CIDR: "10.65.0.0/16", IPIPMode: "Always"}, "node-3", "10.65.0.0/26 via 10.0.2.13 dev tunl0 onlink", true},
		{"ipip-cross/same-subnet", datastore.IPPool{CIDR: "10.65.0.0/16", IPIPMode: "CrossSubnet"}, "node-2", "10.65.0.0/26 via 10.0.1.12 dev eth0 onlink", true},
		{"ipip-cross/other-subnet", datastore.IPPool{CIDR: "10.65.0.0/16", IPIPMode: "CrossSubnet"}, "node-3", "10.65.0.0/26 via 10.0.2.13 dev tunl0 onlink", true},
		{"no-encap/same-subnet", datastore.IPPool{CIDR: "10.65.0.0/16", IPIPMode: "Never"}, "node-2", "10.65.0.0/26 via 10.0.1.12 dev eth0 onlink", false},
		{"no-encap/other-subnet", datastore.IPPool{CIDR: "10.65.0.0/16"}, "node-3", "10.65.0.0/26 via 10.0.1.1 dev eth0 onlink", false},
	}
	for _, cl := range classes {
		for _, owner := range config.Values {
			t.Run(cl.name+"/"+string(owner), func(t *testing.T) {
				c := cluster()
				cl.pool.Name = "p"
				c.Pools = []datastore.IPPool{cl.pool}
				c.Blocks = []datastore.BlockAffinity{{CIDR: "10.65.0.0/26", Node: cl.node}}
				c.Workloads = nil
				owned := owner.ProgramNoEncapClusterRoutes()
				if cl.ipip {
					owned = owner.ProgramIPIPClusterRoutes()
				}
				var want []string
				if owned {
					want = []string{cl.want}
				}
				r := DesiredRoutes(c, "node-1", owner, Options{})
				if got := render(r); !slices.Equal(got, want) {
					t.Errorf("got %q, want %q (skipped: %+v)", got, want, r.Skipped)
				}
				if !owned && (len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Reason, "to BIRD")) {
					t.Errorf("a block of a class BIRD owns should be skipped with that reason; got %+v", r.Skipped)
				}
			})
		}
	}
}

// dualToR: nodes addressed on loopbacks, each with two uplinks to two ToRs.
func dualToR() *datastore.Cluster {
	return &datastore.Cluster{
		Pools: []datastore.IPPool{{Name: "flat", CIDR: "10.67.0.0/16", IPIPMode: "Never"}},
		Nodes: []datastore.Node{
			{Name: "node-1", IPv4Address: "10.255.0.1/32", Uplinks: []datastore.Uplink{
				{Interface: "eth0", Address: "172.16.1.2/30", Gateway: "172.16.1.1"},
				{Interface: "eth1", Address: "172.16.2.2/30", Gateway: "172.16.2.1"}}},
			{Name: "node-2", IPv4Address: "10.255.0.2/32"},
		},
		Blocks: []datastore.BlockAffinity{{CIDR: "10.67.2.0/26", Node: "node-2"}},
	}
}

func TestNoEncapDualToRSinglePathLikeFelix(t *testing.T) {
	r := DesiredRoutes(dualToR(), "node-1", config.EnabledNoEncapOnly, Options{})
	want := []string{"10.67.2.0/26 via 172.16.1.1 dev eth0 onlink"}
	if got := render(r); !slices.Equal(got, want) {
		t.Errorf("Felix-faithful dual-ToR route: got %q, want %q", got, want)
	}
	if !strings.Contains(r.Routes[0].Reason, "as Felix does") {
		t.Errorf("reason should say this is Felix's single path: %q", r.Routes[0].Reason)
	}
}

func TestNoEncapDualToRMultipathOptIn(t *testing.T) {
	r := DesiredRoutes(dualToR(), "node-1", config.EnabledNoEncapOnly, Options{NoEncapMultipathViaGateways: true})
	want := []string{"10.67.2.0/26 nexthop via 172.16.1.1 dev eth0 onlink nexthop via 172.16.2.1 dev eth1 onlink"}
	if got := render(r); !slices.Equal(got, want) {
		t.Errorf("opt-in multipath: got %q, want %q", got, want)
	}
	if !r.Routes[0].Multipath() || !strings.Contains(r.Routes[0].Reason, "NOT Felix") {
		t.Errorf("opt-in route should be multipath and say it is not Felix's: %+v", r.Routes[0])
	}
}

func TestOptionsUplinksOverrideNodeDocument(t *testing.T) {
	c := cluster()
	c.Nodes[0].Uplinks = nil
	c.Workloads = nil
	r := DesiredRoutes(c, "node-1", config.EnabledNoEncapOnly, Options{
		Uplinks: []datastore.Uplink{{Interface: "ens3", Address: "10.0.1.11/24", Gateway: "10.0.1.1"}}})
	want := []string{"10.67.2.0/26 via 10.0.1.12 dev ens3 onlink", "10.67.3.0/26 via 10.0.1.1 dev ens3 onlink"}
	if got := render(r); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q (skipped %+v)", got, want, r.Skipped)
	}
}

func TestStrayDestinationsAreNotDesired(t *testing.T) {
	c := cluster()
	c.Workloads = nil
	// Node gone, block in no pool.
	c.Nodes = slices.DeleteFunc(c.Nodes, func(n datastore.Node) bool { return n.Name == "node-3" })
	c.Blocks = append(c.Blocks, datastore.BlockAffinity{CIDR: "10.99.0.0/26", Node: "node-2"})
	r := DesiredRoutes(c, "node-1", config.Enabled, Options{})
	for _, rt := range r.Routes {
		if strings.HasPrefix(rt.Dst.String(), "10.65.3.") || strings.HasPrefix(rt.Dst.String(), "10.99.") {
			t.Errorf("stray destination desired: %s", rt)
		}
	}
	reasons := map[string]string{}
	for _, s := range r.Skipped {
		reasons[s.Dst.String()] = s.Reason
	}
	if !strings.Contains(reasons["10.65.3.0/26"], "node node-3 is not in the datastore") {
		t.Errorf("node gone: %q", reasons["10.65.3.0/26"])
	}
	if !strings.Contains(reasons["10.99.0.0/26"], "no IP pool contains it") {
		t.Errorf("pool gone: %q", reasons["10.99.0.0/26"])
	}
}

func TestLocalWorkloadWinsConflict(t *testing.T) {
	c := cluster()
	// The same address claimed by a local workload and a remote one (an IP
	// moving between nodes): the local route wins.
	c.Workloads = []datastore.Workload{
		{Name: "old", Node: "node-3", Interface: "cali3", Addresses: []string{"10.65.1.5/32"}},
		{Name: "new", Node: "node-1", Interface: "cali1", Addresses: []string{"10.65.1.5/32"}},
	}
	r := DesiredRoutes(c, "node-1", config.Enabled, Options{})
	for _, rt := range r.Routes {
		if rt.Dst == netip.MustParsePrefix("10.65.1.5/32") && rt.String() != "10.65.1.5/32 dev cali1 scope link" {
			t.Errorf("conflict resolved to %s", rt)
		}
	}
}

// TestIPIPIsIPv4Only: an IPv6 pool with ipipMode set (Calico's API refuses
// one; the datastore can hold it) never gets a tunnel route. Felix at
// release-v3.33 6609dea5 starts its IPIP manager for IPv4 only and its IPv6
// route manager is the no-encap one, which takes an IPIP pool's route only
// when same-subnet under CrossSubnet (route_mgr.go noEncapRoute): then a
// no-encap route out of the uplink, onlink; under Always, none.
func TestIPIPIsIPv4Only(t *testing.T) {
	for _, tc := range []struct {
		mode, node string
		want       []string
		skipWhy    string
	}{
		{"Always", "node-2", nil, "never tunnels IPv6"},
		{"CrossSubnet", "node-2", []string{"fd00:65:0:2::/122 via fd00:1::12 dev eth0 onlink"}, ""},
		{"CrossSubnet", "node-3", nil, "on no connected subnet"},
	} {
		c := &datastore.Cluster{
			Pools: []datastore.IPPool{{Name: "v6ipip", CIDR: "fd00:65::/48", IPIPMode: tc.mode}},
			Nodes: []datastore.Node{
				{Name: "node-1", IPv4Address: "10.0.1.11/24", IPv6Address: "fd00:1::11/64", Uplinks: []datastore.Uplink{{Interface: "eth0", Address: "fd00:1::11/64"}}},
				{Name: "node-2", IPv4Address: "10.0.1.12/24", IPv6Address: "fd00:1::12/64"},
				{Name: "node-3", IPv4Address: "10.0.2.13/24", IPv6Address: "fd00:2::13/64"},
			},
			Blocks: []datastore.BlockAffinity{{CIDR: "fd00:65:0:2::/122", Node: tc.node}},
		}
		r := DesiredRoutes(c, "node-1", config.Enabled, Options{})
		got := render(r)
		if !slices.Equal(got, tc.want) {
			t.Errorf("IPv6 IPIP block, ipipMode %s, on %s: routes %q, want %q (skipped %+v)", tc.mode, tc.node, got, tc.want, r.Skipped)
		}
		for _, rt := range r.Routes {
			if slices.ContainsFunc(rt.NextHops, func(h route.NextHop) bool { return h.Device == DefaultTunnelDevice }) {
				t.Errorf("IPv6 route via %s: %s", DefaultTunnelDevice, rt)
			}
		}
		if tc.skipWhy != "" && (len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Reason, tc.skipWhy)) {
			t.Errorf("IPv6 IPIP block, ipipMode %s, on %s: want one skip saying %q, got %+v", tc.mode, tc.node, tc.skipWhy, r.Skipped)
		}
	}
}

// TestNoEncapWithIPIPPerRelease: with programClusterRoutes Enabled and an
// IPIP pool in the cluster, a 3.31 or 3.32 Felix programs no IPv4 no-encap
// routes (its no-encap manager needs no overlay enabled: int_dataplane.go on
// release-v3.31 3cdeae8f7ace and release-v3.32 de60d98e97a7); 3.33 does
// (6609dea54713, ProgramNoEncapClusterRoutes && NoEncapNeeded). IPv6 is
// programmed in all three.
func TestNoEncapWithIPIPPerRelease(t *testing.T) {
	for _, rel := range []config.Release{config.R331, config.R332, config.R333} {
		t.Run(string(rel), func(t *testing.T) {
			r := DesiredRoutes(cluster(), "node-1", config.Enabled, Options{NoEncapIPv4OnlyWithoutIPIP: rel.NoEncapIPv4NeedsNoIPIP()})
			want := sorted(localRoutes, ipipRoutes, noEncapRoutes)
			if rel != config.R333 {
				want = sorted(localRoutes, ipipRoutes, []string{"fd00:67:0:2::/122 via fd00:1::12 dev eth0 onlink"})
			}
			if got := render(r); !slices.Equal(got, want) {
				t.Errorf("routes:\n got  %q\n want %q", got, want)
			}
			// Without any IPIP pool every release programs them.
			c := cluster()
			c.Pools = c.Pools[2:]
			r = DesiredRoutes(c, "node-1", config.Enabled, Options{NoEncapIPv4OnlyWithoutIPIP: rel.NoEncapIPv4NeedsNoIPIP()})
			if got := render(r); !slices.Equal(got, sorted(localRoutes, noEncapRoutes)) {
				t.Errorf("routes without an IPIP pool:\n got  %q", got)
			}
		})
	}
}
