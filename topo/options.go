package topo

import (
	"fmt"
	"net/netip"
)

// Option adds something to a topology built in Go:
//
//	t := topo.New("mini",
//		topo.WithPool("pods", "10.244.0.0/16", topo.IPIPNever),
//		topo.WithSwitch("lan"),
//		topo.WithNode("node-1", topo.OnSwitch("eth0", "lan", "10.10.0.11/24"), topo.Workloads(2)),
//	)
type Option func(*Topology)

// NodeOption shapes one node.
type NodeOption func(*Node)

// RouterOption shapes one router.
type RouterOption func(*Router)

// IPIP modes for WithPool.
const (
	IPIPAlways      = ipipAlways
	IPIPCrossSubnet = ipipCrossSubnet
	IPIPNever       = encapNever
)

// New returns a topology made of the given parts; call Validate or Build.
func New(name string, opts ...Option) *Topology {
	t := &Topology{Name: name}
	for _, o := range opts {
		o(t)
	}
	return t
}

// WithPool adds an IP pool.
func WithPool(name, cidr, ipipMode string) Option {
	return func(t *Topology) { t.Pools = append(t.Pools, Pool{Name: name, CIDR: cidr, IPIPMode: ipipMode}) }
}

// WithSwitch adds an L2 segment.
func WithSwitch(name string) Option {
	return func(t *Topology) { t.Switches = append(t.Switches, Switch{Name: name}) }
}

// WithNode adds a node.
func WithNode(name string, opts ...NodeOption) Option {
	return func(t *Topology) {
		n := Node{Name: name}
		for _, o := range opts {
			o(&n)
		}
		t.Nodes = append(t.Nodes, n)
	}
}

// WithRouter adds a router (or ToR).
func WithRouter(name string, opts ...RouterOption) Option {
	return func(t *Topology) {
		r := Router{Name: name}
		for _, o := range opts {
			o(&r)
		}
		t.Routers = append(t.Routers, r)
	}
}

// OnSwitch plugs an interface with an address into a switch.
func OnSwitch(iface, sw, address string) NodeOption {
	return func(n *Node) {
		n.Interfaces = append(n.Interfaces, Interface{Name: iface, Switch: sw, Address: address})
	}
}

// Via sets the gateway of the node's last interface.
func Via(gateway string) NodeOption {
	return func(n *Node) { n.Interfaces[len(n.Interfaces)-1].Gateway = gateway }
}

// Workloads sets how many workloads the node runs.
func Workloads(count int) NodeOption { return func(n *Node) { n.Workloads = count } }

// AS sets the node's AS number.
func AS(asn int) NodeOption { return func(n *Node) { n.ASNumber = asn } }

// Adopt uses an existing network namespace for the node.
func Adopt(pathOrPID string) NodeOption { return func(n *Node) { n.Adopt = pathOrPID } }

// RouterOnSwitch plugs a router interface into a switch.
func RouterOnSwitch(iface, sw, address string) RouterOption {
	return func(r *Router) {
		r.Interfaces = append(r.Interfaces, Interface{Name: iface, Switch: sw, Address: address})
	}
}

// NoEncap generates the noencap shape with any number of nodes on one
// switch: the built-in for nodes=3, workloads=2, and the benchmark's big
// clusters.
func NoEncap(nodes, workloads int) *Topology {
	opts := []Option{WithPool("noencap-pool", "10.244.0.0/16", IPIPNever), WithSwitch("lan")}
	base := netip.MustParseAddr("10.10.0.11")
	for i := range nodes {
		addr := addOffset(base, uint64(i))
		if nodes > 200 {
			panic("NoEncap: at most 200 nodes on one /24")
		}
		opts = append(opts, WithNode(fmt.Sprintf("node-%d", i+1),
			OnSwitch("eth0", "lan", addr.String()+"/24"), Workloads(workloads)))
	}
	return New("noencap", opts...)
}
