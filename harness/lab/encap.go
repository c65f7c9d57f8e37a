package lab

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/birdcage/birdcage/harness/encap"
	"github.com/birdcage/birdcage/internal/calico/datastore"
)

// EncapLayout is the lab as harness/encap needs it, to judge whether its
// IPIP flows crossed the underlay encapsulated: its nodes' underlay
// interfaces (the manifest's), their IPv4 addresses there and their
// workloads as found at attach, and the pools' IPIP modes from the lab's
// datastore. ok is false, with the reason, where the lab cannot say: no
// tunl0 on its nodes, or no datastore to read the pools' modes from.
func (l *Lab) EncapLayout(ctx context.Context) (_ encap.Layout, ok bool, why string) {
	if l.tunnel == "" {
		return encap.Layout{}, false, "the lab's nodes have no tunl0"
	}
	if l.M.Datastore == nil {
		return encap.Layout{}, false, "the lab's manifest names no datastore to read the pools' IPIP modes from"
	}
	c, err := (&datastore.DirStore{Dir: l.M.Datastore.Dir}).Read(ctx)
	if err != nil {
		return encap.Layout{}, false, err.Error()
	}
	lay := encap.Layout{Tunnel: l.tunnel}
	subnets := map[*encap.Node][]netip.Prefix{}
	for _, an := range l.Nodes {
		n := &encap.Node{Name: an.Name, Underlays: an.spec.Interfaces}
		for _, s := range l.before {
			if s.Netns != an.Netns {
				continue
			}
			for _, p := range underlayAddrs(s, an.spec.Interfaces) {
				n.Addrs = append(n.Addrs, p.Addr())
				subnets[n] = append(subnets[n], p.Masked())
			}
		}
		for _, w := range an.Workloads {
			n.Workloads = append(n.Workloads, w.Addr)
		}
		lay.Nodes = append(lay.Nodes, n)
	}
	pools := c.Pools
	lay.Encapsulates = func(src, dst *encap.Node, a netip.Addr) bool {
		for _, p := range pools {
			cidr, err := netip.ParsePrefix(p.CIDR)
			if err != nil || !cidr.Contains(a) {
				continue
			}
			switch p.IPIPMode {
			case datastore.EncapAlways:
				return true
			case datastore.EncapCrossSubnet:
				for _, sn := range subnets[src] {
					for _, d := range dst.Addrs {
						if sn.Contains(d) {
							return false
						}
					}
				}
				return true
			}
			return false
		}
		return false
	}
	return lay, true, ""
}

// underlayAddrs are the IPv4 addresses a snapshot found on the named
// interfaces ("addrs" lines: "eth0 10.10.0.10/24").
func underlayAddrs(s Snapshot, ifaces []string) []netip.Prefix {
	var out []netip.Prefix
	for _, line := range s.Parts["addrs"] {
		name, addr, found := strings.Cut(line, " ")
		if !found || !slices.Contains(ifaces, name) {
			continue
		}
		if p, err := netip.ParsePrefix(addr); err == nil && p.Addr().Is4() {
			out = append(out, p)
		}
	}
	return out
}
