package topo

import (
	"strings"
	"testing"
)

// A generated topology is a plain Topology: it validates like YAML, has the
// nodes, racks and reflectors its spec names, and every address is unique
// (Validate checks that).
func TestGenerate(t *testing.T) {
	cases := []struct {
		spec                   string
		nodes, routers, rr     int
		switches, perNodeIface int
	}{
		{spec: "nodes=3", nodes: 3, switches: 1, perNodeIface: 1},
		{spec: "nodes=100,rr=2,pool=ipip,workloads=2", nodes: 100, rr: 2, switches: 1, perNodeIface: 1},
		{spec: "nodes=900,block=26", nodes: 900, switches: 1, perNodeIface: 1},
		{spec: "nodes=10,fabric=dualtor,racks=4", nodes: 10, routers: 4*2 + 2, switches: 8, perNodeIface: 2},
		{spec: "nodes=100,fabric=dualtor", nodes: 100, routers: 2*2 + 2, switches: 4, perNodeIface: 2},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			tp, err := Resolve(GeneratedPrefix + c.spec)
			if err != nil {
				t.Fatal(err)
			}
			rr := 0
			for _, n := range tp.Nodes {
				if n.RouteReflector {
					rr++
				}
				if len(n.Interfaces) != c.perNodeIface {
					t.Errorf("%s: %d interfaces, want %d", n.Name, len(n.Interfaces), c.perNodeIface)
				}
			}
			if len(tp.Nodes) != c.nodes || len(tp.Routers) != c.routers || len(tp.Switches) != c.switches || rr != c.rr {
				t.Errorf("got %d nodes, %d routers, %d switches, %d reflectors; want %d, %d, %d, %d",
					len(tp.Nodes), len(tp.Routers), len(tp.Switches), rr, c.nodes, c.routers, c.switches, c.rr)
			}
			if _, err := tp.allocateBlocks(); err != nil {
				t.Errorf("blocks: %v", err)
			}
		})
	}
}

// The two-rack dual-ToR generated topology is the dualtor built-in's shape
// with spines joining each plane: same switches, same node wiring.
func TestGeneratedDualToRIsTheBuiltinShape(t *testing.T) {
	gen, err := Generate(GenSpec{Nodes: 4, Fabric: FabricDualToR, Racks: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Builtin("dualtor")
	sw := func(tp *Topology) (out []string) {
		for _, s := range tp.Switches {
			out = append(out, s.Name)
		}
		return out
	}
	if strings.Join(sw(gen), ",") != strings.Join(sw(b), ",") {
		t.Errorf("switches %v, built-in %v", sw(gen), sw(b))
	}
	// Nodes are dealt to racks in turn: node-1 and node-3 in rack 1.
	for _, n := range []struct{ name, sw string }{{"node-1", "rack1-a"}, {"node-2", "rack2-a"}, {"node-3", "rack1-a"}} {
		for _, nd := range gen.Nodes {
			if nd.Name == n.name && nd.Interfaces[0].Switch != n.sw {
				t.Errorf("%s on %s, want %s", n.name, nd.Interfaces[0].Switch, n.sw)
			}
		}
	}
}

func TestBadGeneratedSpecs(t *testing.T) {
	cases := map[string]string{
		"":                                     "key nodes is required",
		"nodes=0":                              "key nodes: 0 must be between 1 and 900",
		"nodes=ten":                            `key nodes: "ten" is not a whole number`,
		"nodes=3,colour=blue":                  `unknown key "colour"; keys are nodes, racks, rr, pool, block, workloads, fabric`,
		"nodes=3,nodes=4":                      "key nodes given twice",
		"nodes=3,pool=vxlan":                   `key pool: "vxlan" is not one of noencap, ipip`,
		"nodes=3,fabric=clos":                  `key fabric: "clos" is not one of l2, dualtor`,
		"nodes=3,racks=2":                      "fabric l2 is one L2 segment",
		"nodes=3,rr=4":                         "key rr: 4 must be between 0 and the number of nodes (3)",
		"nodes=3,fabric=dualtor,racks=4":       "4 racks for 3 nodes leaves a rack empty",
		"nodes=4,fabric=dualtor,rr=1":          "route reflectors are for fabric l2",
		"nodes=4,fabric=dualtor,pool=ipip":     "ipip over fabric dualtor carries no traffic",
		"nodes=300,block=24":                   "a /16 pool has 256 /24 blocks, fewer than 300 nodes",
		"nodes=500,fabric=dualtor,racks=2":     "at most 240 nodes per rack's /24; 500 nodes need at least 3 racks",
		"nodes=3,block=12":                     "key block: /12 must be between /20 and /32",
		"nodes":                                "want KEY=VALUE",
		"nodes=3,workloads=65":                 "key workloads: 65 must be between 0 and 64",
		"nodes=3,fabric=dualtor,racks=1,rr=-1": "key rr: -1",
	}
	for spec, want := range cases {
		_, err := Resolve(GeneratedPrefix + spec)
		if err == nil {
			t.Errorf("%q: no error", spec)
			continue
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `topology "generated:`) {
			t.Errorf("%q: error %q\n does not name the topology and say %q", spec, err, want)
		}
	}
}

// The neighbour estimate: k(k-1) per switch, two per point-to-point link
// end pair, two per workload.
func TestNeighbourEntries(t *testing.T) {
	ne, _ := Builtin("noencap") // 3 nodes on lan, 2 workloads each
	if v4, v6 := ne.NeighbourEntries(); v4 != 3*2+3*2*2 || v6 != 0 {
		t.Errorf("noencap: %d v4, %d v6; want %d, 0", v4, v6, 3*2+3*2*2)
	}
	// 40 nodes on one segment: the mesh alone needs 1560, past the kernel's
	// default gc_thresh3 of 1024.
	g, err := Generate(GenSpec{Nodes: 40, Workloads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if v4, _ := g.NeighbourEntries(); v4 != 40*39+2*40 {
		t.Errorf("40 nodes: %d, want %d", v4, 40*39+2*40)
	}
}
