package topo

import (
	"net/netip"
	"slices"
)

// The facts about a built topology that scenarios ask for: which node a
// block, a node address or a workload address belongs to, and how a node
// reaches each ToR plane. Derived from the topology, never from the kernel.

// Block returns the node's block in the named pool.
func (n *NodeNS) Block(pool string) (netip.Prefix, bool) {
	for _, b := range n.Blocks {
		if b.Pool.Name == pool {
			return b.CIDR, true
		}
	}
	return netip.Prefix{}, false
}

// HasWorkloadAddr reports whether one of the node's workloads has a.
func (n *NodeNS) HasWorkloadAddr(a netip.Addr) bool {
	return slices.ContainsFunc(n.Workloads, func(w *Workload) bool { return w.IPv4 == a || (w.IPv6.IsValid() && w.IPv6 == a) })
}

// NodeOfBlock is the node a block is affine to (nil when none).
func (net *Network) NodeOfBlock(b netip.Prefix) *NodeNS {
	for _, nd := range net.Nodes {
		for _, bl := range nd.Blocks {
			if bl.CIDR == b {
				return nd
			}
		}
	}
	return nil
}

// NodeByAddress is the node whose own address (Address) is a (nil when
// none).
func (net *Network) NodeByAddress(a netip.Addr) *NodeNS {
	for _, nd := range net.Nodes {
		if nd.Address.Addr() == a {
			return nd
		}
	}
	return nil
}

// NodeOfWorkloadAddr is the node hosting the workload with address a (nil
// when none).
func (net *Network) NodeOfWorkloadAddr(a netip.Addr) *NodeNS {
	for _, nd := range net.Nodes {
		if nd.HasWorkloadAddr(a) {
			return nd
		}
	}
	return nil
}

// Uplink is a node interface on a ToR's switch.
type Uplink struct {
	Interface string     // the node's interface ("eth0")
	Gateway   netip.Addr // the ToR's address on that switch
	Router    string     // the ToR
	Plane     string     // the ToR's plane ("a", "b"); empty without planes
}

// Uplinks lists the node's interfaces that sit on a switch with a router,
// with that router (a ToR) and its plane, in interface order.
func (t *Topology) Uplinks(node string) []Uplink {
	type tor struct {
		name, plane string
		addr        netip.Addr
	}
	onSwitch := map[string]tor{}
	for _, r := range t.Routers {
		for _, ifc := range r.Interfaces {
			if ifc.Switch == "" {
				continue
			}
			p, err := netip.ParsePrefix(ifc.Address)
			if err != nil {
				continue
			}
			onSwitch[ifc.Switch] = tor{r.Name, r.Plane, p.Addr()}
		}
	}
	var out []Uplink
	for _, nd := range t.Nodes {
		if nd.Name != node {
			continue
		}
		for _, ifc := range nd.Interfaces {
			if r, ok := onSwitch[ifc.Switch]; ok && ifc.Switch != "" {
				out = append(out, Uplink{Interface: ifc.Name, Gateway: r.addr, Router: r.name, Plane: r.plane})
			}
		}
	}
	return out
}

// Planes are the ToR planes (sorted, distinct); none in a topology without
// them.
func (t *Topology) Planes() []string {
	var out []string
	for _, r := range t.Routers {
		if r.Plane != "" && !slices.Contains(out, r.Plane) {
			out = append(out, r.Plane)
		}
	}
	slices.Sort(out)
	return out
}

// PlaneOf is a router's plane ("" for an unknown router or none).
func (t *Topology) PlaneOf(router string) string {
	for _, r := range t.Routers {
		if r.Name == router {
			return r.Plane
		}
	}
	return ""
}

// RouterSwitchAddrs are the routers' addresses on node switches (the ToRs'
// side of every uplink).
func (t *Topology) RouterSwitchAddrs() []netip.Addr {
	var out []netip.Addr
	for _, r := range t.Routers {
		for _, ifc := range r.Interfaces {
			if p, err := netip.ParsePrefix(ifc.Address); err == nil && ifc.Switch != "" {
				out = append(out, p.Addr())
			}
		}
	}
	return out
}
