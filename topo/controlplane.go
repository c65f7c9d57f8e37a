package topo

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/internal/nsutil"
)

// ControlPlane is a host on the underlay that runs no node: where a real
// cluster's datastore (etcd) lives, reached by every node over the
// underlay as it reaches its peers.
type ControlPlane struct {
	Namespace
	// Addr is its address on the segment it is plugged into.
	Addr netip.Addr
	// Switch is that segment.
	Switch string
}

// controlPlanePort is the control-plane host's switch port: node ports are
// p1, p2, …
const controlPlanePort = "pcp"

// AddControlPlane plugs a control-plane host (a namespace "<prefix>cp",
// removed by Close like the others) into the segment of the first node's
// first switched interface, with the highest address of that subnet that
// no interface of the topology uses, and a default route via that node
// interface's gateway where it has one (so nodes of other segments reach
// it through the routers, as they reach that segment's nodes).
func (n *Network) AddControlPlane() (*ControlPlane, error) {
	sw, prefix, gw, err := n.controlPlaneSegment()
	if err != nil {
		return nil, err
	}
	addr, err := n.freeAddress(prefix)
	if err != nil {
		return nil, err
	}
	var switchNS *Namespace
	for _, s := range n.Switches {
		if s.Name == sw {
			switchNS = s
		}
	}
	if switchNS == nil {
		return nil, fmt.Errorf("control plane: switch %q was not built", sw)
	}

	cp := &ControlPlane{Namespace: Namespace{Name: "cp"}, Addr: addr, Switch: sw}
	name := n.Run.Name(cp.Name)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errClosed
	}
	n.created = append(n.created, name) // recorded first: Close removes it even half-made
	n.mu.Unlock()
	h, err := nsutil.Create(name)
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	cp.NetNS, cp.Path, cp.NS = name, nsutil.Path(name), h
	n.Run.DeferLocal("netns handle "+name, func() error { return h.Close() })

	err = withHandle(&cp.Namespace, func(h *netlink.Handle) error {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: "eth0"},
			PeerName:      controlPlanePort,
			PeerNamespace: netlink.NsFd(int(switchNS.NS.Fd())),
		}
		if err := h.LinkAdd(veth); err != nil {
			return fmt.Errorf("interface eth0 (port %s in %s): %w", controlPlanePort, sw, err)
		}
		iface := Interface{Name: "eth0", Switch: sw, Address: netip.PrefixFrom(addr, prefix.Bits()).String()}
		if gw.IsValid() {
			iface.Gateway = gw.String()
		}
		if err := configureInterfaces(h, cp.Name, []Interface{iface}); err != nil {
			return err
		}
		if lo, err := h.LinkByName("lo"); err == nil {
			return h.LinkSetUp(lo)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	if err := withHandle(switchNS, enslavePorts); err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	return cp, nil
}

// controlPlaneSegment is the first node's first switched interface: its
// switch, its subnet and its gateway (invalid when none).
func (n *Network) controlPlaneSegment() (string, netip.Prefix, netip.Addr, error) {
	for _, nd := range n.Nodes {
		for _, ifc := range nd.Spec.Interfaces {
			if ifc.Switch == "" || ifc.Address == "" {
				continue
			}
			p, err := netip.ParsePrefix(ifc.Address)
			if err != nil {
				return "", netip.Prefix{}, netip.Addr{}, fmt.Errorf("control plane: node %q: interface %q: address %q: %w", nd.Name, ifc.Name, ifc.Address, err)
			}
			var gw netip.Addr
			if ifc.Gateway != "" {
				if gw, err = netip.ParseAddr(ifc.Gateway); err != nil {
					return "", netip.Prefix{}, netip.Addr{}, fmt.Errorf("control plane: node %q: interface %q: gateway %q: %w", nd.Name, ifc.Name, ifc.Gateway, err)
				}
			}
			return ifc.Switch, p.Masked(), gw, nil
		}
	}
	return "", netip.Prefix{}, netip.Addr{}, errors.New("control plane: no node has an interface with an address on a switch to plug it in beside")
}

// freeAddress is the highest host address of p that no interface of the
// topology holds.
func (n *Network) freeAddress(p netip.Prefix) (netip.Addr, error) {
	used := map[netip.Addr]bool{}
	mark := func(ifs []Interface) {
		for _, ifc := range ifs {
			if a, err := netip.ParsePrefix(ifc.Address); err == nil {
				used[a.Addr()] = true
			}
			if g, err := netip.ParseAddr(ifc.Gateway); err == nil {
				used[g] = true
			}
		}
	}
	for _, nd := range n.Nodes {
		mark(nd.Spec.Interfaces)
	}
	for _, rt := range n.Routers {
		mark(rt.Spec.Interfaces)
	}
	if !p.Addr().Is4() || p.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("control plane: segment %s: want an IPv4 subnet of at least 4 addresses", p)
	}
	last := lastAddr(p)
	for a := last.Prev(); p.Contains(a) && a != p.Addr(); a = a.Prev() {
		if !used[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("control plane: segment %s has no free address", p)
}

// lastAddr is p's broadcast address.
func lastAddr(p netip.Prefix) netip.Addr {
	ip := net.IP(p.Masked().Addr().AsSlice())
	mask := net.CIDRMask(p.Bits(), 32)
	for i := range ip {
		ip[i] |= ^mask[i]
	}
	a, _ := netip.AddrFromSlice(ip)
	return a
}
