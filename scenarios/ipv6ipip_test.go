package scenarios_test

// Claim (Calico, read at release-v3.31 3cdeae8f, v3.32 de60d98e, v3.33
// 6609dea5): Calico never sends an IPv6 cluster route through tunl0.
// confd decides ownership per pool by its ipipMode, not by its IP version,
// but sets the tunnel (krt_tunnel) for IPv4 only (bgp_processor.go
// processIPPool, `forProgrammingKernel && ipVersion == 4`; the 3.31 IPv6
// template bird6_ipam.cfg.template has no tunnel at all); Felix starts its
// IPIP manager for IPv4 only, and its IPv6 route manager, the no-encap one,
// takes an IPIP pool's route only when it is same-subnet under CrossSubnet
// (route_mgr.go noEncapRoute). Calico's API refuses IPv6 IPIP pools; the
// datastore can still hold one, and this is what each side does with it.
//
// The cluster is the dual-stack no-encap shape plus an IPv4 IPIP pool (so
// every node has an up tunl0 for a route to take) and a second IPv6 pool,
// ipip-pool-v6, whose ipipMode is set in the datastore (birdcage's topology
// model refuses IPv6 IPIP pools, so the pool is built as no-encap and its
// ipipMode written as an operator would). Judged per entry, on every node,
// for every other node's ipip-pool-v6 block:
//
//   - 3.33 defaults, ipipMode Always: BIRD's kernel6 filter rejects the pool
//     (the programmer owns IPIP) and the programmer writes nothing (Felix's
//     IPv6 manager takes no Always IPIP route): no route at all.
//   - 3.33 defaults, ipipMode CrossSubnet, every node on one subnet: the
//     programmer writes the no-encap route, `via <node's IPv6> dev eth0
//     onlink`, its protocol.
//   - the deprecated pair with BIRD owning IPIP (Felix EnabledNoEncapOnly,
//     BGP EnabledIPIPOnly), ipipMode Always: BIRD exports the block to
//     kernel6 and writes it via the node's IPv6 address out of eth0; every
//     render warns, naming ipip-pool-v6 (confd warns for any IPIP pool BIRD
//     programs, whatever its family).
//
// In every entry no route to an IPv6 IPIP block is ever via tunl0, and
// BIRD never exports one to kernel6 via tunl0.
//
// Guard: every node's BIRD learns every other node's ipip-pool-v6 block over
// BGP (advertising does not depend on who programs), every node has an up
// tunl0, and where the entry expects a route, one exists (so "never via
// tunl0" is not vacuous). Positive control: the IPv4 IPIP pool's blocks are
// routed via tunl0 by the same owner in the same cluster, and the IPv6
// no-encap pool's blocks via eth0 by the no-encap owner.

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

const (
	ipv6IPIPPoolName = "ipip-pool-v6"
	ipv6IPIPPoolCIDR = "fd00:245::/112"
	ipv4IPIPPoolName = "ipip-pool-v4"
	ipv4IPIPPoolCIDR = "10.245.0.0/16"
)

type ipv6IPIPCase struct {
	felix, bgp config.ProgramClusterRoutes
	mode       string // the IPv6 pool's ipipMode (datastore.EncapAlways, EncapCrossSubnet)
	birdIPIP   bool   // BIRD owns the IPIP class (per §1's value table)
	// routed: the owner writes a route to every remote IPv6 IPIP block
	// (out of eth0); otherwise no route at all.
	routed bool
}

