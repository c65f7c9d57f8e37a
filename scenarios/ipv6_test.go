package scenarios_test

// Claim (design §2, review note on confd): BIRD's IPv4 and IPv6 configs are
// rendered from one ownership policy, and the decision per pool is keyed on
// the pool's ipipMode, not on its IP version. So an IPv6 pool with ipipMode
// Never is a no-encap pool like any other: when BIRD owns no-encap it writes
// the IPv6 cluster routes, when the programmer owns no-encap it does, and
// workloads reach each other over IPv6 either way.
//
// The topology is the noencap shape with an IPv6 address on every node's
// uplink and a ULA pool with /122 blocks next to the IPv4 pool; every
// workload gets an address from each. The IPv4 routes are the positive
// control: the same owner must hold them too. Where the programmer owns
// them, both families' routes must have Felix's no-encap shape, onlink
// (the design is silent; Calico's route table sets it on every no-encap
// target), which forwarding alone cannot show on a connected subnet.

import (
	"fmt"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

// dualStackNoEncap is the noencap shape with an IPv6 pool and IPv6 uplinks.
func dualStackNoEncap() *topo.Topology {
	t := topo.NoEncap(3, 1)
	t.Name = "noencap-ipv6"
	t.Pools = append(t.Pools, topo.Pool{Name: "noencap-pool-v6", CIDR: "fd00:244::/112", IPIPMode: topo.IPIPNever, BlockSize: 122})
	for i := range t.Nodes {
		t.Nodes[i].Interfaces[0].Address6 = fmt.Sprintf("fd00:10::%d/64", 11+i)
	}
	return t
}

// endpoint6 is a workload as an IPv6 probe endpoint (harness.Endpoint uses
// the IPv4 address).
func endpoint6(wl *topo.Workload) report.Endpoint {
	return report.Endpoint{Name: wl.Name + "/v6", Netns: wl.Path, Iface: wl.Iface, Addr: wl.IPv6}
}

var _ = Describe("IPv6 no-encap pools follow the same ownership policy as IPv4", Label("noencap", "ipv6"), func() {
	DescribeTable("every remote IPv6 block is programmed by the no-encap owner, and IPv6 probes flow",
		func(ctx SpecContext, own ownership) {
			// 1. A dual-stack noencap cluster with `own` owning no-encap.
			c := scenariotest.StartClusterOn(ctx, dualStackNoEncap(), harness.Options{
				Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(own.felix)},
				BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(own.bgp)},
			})
			var v4, v6 int
			for _, n := range c.Nodes() {
				for _, b := range c.RemoteBlocks(n.Name) {
					if b.Addr().Is6() {
						v6++
					} else {
						v4++
					}
				}
			}
			Expect(v6).To(Equal(6), "guard: every node has two remote IPv6 blocks")
			Expect(v4).To(Equal(6), "guard: every node has two remote IPv4 blocks")

			// 2. Guard: the IPv6 BGP sessions (over the uplinks' IPv6
			// addresses) are up: WaitConverged covers every session.
			Expect(c.WaitConverged(ctx)).To(Succeed())
			for _, n := range c.Nodes() {
				sixes := 0
				for _, p := range n.Peers() {
					if p.Address.Is6() {
						sixes++
					}
				}
				Expect(sixes).To(Equal(2), "%s has an IPv6 session to each other node; its peers: %v", n.Name, n.Peers())
			}

			// 3. Every remote block, IPv4 (control) and IPv6, is programmed
			// by the no-encap owner via the uplink; exactly one route each.
			// The programmer's is Felix's no-encap shape, `via <node> dev
			// <uplink> onlink` (routetable defs.go: every no-encap target is
			// RTNH_F_ONLINK, at release-v3.33 6609dea5; see dataplane/calc).
			for _, n := range c.Nodes() {
				for _, b := range c.RemoteBlocks(n.Name) {
					m := judge.HaveClusterRoute(b).ProgrammedBy(own.owner).Via("eth0").Only()
					if own.owner == judge.ByProgrammer {
						m = m.Onlink()
					}
					Eventually(n).WithPolling(50*time.Millisecond).Should(m, "%s's route to %s", n.Name, b)
					rs, err := n.Routes(b)
					Expect(err).NotTo(HaveOccurred())
					exact := 0
					for _, r := range rs {
						if r.Dst == b {
							exact++
						}
					}
					Expect(exact).To(Equal(1), "%s has exactly one route to %s: %v", n.Name, b, rs)
				}
			}

			// 4. IPv6 probes between every pair of nodes' first workloads,
			// and IPv4 alongside; Probes returns once every flow delivers.
			var eps6 []report.Endpoint
			for _, nd := range c.Net.Nodes {
				wl := nd.Workloads[0]
				Expect(wl.IPv6.IsValid()).To(BeTrue(), "guard: workload %s has an IPv6 address", wl.Name)
				Expect(netip.MustParsePrefix("fd00:244::/112").Contains(wl.IPv6)).To(BeTrue(), "workload %s's IPv6 %s is in the IPv6 pool", wl.Name, wl.IPv6)
				eps6 = append(eps6, endpoint6(wl))
			}
			flows := append(probe.AllPairs(eps6...), harness.EveryNodePair(c.Net)...)
			probes, err := c.Probes(ctx, harness.ProbeOptions{Flows: flows, Rate: c.Machine.RateAtMost(200)})
			Expect(err).NotTo(HaveOccurred(), "IPv6 and IPv4 probes flow between every pair of workloads")
			Eventually(flowsDelivering(probes)).WithPolling(50 * time.Millisecond).Should(Succeed())
			rep, err := probes.Stop()
			Expect(err).NotTo(HaveOccurred())
			for _, f := range rep.Flows {
				Expect(f.Received).To(BeNumerically(">", 0), "flow %s delivered probes", f.Flow)
			}

			// 5. Figures: the probe table and the IPv6 routes as programmed.
			res := c.Result(fmt.Sprintf("IPv6 no-encap owned by %s", own.owner), rep)
			var routes []string
			for _, n := range c.Nodes() {
				for _, b := range c.RemoteBlocks(n.Name) {
					if !b.Addr().Is6() {
						continue
					}
					rs, _ := n.Routes(b)
					for _, r := range rs {
						routes = append(routes, n.Name+": "+r.String())
					}
				}
			}
			res.Figure("ipv6RemoteBlocks", float64(v6), results.KindSize)
			res.Notes = append(res.Notes, routes...)
			table := results.GapTable(rep) + "IPv6 cluster routes:\n"
			for _, r := range routes {
				table += "  " + r + "\n"
			}
			scenariotest.Record(fmt.Sprintf("IPv6 no-encap, owned by %s", own.owner), table, res)
		},
		Entry("BIRD owns no-encap (3.33 defaults)", ownership{config.EnabledIPIPOnly, config.EnabledNoEncapOnly, judge.ByBIRD}),
		Entry("the programmer owns no-encap (Felix Enabled, BGP Disabled)", ownership{config.Enabled, config.Disabled, judge.ByProgrammer}),
	)
})
