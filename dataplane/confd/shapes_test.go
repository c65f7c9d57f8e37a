package confd

import (
	"testing"

	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// holdTimers are a non-default hold/keepalive pair.
var holdTimers = Timers{HoldTime: 9, KeepaliveTime: 3}

// extraShapes renders the shapes beside the ownership matrix: the metric
// knob, route reflectors, dual-ToR eBGP peers, CrossSubnet IPIP, a VXLAN
// pool, and a ToR's router config.
func extraShapes(t *testing.T) []golden {
	t.Helper()
	var out []golden
	renderWith := func(name string, c *datastore.Cluster, node string, rel config.Release, o Options) {
		t.Helper()
		r, err := Render(c, node, rel, o)
		if err != nil {
			t.Fatalf("render %s: %v", name, err)
		}
		out = append(out, golden{name, r.Config})
	}
	render := func(name string, c *datastore.Cluster, node string, rel config.Release) {
		t.Helper()
		renderWith(name, c, node, rel, Options{})
	}

	// BIRD 2's default metric: BIRD's routes coexist with the programmer's.
	c := testCluster("noencap")
	m := 32
	c.BGP.KernelMetric = &m
	render("shape_metric32", c, "node-1", config.R333)

	// Route reflector: mesh off, node-1 reflects for the others.
	c = testCluster("both")
	off := false
	c.BGP.NodeToNodeMeshEnabled = &off
	c.Nodes[0].RouteReflector = true
	render("shape_rr_reflector", c, "node-1", config.R333)
	render("shape_rr_client", c, "node-2", config.R333)

	// Dual ToR: a node with two uplinks and an AS of its own peers eBGP
	// with one ToR per plane; no mesh.
	c = testCluster("noencap")
	c.BGP.NodeToNodeMeshEnabled = &off
	c.Nodes[0].IPv4Address = "10.0.10.1/32"
	c.Nodes[0].ASNumber = 65001
	c.Nodes[0].Uplinks = []datastore.Uplink{
		{Interface: "eth0", Address: "172.31.11.2/30", Gateway: "172.31.11.1"},
		{Interface: "eth1", Address: "172.31.12.2/30", Gateway: "172.31.12.1"},
	}
	c.Peers = []datastore.BGPPeer{
		{Name: "tor-a", Node: "node-1", PeerIP: "172.31.11.1", ASNumber: 65101, Plane: "a"},
		{Name: "tor-b", Node: "node-1", PeerIP: "172.31.12.1", ASNumber: 65102, Plane: "b"},
		{Name: "rr-ext", PeerIP: "10.9.9.9", ASNumber: 64512},
	}
	render("shape_dualtor_node", c, "node-1", config.R333)
	// The same node with a short BGP hold timer (the reduced slow spec's).
	renderWith("shape_dualtor_node_hold9", c, "node-1", config.R333, Options{Timers: holdTimers})

	// CrossSubnet IPIP owned by BIRD, plus a VXLAN pool (always the programmer's).
	c = testCluster("ipip")
	c.Pools[0].IPIPMode = datastore.EncapCrossSubnet
	c.Pools = append(c.Pools, datastore.IPPool{Name: "vxlan-pool", CIDR: "10.96.0.0/16", IPIPMode: datastore.EncapNever, VXLANMode: datastore.EncapAlways})
	c.BGP.ProgramClusterRoutes = string(config.Enabled)
	render("shape_crosssubnet_vxlan", c, "node-1", config.Pre333)

	// The candidate re-advertisement fix (not Calico's behaviour): the
	// programmer owns no-encap, and its remote routes stay out of BIRD.
	c = testCluster("noencap")
	c.Felix.ProgramClusterRoutes = string(config.Enabled)
	c.BGP.ProgramClusterRoutes = string(config.Disabled)
	renderWith("shape_kernel_import_filter", c, "node-1", config.R333, Options{KernelImportFilter: true})

	rc, err := RenderRouter(Router{
		Name: "tor-a", RouterID: "172.31.11.1", AS: 65101,
		Neighbors: []Neighbor{
			{Name: "node-1", Address: "172.31.11.2", AS: 65001},
			{Name: "node-2", Address: "172.31.21.2", AS: 65002},
			{Address: "fd00:31:11::2", AS: 65001},
		},
	})
	if err != nil {
		t.Fatalf("render router: %v", err)
	}
	out = append(out, golden{"shape_router_tor", rc})

	// The ToR with the same short hold timer as its nodes.
	rc, err = RenderRouter(Router{
		Name: "tor-a", RouterID: "172.31.11.1", AS: 65101, Timers: holdTimers,
		Neighbors: []Neighbor{
			{Name: "node-1", Address: "172.31.11.2", AS: 65001},
			{Address: "fd00:31:11::2", AS: 65001},
		},
	})
	if err != nil {
		t.Fatalf("render router with hold time: %v", err)
	}
	out = append(out, golden{"shape_router_tor_hold9", rc})
	return out
}
