// With BIRD owning an IPIP pool, the kernel filter's tunnel arm (onlink,
// ifname "tunl0", gw = bgp_next_hop, in that order) must give
// `via <node> dev tunl0 proto bird onlink`. Where the kernel has ipip, every
// namespace has its own tunl0 and the test uses it; elsewhere tunl0 is a
// veth of that name. Either way the route's shape is what is checked, not
// encapsulation.
package bird_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/vishvananda/netlink"
)

func TestIPIPTunnelRouteShape(t *testing.T) {
	requireRoot(t)
	l := newLab(t)
	c := clusterNodes(2, false)
	c.Pools = []datastore.IPPool{{Name: "ipip", CIDR: "192.168.0.0/16", IPIPMode: datastore.EncapAlways, VXLANMode: datastore.EncapNever}}
	c.Blocks = []datastore.BlockAffinity{{CIDR: "192.168.1.0/26", Node: "n1"}, {CIDR: "192.168.2.0/26", Node: "n2"}}
	c.BGP.ProgramClusterRoutes = string(config.Enabled)
	for _, nd := range c.Nodes {
		h := l.handle(nd.Name)
		devs := []string{"tunl0"}
		if lk, err := h.LinkByName("tunl0"); err != nil || lk.Type() != "ipip" {
			// No ipip here: a stand-in tunl0, a veth pair in the node's namespace.
			if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "tunl0"}, PeerName: "tunl0-peer"}); err != nil {
				t.Fatal(err)
			}
			devs = append(devs, "tunl0-peer")
		}
		for _, n := range devs {
			lk, err := h.LinkByName(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.LinkSetUp(lk); err != nil {
				t.Fatal(err)
			}
		}
		h.Close()
	}
	nodes := buildMesh(t, l, c, config.R333)
	if len(nodes[0].ren.Warnings) != 1 {
		t.Fatalf("guard: BIRD programs an IPIP pool in 3.33, want one deprecation warning, got %q", nodes[0].ren.Warnings)
	}
	startAll(t, []*bird.Instance{nodes[0].bird, nodes[1].bird}, 30*time.Second)
	eventually(t, 10*time.Second, "n1 tunnel route to n2's block", func() string {
		r, ok := l.birdRoutes("n1", netlink.FAMILY_V4)["192.168.2.0/26"]
		if !ok {
			return "no proto bird route"
		}
		dev := l.ifName("n1", r.LinkIndex)
		if r.Gw == nil || r.Gw.String() != "10.0.0.12" || dev != "tunl0" || r.Flags&int(netlink.FLAG_ONLINK) == 0 {
			return fmt.Sprintf("route via %v dev %s flags %#x, want via 10.0.0.12 dev tunl0 onlink", r.Gw, dev, r.Flags)
		}
		return ""
	})
	// Own block stays a plain blackhole, not a tunnel route.
	r, ok := l.birdRoutes("n1", netlink.FAMILY_V4)["192.168.1.0/26"]
	if !ok || r.Type != 6 /* RTN_BLACKHOLE */ {
		t.Errorf("n1's own block: %+v (present %v), want a proto bird blackhole", r, ok)
	}
}