var _ = Describe("An IPv6 pool with ipipMode set is never routed through tunl0", Label("noencap", "ipv6", "ipip", "claim5"), func() {
	DescribeTable("its owner routes it out of the uplink like no-encap, or not at all, as Calico does",
		func(ctx SpecContext, tc ipv6IPIPCase) {
			By("1. dual-stack no-encap plus an IPv4 IPIP pool; the second IPv6 pool's ipipMode set in the datastore")
			v := startIPv6IPIP(ctx, tc)
			By("2. rendered: every node's BIRD runs the config in which the pool is of class ipip")
			v.expectRendered(ctx)
			By("3. guard: every other node's ipip-pool-v6 block is learned over BGP on every node")
			v.expectLearned(ctx)
			var table strings.Builder
			for _, n := range v.c.Nodes() {
				By("4. positive controls on " + n.Name + ": the IPv4 IPIP pool via tunl0, the IPv6 no-encap pool via eth0")
				v.expectControls(n)
				By("5. the claim on " + n.Name + ": the IPv6 IPIP pool's routes, never via tunl0")
				v.expectNeverViaTunnel(ctx, n, &table)
			}
			By("6. the deprecation warning: in every render after the change exactly when BIRD owns the IPIP class")
			v.expectWarnings()
			By("7. figures: what became of the IPv6 IPIP blocks")
			v.recordFigures(table.String())
		},
		Entry("3.33 defaults, ipipMode Always: BIRD rejects it and the programmer, like Felix, writes none", ipv6IPIPCase{mode: datastore.EncapAlways}),
		Entry("3.33 defaults, ipipMode CrossSubnet on one subnet: the programmer writes it out of eth0, onlink", ipv6IPIPCase{mode: datastore.EncapCrossSubnet, routed: true}),
		Entry("deprecated pair, BIRD owns IPIP, ipipMode Always: BIRD writes it out of eth0 and warns", ipv6IPIPCase{felix: config.EnabledNoEncapOnly, bgp: config.EnabledIPIPOnly, mode: datastore.EncapAlways, birdIPIP: true, routed: true}),
	)
})

// exportedRoutesTo lists n's BIRD's exports of exactly p to protocol.
func exportedRoutesTo(ctx SpecContext, n *harness.Node, protocol string, p netip.Prefix) []bird.Route {
	GinkgoHelper()
	rs, err := n.ExportedRoutes(ctx, protocol)
	Expect(err).NotTo(HaveOccurred(), "birdc show route export %s on %s", protocol, n.Name)
	var out []bird.Route
	for _, r := range rs {
		if r.Prefix == p {
			out = append(out, r)
		}
	}
	return out
}

// exportedTo reports whether n's BIRD exports exactly p to protocol.
func exportedTo(ctx SpecContext, n *harness.Node, protocol string, p netip.Prefix) bool {
	GinkgoHelper()
	rs, err := n.ExportedRoutes(ctx, protocol)
	Expect(err).NotTo(HaveOccurred(), "birdc show route export %s on %s", protocol, n.Name)
	for _, r := range rs {
		if r.Prefix == p {
			return true
		}
	}
	return false
}

// ipv6IPIP is one entry of the IPv6 IPIP spec: the cluster, each node's
// remote blocks per pool and what the pool change started.
type ipv6IPIP struct {
	tc                        ipv6IPIPCase
	c                         *harness.Cluster
	renders                   map[string]int
	changed                   results.Event
	ipipV6, noEncapV6, ipipV4 map[string][]netip.Prefix // each node's remote blocks
	addr6                     map[netip.Prefix]netip.Addr
	owner                     judge.Owner
	ownerName                 string
}

