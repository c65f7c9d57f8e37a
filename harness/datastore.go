package harness

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/topo"
)

// seedDatastore writes the cluster state a topology implies: its pools,
// nodes (with their uplinks), block affinities, workloads, the ToR peerings
// of a fabric, and the two configuration documents.
func seedDatastore(s datastore.Store, n *topo.Network, felix datastore.FelixConfiguration, bgp datastore.BGPConfiguration) error {
	for _, p := range n.Topology.Pools {
		mode := p.IPIPMode
		if mode == "" {
			mode = datastore.EncapNever
		}
		doc := datastore.IPPool{Name: p.Name, CIDR: p.CIDR, IPIPMode: mode, VXLANMode: datastore.EncapNever, BlockSize: p.BlockSize}
		if err := s.Put(datastore.KindIPPool, p.Name, doc); err != nil {
			return err
		}
	}
	fabric, reflectors := false, false
	for _, r := range n.Topology.Routers {
		if r.ASNumber != 0 {
			fabric = true
		}
	}
	for _, nd := range n.Nodes {
		doc := datastore.Node{Name: nd.Name, IPv4Address: nd.Address.String(), ASNumber: nd.Spec.ASNumber, RouteReflector: nd.Spec.RouteReflector}
		reflectors = reflectors || nd.Spec.RouteReflector
		for _, ifc := range nd.Spec.Interfaces {
			if ifc.Address6 != "" {
				doc.IPv6Address = ifc.Address6 // the first IPv6 uplink address
				break
			}
		}
		if nd.Spec.Loopback != "" {
			doc.RouterID = nd.Address.Addr().String()
		}
		// An uplink per address family: the programmer picks a no-encap
		// next hop's device by the uplink subnet that holds it, as Felix
		// learns the node's subnets from the kernel.
		for _, ifc := range nd.Spec.Interfaces {
			if ifc.Address != "" {
				doc.Uplinks = append(doc.Uplinks, datastore.Uplink{Interface: ifc.Name, Address: ifc.Address, Gateway: ifc.Gateway})
			}
			if ifc.Address6 != "" {
				doc.Uplinks = append(doc.Uplinks, datastore.Uplink{Interface: ifc.Name, Address: ifc.Address6})
			}
		}
		if err := s.Put(datastore.KindNode, nd.Name, doc); err != nil {
			return err
		}
		for _, b := range nd.Blocks {
			if err := s.Put(datastore.KindBlockAffinity, blockDocName(b.CIDR), datastore.BlockAffinity{CIDR: b.CIDR.String(), Node: nd.Name}); err != nil {
				return err
			}
		}
		for _, wl := range nd.Workloads {
			doc := datastore.Workload{Name: wl.Name, Node: nd.Name, Interface: wl.HostIface}
			for _, a := range []netip.Addr{wl.IPv4, wl.IPv6} {
				if a.IsValid() {
					doc.Addresses = append(doc.Addresses, netip.PrefixFrom(a, a.BitLen()).String())
				}
			}
			if err := s.Put(datastore.KindWorkload, wl.Name, doc); err != nil {
				return err
			}
		}
		// A node peers with every BGP-speaking router on its switches.
		for _, peer := range torPeers(n, nd) {
			if err := s.Put(datastore.KindBGPPeer, peer.Name, peer); err != nil {
				return err
			}
		}
	}
	if (fabric || reflectors) && bgp.NodeToNodeMeshEnabled == nil {
		off := false
		bgp.NodeToNodeMeshEnabled = &off // nodes peer with their ToRs, or their reflectors, instead
	}
	if err := s.Put(datastore.KindFelixConfiguration, datastore.SingletonName, felix); err != nil {
		return err
	}
	return s.Put(datastore.KindBGPConfiguration, datastore.SingletonName, bgp)
}

// torPeers lists a node's sessions to BGP-speaking routers that share one
// of its switches.
func torPeers(n *topo.Network, nd *topo.NodeNS) []datastore.BGPPeer {
	var out []datastore.BGPPeer
	for _, r := range n.Routers {
		if r.Spec.ASNumber == 0 {
			continue
		}
		for _, ri := range r.Spec.Interfaces {
			for _, ni := range nd.Spec.Interfaces {
				if ri.Switch == "" || ri.Switch != ni.Switch {
					continue
				}
				out = append(out, datastore.BGPPeer{
					Name:     nd.Name + "-" + r.Name,
					Node:     nd.Name,
					PeerIP:   strings.Split(ri.Address, "/")[0],
					ASNumber: r.Spec.ASNumber,
					Plane:    r.Spec.Plane,
				})
			}
		}
	}
	return out
}

// blockDocName turns a block CIDR into a document name ("10.244.0.64-26").
func blockDocName(p netip.Prefix) string {
	return strings.NewReplacer("/", "-", ":", "_").Replace(p.String())
}

// routerNeighbours lists a BGP-speaking router's sessions: every node
// on its switches, and the routers at the far end of its point-to-point
// links.
func routerNeighbours(n *topo.Network, r *topo.RouterNS) ([]neighbour, error) {
	var out []neighbour
	for _, ri := range r.Spec.Interfaces {
		local := strings.Split(ri.Address, "/")[0]
		switch {
		case ri.Switch != "":
			for _, nd := range n.Nodes {
				for _, ni := range nd.Spec.Interfaces {
					if ni.Switch == ri.Switch {
						as := nd.Spec.ASNumber
						if as == 0 {
							as = datastore.DefaultASNumber
						}
						out = append(out, neighbour{name: nd.Name, addr: strings.Split(ni.Address, "/")[0], as: as, source: local})
					}
				}
			}
		case ri.Peer != "":
			owner, ifname, _ := strings.Cut(ri.Peer, ":")
			peer, ok := n.Router(owner)
			if !ok {
				return nil, fmt.Errorf("router %s: peer %s is not a router", r.Name, owner)
			}
			if peer.Spec.ASNumber == 0 {
				continue
			}
			for _, pi := range peer.Spec.Interfaces {
				if pi.Name == ifname {
					out = append(out, neighbour{name: peer.Name, addr: strings.Split(pi.Address, "/")[0], as: peer.Spec.ASNumber, source: local})
				}
			}
		}
	}
	return out, nil
}

type neighbour struct {
	name, addr, source string
	as                 int
}
