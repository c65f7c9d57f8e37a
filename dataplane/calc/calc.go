package calc

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/birdcage/birdcage/dataplane/route"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// DefaultTunnelDevice is the IPIP device cluster routes of IPIP pools leave by.
const DefaultTunnelDevice = "tunl0"

// Options are the node-local facts and knobs the datastore does not hold.
type Options struct {
	// TunnelDevice is the IPIP device (DefaultTunnelDevice when empty).
	TunnelDevice string
	// Uplinks are this node's uplinks with their addresses. Nil means the
	// node document's Uplinks. The daemon fills it in when the document has
	// none, from the kernel interface that holds the node's address.
	Uplinks []datastore.Uplink
	// NoEncapMultipathViaGateways sends a no-encap destination whose node is
	// not on a connected subnet over every uplink gateway (ECMP) instead of
	// the first one. NOT Felix's behaviour: Felix programs a single path and
	// so loses dual-ToR redundancy. For evaluating a candidate fix only.
	NoEncapMultipathViaGateways bool
	// NoEncapIPv4OnlyWithoutIPIP is the 3.31 and 3.32 rule: Felix starts
	// its no-encap route manager for IPv4 only when no overlay is enabled,
	// so while any IPIP pool exists it programs no IPv4 no-encap routes,
	// whatever programClusterRoutes says (int_dataplane.go, the
	// newNoEncapManager condition). IPv6 is unaffected (IPIP is IPv4 only).
	// Set it with config.Release.NoEncapIPv4NeedsNoIPIP.
	NoEncapIPv4OnlyWithoutIPIP bool
}

// Skip is a destination that was considered and is not desired, with why.
type Skip struct {
	Dst    netip.Prefix
	Reason string
}

// Result is the calculation's output, both lists sorted by destination.
type Result struct {
	Routes  []route.Route
	Skipped []Skip
}

// DesiredRoutes computes the routes node wants, given the programmer's
// effective programClusterRoutes value.
func DesiredRoutes(c *datastore.Cluster, node string, owner config.ProgramClusterRoutes, opts Options) Result {
	k := newCalculator(c, node, owner, opts)
	k.remoteBlocks()
	k.workloads()
	return k.result()
}

type calculator struct {
	c      *datastore.Cluster
	node   string
	owner  config.ProgramClusterRoutes
	opts   Options
	nodes  map[string]datastore.Node
	pools  []pool
	blocks []block
	// connected are this node's uplinks with their subnets.
	connected []connectedUplink
	want      map[netip.Prefix]route.Route
	skipped   []Skip
}

type pool struct {
	datastore.IPPool
	cidr netip.Prefix
}

type block struct {
	cidr netip.Prefix
	node string
}

type connectedUplink struct {
	datastore.Uplink
	subnet  netip.Prefix // invalid when the uplink has no address
	gateway netip.Addr   // invalid when none
}

func newCalculator(c *datastore.Cluster, node string, owner config.ProgramClusterRoutes, opts Options) *calculator {
	if opts.TunnelDevice == "" {
		opts.TunnelDevice = DefaultTunnelDevice
	}
	k := &calculator{c: c, node: node, owner: owner, opts: opts,
		nodes: map[string]datastore.Node{}, want: map[netip.Prefix]route.Route{}}
	for _, n := range c.Nodes {
		k.nodes[n.Name] = n
	}
	for _, p := range c.Pools {
		if cidr, err := netip.ParsePrefix(p.CIDR); err == nil {
			k.pools = append(k.pools, pool{p, cidr})
		}
	}
	for _, b := range c.Blocks {
		if cidr, err := netip.ParsePrefix(b.CIDR); err == nil {
			k.blocks = append(k.blocks, block{cidr.Masked(), b.Node})
		}
	}
	// Most specific block first, so lookups find the longest match.
	slices.SortStableFunc(k.blocks, func(a, b block) int { return b.cidr.Bits() - a.cidr.Bits() })
	uplinks := opts.Uplinks
	if uplinks == nil {
		uplinks = k.nodes[node].Uplinks
	}
	for _, u := range uplinks {
		cu := connectedUplink{Uplink: u}
		if p, err := netip.ParsePrefix(u.Address); err == nil {
			cu.subnet = p.Masked()
		}
		if a, err := netip.ParseAddr(u.Gateway); err == nil {
			cu.gateway = a
		}
		k.connected = append(k.connected, cu)
	}
	return k
}

func (k *calculator) result() Result {
	var r Result
	for _, rt := range k.want {
		r.Routes = append(r.Routes, rt)
	}
	slices.SortFunc(r.Routes, func(a, b route.Route) int { return route.ComparePrefix(a.Dst, b.Dst) })
	r.Skipped = k.skipped
	slices.SortStableFunc(r.Skipped, func(a, b Skip) int { return route.ComparePrefix(a.Dst, b.Dst) })
	return r
}

func (k *calculator) skip(dst netip.Prefix, format string, args ...any) {
	k.skipped = append(k.skipped, Skip{Dst: dst, Reason: fmt.Sprintf(format, args...)})
}

