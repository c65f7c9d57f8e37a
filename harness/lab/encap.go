package lab

import (
	"context"
	"fmt"
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
	for _, p := range c.Pools {
		if cidr, err := netip.ParsePrefix(p.CIDR); err == nil {
			lay.Pools = append(lay.Pools, encap.Pool{CIDR: cidr, IPIPMode: p.IPIPMode})
		}
	}
	for _, an := range l.Nodes {
		n := &encap.Node{Name: an.Name, Underlays: an.spec.Interfaces}
		for _, s := range l.before {
			if s.Netns != an.Netns {
				continue
			}
			for _, p := range underlayAddrs(s, an.spec.Interfaces) {
				n.Addrs = append(n.Addrs, p.Addr())
				n.Subnets = append(n.Subnets, p.Masked())
			}
		}
		if len(n.Addrs) == 0 {
			return encap.Layout{}, false, fmt.Sprintf("node %s had no IPv4 address on %s at attach", an.Name, strings.Join(an.spec.Interfaces, ", "))
		}
		for _, w := range an.Workloads {
			n.Workloads = append(n.Workloads, w.Addr)
		}
		lay.Nodes = append(lay.Nodes, n)
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