// startIPv6IPIP is step 1: dual-stack no-encap plus an IPv4 IPIP pool,
// with a second IPv6 pool whose ipipMode is then set in the datastore.
func startIPv6IPIP(ctx SpecContext, tc ipv6IPIPCase) *ipv6IPIP {
	GinkgoHelper()
	v := &ipv6IPIP{tc: tc, renders: map[string]int{}, owner: judge.ByProgrammer, ownerName: "the programmer"}
	if tc.birdIPIP {
		v.owner, v.ownerName = judge.ByBIRD, "BIRD"
	}
	t := dualStackNoEncap()
	t.Name = "ipv6-ipip"
	t.Pools = append(t.Pools,
		topo.Pool{Name: ipv4IPIPPoolName, CIDR: ipv4IPIPPoolCIDR, IPIPMode: topo.IPIPAlways, BlockSize: 26},
		topo.Pool{Name: ipv6IPIPPoolName, CIDR: ipv6IPIPPoolCIDR, IPIPMode: topo.IPIPNever, BlockSize: 122})
	c := scenariotest.StartClusterOn(ctx, t, harness.Options{
		Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(tc.felix)},
		BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(tc.bgp)},
	})
	v.c = c
	for _, nd := range c.Net.Nodes {
		Expect(nd.Tunnel).To(BeTrue(), "guard: %s has an up %s for a route to take", nd.Name, topo.TunnelDevice)
	}
	for _, n := range c.Nodes() {
		v.renders[n.Name] = n.Renders()
	}
	v.changed = scenariotest.Act(c.Datastore().PutIPPool(ctx, ipv6IPIPPoolName, datastore.IPPool{
		Name: ipv6IPIPPoolName, CIDR: ipv6IPIPPoolCIDR, IPIPMode: tc.mode, VXLANMode: datastore.EncapNever, BlockSize: 122,
	}))
	cl, err := c.Datastore().Read(ctx)
	Expect(err).NotTo(HaveOccurred())
	var stored datastore.IPPool
	for _, p := range cl.Pools {
		if p.Name == ipv6IPIPPoolName {
			stored = p
		}
	}
	Expect(stored.IPIPMode).To(Equal(tc.mode), "guard: the datastore holds %s with ipipMode %s", ipv6IPIPPoolName, tc.mode)
	Expect(netip.MustParsePrefix(stored.CIDR).Addr().Is6()).To(BeTrue(), "guard: %s is an IPv6 pool", ipv6IPIPPoolName)
	return v
}

// expectRendered is step 2: every node's confd re-rendered and BIRD runs
// the config in which the pool is of class ipip.
func (v *ipv6IPIP) expectRendered(ctx SpecContext) {
	GinkgoHelper()
	poolLine := fmt.Sprintf("# pool %s %s (ipip,", ipv6IPIPPoolName, ipv6IPIPPoolCIDR)
	for _, n := range v.c.Nodes() {
		Eventually(func() (string, error) { return birdConfig(n) }).WithPolling(100*time.Millisecond).
			Should(ContainSubstring(poolLine), "%s's BIRD config should render %s as an IPIP pool", n.Name, ipv6IPIPPoolName)
		Eventually(func() bool {
			for _, a := range n.ConfdActions() {
				if a.SeenMono >= v.changed.Mono && a.ConfiguredMono != 0 && a.Error == "" {
					return true
				}
			}
			return false
		}).WithPolling(100*time.Millisecond).Should(BeTrue(), "%s's BIRD should take the new config (birdc configure)", n.Name)
		Expect(n.BIRD.Running()).To(BeTrue(), "%s's BIRD runs the config", n.Name)
	}
	Expect(v.c.WaitConverged(ctx)).To(Succeed(), "guard: every session, IPv4 and IPv6, Established")
}

// expectLearned is step 3: every other node's ipip-pool-v6 block is learned
// over BGP on every node.
func (v *ipv6IPIP) expectLearned(ctx SpecContext) {
	GinkgoHelper()
	v.ipipV6, v.noEncapV6, v.ipipV4 = map[string][]netip.Prefix{}, map[string][]netip.Prefix{}, map[string][]netip.Prefix{}
	v.addr6 = map[netip.Prefix]netip.Addr{}
	for _, n := range v.c.Nodes() {
		for _, nd := range v.c.Net.Nodes {
			if nd.Name == n.Name {
				continue
			}
			b := blockOf(nd, ipv6IPIPPoolName)
			v.ipipV6[n.Name] = append(v.ipipV6[n.Name], b)
			v.noEncapV6[n.Name] = append(v.noEncapV6[n.Name], blockOf(nd, "noencap-pool-v6"))
			v.ipipV4[n.Name] = append(v.ipipV4[n.Name], blockOf(nd, ipv4IPIPPoolName))
			a6, err := netip.ParsePrefix(nd.Spec.Interfaces[0].Address6)
			Expect(err).NotTo(HaveOccurred(), "topology: %s's eth0 IPv6 address", nd.Name)
			v.addr6[b] = a6.Addr()
		}
		for _, b := range v.ipipV6[n.Name] {
			Eventually(func() bool { return learnedOverBGP(ctx, n, b) }).WithPolling(100*time.Millisecond).
				Should(BeTrue(), "guard: %s's BIRD learns %s over BGP", n.Name, b)
		}
	}
}