// add records a desired route; on a conflict the lower class wins and the
// loser is reported as skipped.
func (k *calculator) add(r route.Route) {
	old, ok := k.want[r.Dst]
	if !ok {
		k.want[r.Dst] = r
		return
	}
	if r.Class < old.Class {
		k.want[r.Dst] = r
		old, r = r, old
	}
	k.skip(r.Dst, "conflicts with %s (%s), which wins", old, old.Reason)
}

// poolOf returns the pool containing prefix p.
func (k *calculator) poolOf(p netip.Prefix) (pool, bool) {
	for _, pl := range k.pools {
		if pl.cidr.Bits() <= p.Bits() && pl.cidr.Contains(p.Addr()) {
			return pl, true
		}
	}
	return pool{}, false
}

// blockOf returns the most specific block containing a.
func (k *calculator) blockOf(a netip.Addr) (block, bool) {
	for _, b := range k.blocks {
		if b.cidr.Contains(a) {
			return b, true
		}
	}
	return block{}, false
}

func (k *calculator) remoteBlocks() {
	for _, b := range k.blocks {
		if b.node == k.node {
			continue // our own block: not a cluster route
		}
		k.remote(b.cidr, b.node, fmt.Sprintf("block %s affine to node %s", b.cidr, b.node))
	}
}

func (k *calculator) workloads() {
	for _, w := range k.c.Workloads {
		for _, a := range w.Addresses {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				continue
			}
			if w.Node == k.node {
				why := fmt.Sprintf("local workload %s", w.Name)
				if b, ok := k.blockOf(p.Addr()); ok && b.node != k.node {
					why += fmt.Sprintf(" (address borrowed from node %s's block %s)", b.node, b.cidr)
				}
				k.add(route.Route{Dst: p, Class: route.ClassLocalWorkload, Reason: why,
					NextHops: []route.NextHop{{Device: w.Interface}}})
				continue
			}
			b, ok := k.blockOf(p.Addr())
			switch {
			case ok && b.node == w.Node:
				continue // the block route already leads to the right node
			case ok:
				k.remote(p, w.Node, fmt.Sprintf("workload %s on node %s (address borrowed from node %s's block %s)", w.Name, w.Node, b.node, b.cidr))
			default:
				k.remote(p, w.Node, fmt.Sprintf("workload %s on node %s (address in no block)", w.Name, w.Node))
			}
		}
	}
}

// remote adds the route to dst, which lives on node remote, by the class of
// the pool containing dst, if the programmer owns that class.
func (k *calculator) remote(dst netip.Prefix, remote, why string) {
	pl, ok := k.poolOf(dst)
	if !ok {
		k.skip(dst, "%s: no IP pool contains it", why)
		return
	}
	rn, ok := k.nodes[remote]
	if !ok {
		k.skip(dst, "%s: node %s is not in the datastore", why, remote)
		return
	}
	why = fmt.Sprintf("%s in pool %s", why, pl.Name)
	switch {
	case pl.IsIPIP():
		if !k.owner.ProgramIPIPClusterRoutes() {
			k.skip(dst, "%s: IPIP pool; programClusterRoutes=%s leaves IPIP cluster routes to BIRD", why, k.owner)
			return
		}
		k.ipip(dst, pl, rn, why)
	case pl.IsNoEncap():
		if !k.owner.ProgramNoEncapClusterRoutes() {
			k.skip(dst, "%s: no-encap pool; programClusterRoutes=%s leaves no-encap cluster routes to BIRD", why, k.owner)
			return
		}
		if k.opts.NoEncapIPv4OnlyWithoutIPIP && dst.Addr().Is4() && k.anyIPIPPool() {
			k.skip(dst, "%s: no-encap pool; this release programs IPv4 no-encap routes only when no IPIP pool exists, and one does", why)
			return
		}
		k.noEncap(dst, rn, why)
	default:
		k.skip(dst, "%s: pool class not modelled", why)
	}
}

// anyIPIPPool reports whether any IP pool has IPIP: Felix's "IPIP enabled".
func (k *calculator) anyIPIPPool() bool {
	for _, p := range k.pools {
		if p.IsIPIP() {
			return true
		}
	}
	return false
}

