package harness

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/birdcage/birdcage/internal/calico/config"

	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// Datastore is the cluster's datastore as an operator and IPAM change it:
// each write marks its event first (the actions' shape, actions.go), and
// confd and the programmers react to it as they would to Calico's.
type Datastore struct{ c *Cluster }

// Datastore is the cluster's datastore.
func (c *Cluster) Datastore() *Datastore { return &Datastore{c} }

// SetBGPConfig writes BGPConfiguration; confd re-renders and reconfigures
// every running BIRD.
func (d *Datastore) SetBGPConfig(ctx context.Context, b datastore.BGPConfiguration) (results.Event, error) {
	e := d.c.Mark("SetBGPConfig(programClusterRoutes=" + orUnset(config.ProgramClusterRoutes(b.ProgramClusterRoutes)) + ")")
	return e, d.c.Store.Put(datastore.KindBGPConfiguration, datastore.SingletonName, b)
}

// SetFelixConfig writes FelixConfiguration; programmers whose restart
// fields changed exit and are restarted by their supervisors. An unset
// routeRefreshInterval keeps the cluster's.
func (d *Datastore) SetFelixConfig(ctx context.Context, f datastore.FelixConfiguration) (results.Event, error) {
	if f.RouteRefreshInterval == "" {
		f.RouteRefreshInterval = d.c.opts.RouteRefreshInterval.String()
	}
	e := d.c.Mark("SetFelixConfig(programClusterRoutes=" + orUnset(config.ProgramClusterRoutes(f.ProgramClusterRoutes)) + ")")
	return e, d.c.Store.Put(datastore.KindFelixConfiguration, datastore.SingletonName, f)
}

// DisableBGP marks BGP disabled in the datastore: a BIRD that exits is not
// started again by UpgradeNode (Calico's networking backend "none").
func (d *Datastore) DisableBGP(ctx context.Context) (results.Event, error) {
	return d.UpdateBGPConfig(ctx, "DisableBGP", func(b *datastore.BGPConfiguration) {
		off := false
		b.BGPEnabled = &off
	})
}

// UpdateBGPConfig changes BGPConfiguration as an operator's edit does: it
// reads the stored document, applies edit and writes it back (confd
// re-renders and reconfigures every running BIRD). what names the change
// in the event.
func (d *Datastore) UpdateBGPConfig(ctx context.Context, what string, edit func(*datastore.BGPConfiguration)) (results.Event, error) {
	cl, err := d.c.Store.Read(ctx)
	if err != nil {
		return results.Event{}, err
	}
	b := cl.BGP
	edit(&b)
	e := d.c.Mark(what)
	return e, d.c.Store.Put(datastore.KindBGPConfiguration, datastore.SingletonName, b)
}

// Read is what the cluster's datastore holds now, as confd and the
// programmers read it: for a spec's guards ("the datastore holds what the
// step wrote"), never to compute what the design expects.
func (d *Datastore) Read(ctx context.Context) (*datastore.Cluster, error) {
	return d.c.Store.Read(ctx)
}

// PutIPPool creates or replaces an IP pool.
func (d *Datastore) PutIPPool(ctx context.Context, name string, p datastore.IPPool) (results.Event, error) {
	e := d.c.Mark(fmt.Sprintf("PutIPPool(%s %s ipipMode=%s)", name, p.CIDR, orDefault(p.IPIPMode, "Never")))
	return e, d.c.Store.Put(datastore.KindIPPool, name, p)
}

// DeletePool deletes an IP pool.
func (d *Datastore) DeletePool(ctx context.Context, name string) (results.Event, error) {
	e := d.c.Mark("DeletePool(" + name + ")")
	return e, d.c.Store.Delete(datastore.KindIPPool, name)
}

// PutWorkload creates or replaces a workload endpoint in the datastore (the
// programmer routes to it; its interface is the scenario's business).
func (d *Datastore) PutWorkload(ctx context.Context, w datastore.Workload) (results.Event, error) {
	e := d.c.Mark(fmt.Sprintf("PutWorkload(%s on %s)", w.Name, w.Node))
	return e, d.c.Store.Put(datastore.KindWorkload, w.Name, w)
}

// ReleaseBlock deletes a block's affinity, as IPAM does when a node gives a
// block back.
func (d *Datastore) ReleaseBlock(ctx context.Context, cidr netip.Prefix) (results.Event, error) {
	e := d.c.Mark("ReleaseBlock(" + cidr.String() + ")")
	return e, d.c.Store.Delete(datastore.KindBlockAffinity, blockDocName(cidr))
}

// MoveBlock re-assigns an IPAM block to another node in the datastore, as
// IPAM does when a block's affinity moves: the old owner's confd stops
// advertising it, the new owner's starts, and every other node's route to
// the block gets a new next hop. The block must be affine to some node now
// and to must be a node of the cluster.
func (d *Datastore) MoveBlock(ctx context.Context, cidr netip.Prefix, to string) (results.Event, error) {
	d.c.Node(to) // panics on a node the topology lacks
	cl, err := d.c.Store.Read(ctx)
	if err != nil {
		return results.Event{}, err
	}
	from := ""
	for _, b := range cl.Blocks {
		if p, err := netip.ParsePrefix(b.CIDR); err == nil && p == cidr {
			from = b.Node
		}
	}
	if from == "" {
		return results.Event{}, fmt.Errorf("move block %s: no node has it in the datastore", cidr)
	}
	e := d.c.Mark(fmt.Sprintf("MoveBlock(%s %s→%s)", cidr, from, to))
	return e, d.c.Store.Put(datastore.KindBlockAffinity, blockDocName(cidr), datastore.BlockAffinity{CIDR: cidr.String(), Node: to})
}

// BlockNode is the node a block is affine to in the datastore now ("" when
// none is).
func (d *Datastore) BlockNode(ctx context.Context, cidr netip.Prefix) (string, error) {
	cl, err := d.c.Store.Read(ctx)
	if err != nil {
		return "", err
	}
	for _, b := range cl.Blocks {
		if p, err := netip.ParsePrefix(b.CIDR); err == nil && p == cidr {
			return b.Node, nil
		}
	}
	return "", nil
}

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