// expectControls is step 4 on n: the IPv4 IPIP pool goes via tunl0 by the
// IPIP owner; the IPv6 no-encap pool via eth0 by the no-encap owner.
func (v *ipv6IPIP) expectControls(n *harness.Node) {
	GinkgoHelper()
	for _, b := range v.ipipV4[n.Name] {
		m := judge.HaveClusterRoute(b).ProgrammedBy(v.owner).Via(topo.TunnelDevice).Onlink().Only()
		if !v.tc.birdIPIP {
			m = m.WithProgrammerProtocol(designProgrammerProtocol)
		}
		Eventually(n).WithPolling(50*time.Millisecond).Should(m,
			"control: %s's IPv4 IPIP route to %s is %s's, via %s", n.Name, b, v.ownerName, topo.TunnelDevice)
	}
	for _, b := range v.noEncapV6[n.Name] {
		if v.tc.birdIPIP {
			Eventually(n).WithPolling(50*time.Millisecond).
				Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Only(),
					"control: %s's IPv6 no-encap route to %s is the programmer's", n.Name, b)
		} else {
			Eventually(n).WithPolling(50*time.Millisecond).
				Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via("eth0").Only(), "control: %s's IPv6 no-encap route to %s is BIRD's", n.Name, b)
		}
	}
}

// expectNeverViaTunnel is step 5 on n, the claim: each IPv6 IPIP block
// routed by its owner out of eth0 or not at all, never exported or routed
// via tunl0; BIRD's kernel filter as the owner says. Adds n's lines to table.
func (v *ipv6IPIP) expectNeverViaTunnel(ctx SpecContext, n *harness.Node, table *strings.Builder) {
	GinkgoHelper()
	tc, addr6 := v.tc, v.addr6
	for _, b := range v.ipipV6[n.Name] {
		switch {
		case tc.routed && tc.birdIPIP:
			Eventually(n).WithPolling(50*time.Millisecond).
				Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via("eth0").Gateway(addr6[b]).Only(),
					"%s's route to the IPv6 IPIP block %s should be BIRD's, via %s out of eth0 as no-encap", n.Name, b, addr6[b])
			Expect(exportedTo(ctx, n, "kernel6", b)).To(BeTrue(), "%s's BIRD exports the IPv6 IPIP block %s to kernel6", n.Name, b)
		case tc.routed:
			Eventually(n).WithPolling(50*time.Millisecond).
				Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Gateway(addr6[b]).Onlink().Only(),
					"%s's route to the IPv6 IPIP block %s should be the programmer's, via %s dev eth0 onlink (Felix's same-subnet no-encap route)", n.Name, b, addr6[b])
		default:
			Consistently(func() ([]kroute.Route, error) { return n.Routes(b) }).WithTimeout(2*time.Second).WithPolling(100*time.Millisecond).
				Should(BeEmpty(), "%s has a route to the IPv6 IPIP block %s (ipipMode %s), which neither Calico owner writes", n.Name, b, tc.mode)
		}
		if !tc.birdIPIP {
			Expect(exportedTo(ctx, n, "kernel6", b)).To(BeFalse(), "%s's BIRD exports %s to kernel6, though the programmer owns IPIP", n.Name, b)
		}
		for _, r := range exportedRoutesTo(ctx, n, "kernel6", b) {
			Expect(r.Nexthops).NotTo(ContainElement(HaveField("Iface", topo.TunnelDevice)),
				"%s's BIRD exports the IPv6 IPIP block %s to kernel6 via %s: %v", n.Name, b, topo.TunnelDevice, r)
		}
		rs, err := n.Routes(b)
		Expect(err).NotTo(HaveOccurred())
		for _, r := range rs {
			Expect(r.Devices()).NotTo(ContainElement(topo.TunnelDevice), "%s routes the IPv6 IPIP block %s via %s: %v", n.Name, b, topo.TunnelDevice, r)
		}
		fmt.Fprintf(table, "%s\t%s\texported to kernel6: %v\tkernel: %v\n", n.Name, b, exportedTo(ctx, n, "kernel6", b), rs)
	}
	conf, err := birdConfig(n)
	Expect(err).NotTo(HaveOccurred())
	if tc.birdIPIP {
		Expect(conf).To(ContainSubstring(fmt.Sprintf("if ( net ~ %s ) then accept;", ipv6IPIPPoolCIDR)), "%s: BIRD's kernel filter accepts %s like no-encap, no tunnel arm", n.Name, ipv6IPIPPoolName)
	} else {
		Expect(conf).To(ContainSubstring(fmt.Sprintf("if ( net ~ %s ) then reject;", ipv6IPIPPoolCIDR)), "%s: BIRD's kernel filter rejects %s", n.Name, ipv6IPIPPoolName)
	}
}