func nodeAddr(n datastore.Node, v6 bool) (netip.Addr, bool) {
	s := n.IPv4Address
	if v6 {
		s = n.IPv6Address
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return p.Addr(), true
}

// connectedUplink returns the uplink whose subnet holds a.
func (k *calculator) connectedUplink(a netip.Addr) (connectedUplink, bool) {
	for _, u := range k.connected {
		if u.subnet.IsValid() && u.subnet.Contains(a) {
			return u, true
		}
	}
	return connectedUplink{}, false
}

func (k *calculator) ipip(dst netip.Prefix, pl pool, rn datastore.Node, why string) {
	if dst.Addr().Is6() {
		k.ipipV6(dst, pl, rn, why)
		return
	}
	gw, ok := nodeAddr(rn, false)
	if !ok {
		k.skip(dst, "%s: node %s has no IPv4 address to tunnel to", why, rn.Name)
		return
	}
	if pl.IPIPMode == datastore.EncapCrossSubnet {
		if u, ok := k.connectedUplink(gw); ok {
			k.add(route.Route{Dst: dst, Class: route.ClassIPIPSameSubnet,
				Reason:   why + fmt.Sprintf(" (CrossSubnet: node %s is on connected subnet %s)", rn.Name, u.subnet),
				NextHops: []route.NextHop{{Gateway: gw, Device: u.Interface, OnLink: true}}})
			return
		}
	}
	k.add(route.Route{Dst: dst, Class: route.ClassIPIPTunnel, Reason: why,
		NextHops: []route.NextHop{{Gateway: gw, Device: k.opts.TunnelDevice, OnLink: true}}})
}

// ipipV6 is Felix's treatment of an IPv6 pool with ipipMode set, which
// Calico's API refuses but the datastore can hold: never the tunnel (Felix
// starts its IPIP manager for IPv4 only, int_dataplane.go newIPIPManager(...,
// 4, ...)); its IPv6 route manager is the no-encap one, which takes a route
// of another pool type only when the route is same-subnet (route_mgr.go
// noEncapRoute: `ippoolType != NO_ENCAP && !r.GetSameSubnet()` gives none),
// and a route is same-subnet only under CrossSubnet (l3_route_resolver.go,
// `poolAllowsCrossSubnet && nodeInOurSubnet`), all at release-v3.33 6609dea5.
// So: CrossSubnet with the node on a connected subnet, a no-encap route out
// of the uplink; otherwise none.
func (k *calculator) ipipV6(dst netip.Prefix, pl pool, rn datastore.Node, why string) {
	if pl.IPIPMode != datastore.EncapCrossSubnet {
		k.skip(dst, "%s: IPv6 pool with ipipMode %s: Felix never tunnels IPv6 and its IPv6 route manager takes an IPIP pool's route only same-subnet under CrossSubnet", why, pl.IPIPMode)
		return
	}
	gw, ok := nodeAddr(rn, true)
	if !ok {
		k.skip(dst, "%s: node %s has no IPv6 address", why, rn.Name)
		return
	}
	u, ok := k.connectedUplink(gw)
	if !ok {
		k.skip(dst, "%s: IPv6 pool with ipipMode CrossSubnet: node %s (%s) is on no connected subnet, and Felix never tunnels IPv6", why, rn.Name, gw)
		return
	}
	k.add(route.Route{Dst: dst, Class: route.ClassIPIPSameSubnet,
		Reason:   why + fmt.Sprintf(" (IPv6, CrossSubnet: node %s is on connected subnet %s; out of the uplink as no-encap, never the tunnel)", rn.Name, u.subnet),
		NextHops: []route.NextHop{{Gateway: gw, Device: u.Interface, OnLink: true}}})
}

// noEncap writes Felix's no-encap route: `via <node> dev <uplink> onlink`.
// Felix's route table gives every no-encap target RTNH_F_ONLINK (routetable
// defs.go, Target.Flags: TargetTypeVXLAN, TargetTypeNoEncap, TargetTypeOnLink;
// the same at release-v3.31 3cdeae8f, v3.32 de60d98e and v3.33 6609dea5), and
// route_mgr.go noEncapRoute builds its same-subnet and no-encap routes as
// TargetTypeNoEncap. Real Felix 3.33 wrote `10.65.2.0/26 via 10.99.0.12 dev
// <uplink> proto 80 onlink`.
func (k *calculator) noEncap(dst netip.Prefix, rn datastore.Node, why string) {
	v6 := dst.Addr().Is6()
	gw, ok := nodeAddr(rn, v6)
	if !ok {
		k.skip(dst, "%s: node %s has no address of this family", why, rn.Name)
		return
	}
	if u, ok := k.connectedUplink(gw); ok {
		k.add(route.Route{Dst: dst, Class: route.ClassNoEncap,
			Reason:   why + fmt.Sprintf(" (node %s is on connected subnet %s)", rn.Name, u.subnet),
			NextHops: []route.NextHop{{Gateway: gw, Device: u.Interface, OnLink: true}}})
		return
	}
	// Not directly connected (dual-ToR loopback addressing): Felix sends it
	// to one gateway; multipath over all of them only on explicit opt-in.
	var hops []route.NextHop
	for _, u := range k.connected {
		if u.gateway.IsValid() && u.gateway.Is6() == v6 {
			hops = append(hops, route.NextHop{Gateway: u.gateway, Device: u.Interface, OnLink: true})
			if !k.opts.NoEncapMultipathViaGateways {
				break
			}
		}
	}
	if len(hops) == 0 {
		k.skip(dst, "%s: node %s (%s) is on no connected subnet and no uplink has a gateway", why, rn.Name, gw)
		return
	}
	how := " (node %s is not on a connected subnet: single path via the first uplink gateway, as Felix does)"
	if len(hops) > 1 {
		how = " (node %s is not on a connected subnet: multipath over every uplink gateway — opt-in, NOT Felix's behaviour)"
	}
	k.add(route.Route{Dst: dst, Class: route.ClassNoEncap, Reason: why + fmt.Sprintf(how, rn.Name), NextHops: hops})
}
