package topo

import "strings"

// NeighbourEntries estimates how many IPv4 and IPv6 neighbour (ARP/ND)
// entries the topology needs once every address on an L2 segment has talked
// to every other one (an iBGP full mesh does exactly that): k(k-1) per
// switch with k addressed interfaces on it, two per point-to-point link,
// and two per workload (the workload's entry for its gateway, the node's
// for the workload). The kernel keeps one neighbour table per family for
// all namespaces together, so an emulated cluster's entries add up where a
// real cluster's live on separate hosts.
func (t *Topology) NeighbourEntries() (v4, v6 int) {
	type count struct{ v4, v6 int }
	perSwitch := map[string]*count{}
	add := func(ifs []Interface) {
		for _, ifc := range ifs {
			switch {
			case ifc.Switch != "":
				c := perSwitch[ifc.Switch]
				if c == nil {
					c = &count{}
					perSwitch[ifc.Switch] = c
				}
				if ifc.Address != "" {
					c.v4++
				}
				if ifc.Address6 != "" {
					c.v6++
				}
			case ifc.Peer != "":
				if ifc.Address != "" {
					v4++ // this end's entry for the far end
				}
				if ifc.Address6 != "" {
					v6++
				}
			}
		}
	}
	for _, r := range t.Routers {
		add(r.Interfaces)
	}
	v6Pool := false
	for _, p := range t.Pools {
		if strings.Contains(p.CIDR, ":") {
			v6Pool = true
		}
	}
	for _, n := range t.Nodes {
		add(n.Interfaces)
		v4 += 2 * n.Workloads
		if v6Pool {
			v6 += 2 * n.Workloads
		}
	}
	for _, c := range perSwitch {
		v4 += c.v4 * (c.v4 - 1)
		v6 += c.v6 * (c.v6 - 1)
	}
	return v4, v6
}