// expectWarnings is step 6: the deprecation warning in every render after
// the change exactly when BIRD owns the IPIP class, naming the IPv6 pool.
func (v *ipv6IPIP) expectWarnings() {
	GinkgoHelper()
	for _, n := range v.c.Nodes() {
		ws := n.Warnings()
		var naming int
		for _, w := range ws {
			if strings.Contains(w, "DEPRECATED") && strings.Contains(w, ipv6IPIPPoolName) {
				naming++
			}
		}
		after := n.Renders() - v.renders[n.Name]
		Expect(after).To(BeNumerically(">=", 1), "guard: %s re-rendered after the change", n.Name)
		if v.tc.birdIPIP {
			Expect(naming).To(BeNumerically(">=", after), "%s: each of its %d renders since the change should warn naming %s; warnings: %v", n.Name, after, ipv6IPIPPoolName, ws)
		} else {
			Expect(naming).To(BeZero(), "%s warns about %s although BIRD does not own IPIP: %v", n.Name, ipv6IPIPPoolName, ws)
		}
	}
}

// recordFigures is step 7.
func (v *ipv6IPIP) recordFigures(table string) {
	GinkgoHelper()
	res := v.c.Result(fmt.Sprintf("IPv6 pool with ipipMode %s, Felix=%s BGP=%s", v.tc.mode, rawName(string(v.tc.felix)), rawName(string(v.tc.bgp))), nil)
	programmed := 0
	for _, n := range v.c.Nodes() {
		for _, b := range v.ipipV6[n.Name] {
			if rs, _ := n.Routes(b); len(rs) > 0 {
				programmed++
			}
		}
	}
	res.Figure("ipv6IPIPBlocksWithAKernelRoute", float64(programmed), results.KindSize)
	res.Notes = append(res.Notes, "Calico never tunnels IPv6: confd sets krt_tunnel for IPv4 only (bgp_processor.go, release-v3.33 6609dea5), Felix's IPIP manager is IPv4 only; Calico's API refuses IPv6 IPIP pools")
	scenariotest.Record(fmt.Sprintf("IPv6 pool %s with ipipMode %s (Felix=%s, BGP=%s): %d of its remote blocks have a kernel route, none via %s",
		ipv6IPIPPoolName, v.tc.mode, rawName(string(v.tc.felix)), rawName(string(v.tc.bgp)), programmed, topo.TunnelDevice), table, res)
}
