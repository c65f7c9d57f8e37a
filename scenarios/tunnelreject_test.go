package scenarios_test

// Claim (design §2, confd + BIRD): the export filter towards BGP peers
// rejects routes leaving through a Calico tunnel device, and its *.cali /
// *.calico arms (VXLAN, WireGuard, which Felix always owns) are
// unconditional — only the tunl0 arm depends on who owns IPIP. So for every
// ownership pair a kernel route via a *.cali or *.calico device, which BIRD
// learns (kernel protocol `learn`), is not exported to any iBGP peer.
//
// Natively, on no-encap: node-1 gets two devices named as Calico
// names them (wireguard.cali, vxlan.calico) and a third with an ordinary
// name, and a proto static /32 route via each to an address inside the pool
// but outside every block. For each of the 36 field pairs (the four values,
// unset and unknown, on both sides) set live: the control route (ordinary
// device) is exported to every iBGP peer — so the route was learned and the
// filter reaches the pool accept — and the two tunnel routes to none.
// Guard: BIRD has learned all three from the kernel.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// tunnelRejectRoute is one learned route the spec plants on node-1.
type tunnelRejectRoute struct {
	device   string
	dst      netip.Prefix
	rejected bool // by the design's unconditional arms
}

var _ = Describe("Tunnel-route reject towards iBGP peers", Label("noencap", "tunnelreject", "claim6"), func() {
	It("never exports a route via a *.cali or *.calico device to an iBGP peer, for every ownership pair, while an ordinary route is exported", func(ctx SpecContext) {
		const rel = config.R333
		c := scenariotest.StartCluster(ctx, "noencap", harness.Options{Release: rel, RouteRefreshInterval: time.Second, Timers: confd.Timers{ScanTime: 1}})
		n1 := c.Node("node-1")
		routes := []tunnelRejectRoute{
			{device: "wireguard.cali", dst: netip.MustParsePrefix("10.244.255.1/32"), rejected: true},
			{device: "vxlan.calico", dst: netip.MustParsePrefix("10.244.255.2/32"), rejected: true},
			{device: "plain0", dst: netip.MustParsePrefix("10.244.255.3/32")},
		}
		// Guard: inside the pool, outside every block.
		pool := netip.MustParsePrefix(c.Net.Topology.Pools[0].CIDR)
		for _, r := range routes {
			Expect(pool.Contains(r.dst.Addr())).To(BeTrue(), "guard: %s is inside pool %s", r.dst, pool)
			for _, nd := range c.Net.Nodes {
				for _, b := range nd.Blocks {
					Expect(b.CIDR.Contains(r.dst.Addr())).To(BeFalse(), "guard: %s is outside %s's block %s", r.dst, nd.Name, b.CIDR)
				}
			}
		}
		Expect(plantDeviceRoutes(n1, routes)).To(Succeed())

		var ibgp []netip.Addr
		for _, p := range n1.Peers() {
			if p.Internal && p.Address.Is4() {
				ibgp = append(ibgp, p.Address)
			}
		}
		Expect(ibgp).To(HaveLen(2), "guard: node-1 has two IPv4 iBGP peers; its peers: %v", n1.Peers())
		for _, r := range routes {
			Eventually(func() (bool, error) { return learnedFromKernel(ctx, n1, r.dst) }).
				WithPolling(100*time.Millisecond).Should(BeTrue(), "guard: node-1's BIRD learns %s via %s from the kernel", r.dst, r.device)
		}

		var table strings.Builder
		prevBGP := ""
		pairs := 0
		for _, felixRaw := range matrixValues {
			for _, bgpRaw := range matrixValues {
				pair := fmt.Sprintf("Felix=%s BGP=%s", rawName(felixRaw), rawName(bgpRaw))
				By(pair)
				setPairLive(ctx, c, felixRaw, bgpRaw, bgpRaw != prevBGP, rel)
				prevBGP = bgpRaw
				conf, err := birdConfig(n1)
				Expect(err).NotTo(HaveOccurred())
				for _, arm := range []string{`ifname ~ "*.cali"`, `ifname ~ "*.calico"`} {
					Expect(conf).To(ContainSubstring(arm), "%s: node-1's BIRD config lacks the unconditional arm %s", pair, arm)
				}
				for _, peer := range ibgp {
					for _, r := range routes {
						if !r.rejected {
							Eventually(n1).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(30*time.Second)).WithPolling(100*time.Millisecond).
								Should(judge.BeExportedTo(r.dst, peer), "%s: control: node-1 exports %s (via %s) to %s", pair, r.dst, r.device, peer)
						}
					}
					for _, r := range routes {
						if r.rejected {
							Expect(n1).NotTo(judge.BeExportedTo(r.dst, peer), "%s: node-1 exports %s, a route via %s, to its iBGP peer %s", pair, r.dst, r.device, peer)
						}
					}
				}
				pairs++
				fmt.Fprintf(&table, "%-50s control exported to %d peers; *.cali and *.calico routes to none\n", pair, len(ibgp))
			}
		}
		Expect(pairs).To(Equal(len(matrixValues) * len(matrixValues)))
		res := c.Result("tunnel-route reject arms (*.cali, *.calico) unconditional", nil)
		res.Figure("pairs", float64(pairs), results.KindSize)
		res.Figure("iBGPPeers", float64(len(ibgp)), results.KindSize)
		scenariotest.Record("the *.cali / *.calico arms of the iBGP tunnel-route reject, every ownership pair", table.String(), res)
	})
})

// plantDeviceRoutes creates a device per route in n's namespace and a
// proto static route via it (all removed with the namespace).
func plantDeviceRoutes(n *harness.Node, routes []tunnelRejectRoute) error {
	h, err := n.NS.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	for i, r := range routes {
		// A veth pair with both ends here (this kernel has no dummy
		// driver): up on both ends, so it has carrier like a real
		// tunnel device.
		peer := fmt.Sprintf("bcpeer%d", i)
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: r.device}, PeerName: peer}); err != nil {
			return fmt.Errorf("add veth %s: %w", r.device, err)
		}
		var l netlink.Link
		for _, name := range []string{peer, r.device} {
			x, err := h.LinkByName(name)
			if err != nil {
				return err
			}
			if err := h.LinkSetUp(x); err != nil {
				return err
			}
			l = x
		}
		err = h.RouteAdd(&netlink.Route{
			LinkIndex: l.Attrs().Index,
			Dst:       &net.IPNet{IP: r.dst.Addr().AsSlice(), Mask: net.CIDRMask(r.dst.Bits(), 32)},
			Protocol:  unix.RTPROT_STATIC,
			Scope:     netlink.SCOPE_LINK,
		})
		if err != nil {
			return fmt.Errorf("route %s dev %s: %w", r.dst, r.device, err)
		}
	}
	return nil
}

// learnedFromKernel reports whether n's BIRD has p from its IPv4 kernel
// protocol.
func learnedFromKernel(ctx context.Context, n *harness.Node, p netip.Prefix) (bool, error) {
	rs, err := n.BIRD.Client().Routes(ctx, p.String())
	if err != nil {
		return false, err
	}
	for _, r := range rs {
		if r.Prefix == p && r.Protocol == "kernel4" {
			return true, nil
		}
	}
	return false, nil
}
