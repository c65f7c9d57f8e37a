package scenarios_test

// Claim (Calico's code, where the design is older than the release): the
// tunl0 arm of the iBGP tunnel-route reject exists in 3.33 only, and there
// only while the programmer owns IPIP. confd added it with
// IBGPExportFilterForTunnelRoutes (bgp_processor.go @ 6609dea54713 on
// release-v3.33); release-v3.31 (3cdeae8f7ace) and release-v3.32
// (de60d98e97a7) have no tunnel arm but the *.cali / *.calico ones. So on
// 3.31 and 3.32 a kernel route via tunl0, which BIRD learns (kernel protocol
// `learn`), is exported to every iBGP peer, while on 3.33 with the
// programmer owning IPIP it goes to none.
//
// The renderer's unit test holds the text; this holds the effect on a
// running cluster, so a render that added the arm to 3.31 or 3.32 fails
// here. Node-1 of an IPIP cluster gets a proto static /32 via tunl0 and one
// via an ordinary device (the control, exported in every release), both
// inside the pool and outside every block. Guards: BIRD learned both from
// the kernel; node-1 has its two iBGP peers; on 3.33 (the positive control
// for "not exported") the same route is held back while the control goes.

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

// tunl0ArmCase is one release with the programmer owning IPIP as far as that
// release lets it, and whether its render has the tunl0 arm.
type tunl0ArmCase struct {
	release    config.Release
	felix, bgp config.ProgramClusterRoutes
	arm        bool
}

var _ = Describe("The iBGP tunl0 reject per release", Label("ipip", "tunnelreject", "readvertise"), func() {
	DescribeTable("a kernel route via tunl0 goes to the iBGP peers on 3.31 and 3.32 (no tunl0 arm) and to none on 3.33 with the programmer owning IPIP",
		func(ctx SpecContext, tc tunl0ArmCase) {
			// 1. An IPIP cluster of the release.
			c := scenariotest.StartCluster(ctx, "ipip", harness.Options{Release: tc.release, RouteRefreshInterval: time.Second, Timers: confd.Timers{ScanTime: 1},
				Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(tc.felix)},
				BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(tc.bgp)},
			})
			n1 := c.Node("node-1")
			pool := netip.MustParsePrefix(c.Net.Topology.Pools[0].CIDR)
			routes := []tunnelRejectRoute{
				{device: topo.TunnelDevice, dst: lastAddrIn(pool, 1), rejected: tc.arm},
				{device: "plain0", dst: lastAddrIn(pool, 2)},
			}
			for _, r := range routes {
				for _, nd := range c.Net.Nodes {
					for _, b := range nd.Blocks {
						Expect(b.CIDR.Contains(r.dst.Addr())).To(BeFalse(), "guard: %s is outside %s's block %s", r.dst, nd.Name, b.CIDR)
					}
				}
			}

			// 2. The routes, planted where BIRD learns them.
			Expect(plantTunl0Route(n1, routes[0].dst, c.Node("node-3").NS.Address.Addr())).To(Succeed())
			Expect(plantDeviceRoutes(n1, routes[1:])).To(Succeed())
			for _, r := range routes {
				Eventually(func() (bool, error) { return learnedFromKernel(ctx, n1, r.dst) }).
					WithPolling(100*time.Millisecond).Should(BeTrue(), "guard: node-1's BIRD learns %s via %s from the kernel", r.dst, r.device)
			}
			var ibgp []netip.Addr
			for _, p := range n1.Peers() {
				if p.Internal && p.Address.Is4() {
					ibgp = append(ibgp, p.Address)
				}
			}
			Expect(ibgp).To(HaveLen(3), "guard: node-1 has three IPv4 iBGP peers (the mesh); its peers: %v", n1.Peers())

			// 3. The claim, per iBGP peer: the control always goes; the
			// tunl0 route goes exactly where the release has no arm.
			var table strings.Builder
			for _, peer := range ibgp {
				Eventually(n1).WithPolling(100*time.Millisecond).
					Should(judge.BeExportedTo(routes[1].dst, peer), "control: node-1 exports %s (via plain0) to %s", routes[1].dst, peer)
				if tc.arm {
					Consistently(n1).WithTimeout(scenariotest.Machine.Wait(3*time.Second)).WithPolling(200*time.Millisecond).
						ShouldNot(judge.BeExportedTo(routes[0].dst, peer), "Calico %s, the programmer owning IPIP: node-1 exports %s, a route via tunl0, to its iBGP peer %s; the tunl0 arm should reject it", tc.release, routes[0].dst, peer)
					fmt.Fprintf(&table, "%-12s %s via tunl0: not exported (the tunl0 arm); control exported\n", peer, routes[0].dst)
				} else {
					Eventually(n1).WithPolling(100*time.Millisecond).
						Should(judge.BeExportedTo(routes[0].dst, peer), "Calico %s has no tunl0 arm: node-1 should export %s, a route via tunl0, to its iBGP peer %s", tc.release, routes[0].dst, peer)
					fmt.Fprintf(&table, "%-12s %s via tunl0: exported (no tunl0 arm in %s); control exported\n", peer, routes[0].dst, tc.release)
				}
			}
			// 4. The text agrees with the effect (checked after it, so a
			// render that gained or lost the arm fails on what BIRD did).
			conf, err := birdConfig(n1)
			Expect(err).NotTo(HaveOccurred())
			tunl0Arm := fmt.Sprintf(`ifname ~ "%s"`, topo.TunnelDevice)
			Expect(strings.Contains(conf, tunl0Arm)).To(Equal(tc.arm), "Calico %s's render has the tunl0 arm: want %v", tc.release, tc.arm)

			res := c.Result(fmt.Sprintf("the iBGP tunl0 reject, Calico %s", tc.release), nil)
			res.Figure("iBGPPeers", float64(len(ibgp)), results.KindSize)
			res.Notes = append(res.Notes, fmt.Sprintf("Felix=%s BGP=%s; tunl0 arm rendered: %v", rawName(string(tc.felix)), rawName(string(tc.bgp)), tc.arm))
			scenariotest.Record(fmt.Sprintf("the iBGP tunl0 reject on a running cluster, Calico %s (arm: %v)", tc.release, tc.arm), table.String(), res)
		},
		// 3.31: no BGPConfiguration field; Felix's Enabled is the nearest
		// it has to the programmer owning IPIP, and the render ignores it.
		Entry("3.31: no tunl0 arm", tunl0ArmCase{config.R331, config.Enabled, "", false}),
		Entry("3.32, the programmer owning every pool: no tunl0 arm", tunl0ArmCase{config.R332, config.Enabled, config.Disabled, false}),
		Entry("3.33, the programmer owning IPIP: the tunl0 arm (positive control)", tunl0ArmCase{config.R333, config.EnabledIPIPOnly, config.EnabledNoEncapOnly, true}),
	)
})

// lastAddrIn is the i-th address from the top of p, as a /32: an address of
// the pool that no node's block (allocated from the bottom) covers.
func lastAddrIn(p netip.Prefix, i int) netip.Prefix {
	b := p.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= (1<<(32-p.Bits()) - 1)
	v -= uint32(i)
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 32)
}

// plantTunl0Route adds a proto static /32 via node n's tunl0, onlink to
// another node's underlay address, as a hand-added tunnel route would be
// (removed with the namespace).
func plantTunl0Route(n *harness.Node, dst netip.Prefix, gw netip.Addr) error {
	return addFixtureRoute(n, dst, gw, topo.TunnelDevice, kroute.ProtoStatic)
}
