package scenarios_test

// Claim (design §4, "Upgrading the code"): upgrading a node from a release in
// which BIRD programs the IPIP cluster routes (pre-3.33) to one in which the
// route programmer does (3.33) leaves no window in which a destination the new
// programmer wants has no route. The old BIRD exits and, configured with
// `persist`, leaves its routes in the kernel; the new programmer replaces each
// one with its own in a single RouteReplace; the new BIRD starts with -R and,
// after graceful-restart recovery, treats the programmer's routes as alien.
//
// The release it starts from is 3.31 (headlineFrom), where the design's
// model holds as Calico ships it: 3.31's kernel filter sets no krt_metric,
// so BIRD writes its routes at the fork's metric 0 (T31 bird_ipam
// calico_kernel_programming @ 3cdeae8f7ace; docs/conformance.md row 16),
// Felix's IPv4 key has priority 0 (felix/routetable, all three releases),
// and one RouteReplace takes BIRD's route. From 3.32 BIRD writes at 1024
// (row 17, @ de60d98e97a7) and 3.33's Felix deletes before it replaces
// (felix/routetable/route_table.go applyUpdates @ 6609dea54713), so 3.32 →
// 3.33 has a per-block no-route window: upgrade_window_test.go holds it as
// a known gap with its figure.
//
// So the upgraded node's outbound probes lose nothing. Inbound probes depend on
// how the old BIRD went: SIGKILL (what deleting the pod does) leaves peers
// holding its routes as stale; SIGTERM sends a Cease and peers withdraw them at
// once. Both are measured and reported for every pair and direction.

import (
	"fmt"
	"net/netip"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/probe"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/topo"
)

var _ = Describe("Upgrade handover on IPIP, node by node", Label("ipip", "upgrade", "headline", "timing", "claim4"), func() {
	DescribeTable("the upgraded node loses no outbound probe while the programmer takes over BIRD's tunnel routes",
		func(ctx SpecContext, sig syscall.Signal) {
			// 1. Every node on 3.31: BIRD owns the IPIP routes.
			c := startCluster(ctx, "ipip", harness.Options{Release: headlineFrom})
			upgraded := c.Node("node-2")
			remote := c.RemoteBlocks(upgraded.Name)
			Expect(remote).NotTo(BeEmpty())

			// 2. Guard: BIRD really programs every remote block via tunl0
			// before the upgrade, or "no loss" would prove nothing.
			for _, b := range remote {
				Eventually(upgraded).WithTimeout(scaled(30 * time.Second)).WithPolling(50 * time.Millisecond).
					Should(harness.HaveClusterRoute(b).ProgrammedBy(harness.ByBIRD).Via(topo.TunnelDevice).Gateway(nodeAddrOf(c, b)).Onlink())
			}
			// Guard: at the programmer's key (metric 0), so the claim's
			// single replace is what the upgrade is about.
			Expect(birdMetricsTo(upgraded, remote)).To(HaveEach(0), "guard: on %s BIRD writes its routes at metric 0", headlineFrom)

			// 3. Probes at the run's rate (1 kHz natively, lower in a TCG
			// VM) both ways between every pair of nodes; Probes returns
			// once every flow delivers.
			probes, err := c.Probes(ctx, harness.ProbeOptions{})
			Expect(err).NotTo(HaveOccurred())

			// 4. Upgrade node-2 to 3.33, the old BIRD going with sig. The
			// snapshot just before is where the platform's loss starts to
			// count: loss while the probes started is no licence.
			atBegin, err := probes.Report()
			Expect(err).NotTo(HaveOccurred())
			begin := act(c.UpgradeNode(ctx, upgraded.Name, config.R333, harness.UpgradeOptions{Signal: sig}))

			// 5. Its IPIP cluster routes move to the programmer: its route,
			// still via the block's node onlink through tunl0 as BIRD's was,
			// and no other beside it...
			for _, b := range remote {
				Eventually(upgraded).WithTimeout(scaled(30 * time.Second)).WithPolling(20 * time.Millisecond).
					Should(harness.HaveClusterRoute(b).ProgrammedBy(harness.ByProgrammer).Via(topo.TunnelDevice).Gateway(nodeAddrOf(c, b)).Onlink().Only())
			}
			// ...and the cluster converges again (the new BIRD's sessions
			// are back, so its recovery and reconciliation ran), with no
			// `proto bird` route to another node's block left behind.
			Expect(c.WaitConverged(ctx)).To(Succeed())
			Eventually(func() []kroute.Route { return birdRoutesTo(upgraded, remote) }).
				WithTimeout(scaled(30 * time.Second)).WithPolling(100 * time.Millisecond).Should(BeEmpty())
			end := c.Mark("converged after upgrade")
			// Every probe sent up to here is inside the claim's window;
			// those still in flight when the probes stop are not.
			atEnd, err := probes.Report()
			Expect(err).NotTo(HaveOccurred())

			rep, err := probes.Stop()
			Expect(err).NotTo(HaveOccurred())
			res := c.Result("upgrade handover IPIP ("+sig.String()+")", rep)
			res.Figures["lostOutboundUpgradedNode"] = 0
			res.Figures["lostInboundUpgradedNode"] = 0
			for _, f := range rep.Flows {
				if isFrom(upgraded, f.SrcAddr) {
					res.Figures["lostOutboundUpgradedNode"] += float64(f.Lost)
				}
				if isFrom(upgraded, f.DstAddr) {
					res.Figures["lostInboundUpgradedNode"] += float64(f.Lost)
				}
			}
			res.Figures["handoverSeconds"] = float64(end.Mono-begin.Mono) / 1e9
			// The handover is judged on a tunnel that encapsulates (issue
			// 28): node-2's outbound flows and the control flows crossed
			// the underlay inside protocol 4 between their nodes, never
			// bare. Flows into node-2 are counted, not judged: after a Cease
			// (SIGTERM) its peers' 3.31 BIRDs withdraw node-2's block, and
			// what they send it meanwhile leaves by their default route,
			// bare, to a router with no pod routes (the inbound loss).
			outbound, inbound := splitInbound(rep, upgraded)
			encap, err := harness.CheckIPIPEncapsulated(c.Net, outbound)
			Expect(err).NotTo(HaveOccurred(), "IPIP flows must cross the underlay encapsulated")
			encapFigures(res, encap)
			in, _ := harness.CheckIPIPEncapsulated(c.Net, inbound)
			res.Figures["ipipBarePacketsInboundUpgradedNode"] = float64(in.Bare)
			AddReportEntry("IPIP on the underlay, flows into node-2 (counted, not judged)", in.Table())
			report("upgrade of node-2 "+string(headlineFrom)+" → 3.33, old BIRD "+sig.String()+": lost probes per flow", harness.GapTable(rep), res)

			// 6. The claim: the route timeline never saw node-2 without a
			// route, and nothing was lost on its way out...
			for _, b := range remote {
				Expect(c.Timeline(upgraded.Name).NoRouteWindows(b, begin.Mono, end.Mono)).To(BeEmpty(),
					"node-2 had no route to %s for a while during its upgrade", b)
			}
			// ...beyond what the platform itself lost at the same time: the
			// flows between the other nodes cross no route that changes, so
			// their holes are the machine's (under QEMU TCG every flow loses
			// 70–105 ms at once while a container starts). Where they lost
			// nothing — native, KVM — the claim is exactly "no hole".
			controls, err := harness.HolesSince(rep, atBegin, atEnd, harness.NotInvolving(upgraded))
			Expect(err).NotTo(HaveOccurred())
			platform, err := harness.PlatformLossOf(controls)
			Expect(err).NotTo(HaveOccurred(), "guard: flows that do not involve node-2 measure the platform's own loss")
			res.Figures["platformMissingPerControlFlowMax"] = float64(platform.Max)
			AddReportEntry("platform loss", platform.String())
			for _, f := range rep.Flows {
				if isFrom(upgraded, f.SrcAddr) {
					Expect(f).To(harness.HaveNoGap().Through(atEnd).BeyondPlatform(platform), "node-2 lost probes to %s during its upgrade", f.DstAddr)
				}
			}
		},
		Entry("old BIRD SIGKILLed, as when the pod is deleted", syscall.SIGKILL),
		Entry("old BIRD SIGTERMed, so it sends a Cease", syscall.SIGTERM),
	)
})

// headlineFrom is the release the headline upgrade specs (this file,
// upgrade_rolling_test.go, roundtrip_test.go, scale_test.go,
// lab_upgrade_test.go) start from: 3.31, whose BIRD writes at metric 0, the
// key the programmer's route shares (see the top of this file).
const headlineFrom = config.R331

// birdMetricsTo lists the metrics of n's `proto bird` routes to the blocks.
func birdMetricsTo(n *harness.Node, blocks []netip.Prefix) []int {
	var out []int
	for _, r := range birdRoutesTo(n, blocks) {
		out = append(out, r.Metric)
	}
	return out
}

// birdRoutesTo lists n's `proto bird` routes to any of the blocks.
func birdRoutesTo(n *harness.Node, blocks []netip.Prefix) []kroute.Route {
	var out []kroute.Route
	for _, b := range blocks {
		rs, err := n.Routes(b)
		if err != nil {
			Fail(fmt.Sprintf("node %s: read routes to %s: %v", n.Name, b, err))
		}
		for _, r := range rs {
			if r.Protocol == kroute.ProtoBIRD {
				out = append(out, r)
			}
		}
	}
	return out
}

// nodeAddrOf is the address of the node block b is affine to, from the
// topology: the gateway every tunnel route to b must name.
func nodeAddrOf(c *harness.Cluster, b netip.Prefix) netip.Addr {
	nd := c.Net.NodeOfBlock(b)
	if nd == nil {
		Fail(fmt.Sprintf("no node of the topology has block %s", b))
	}
	return nd.Address.Addr()
}

// splitInbound splits a report's flows into those not destined to n and
// those destined to it (the rest of each report as it is).
func splitInbound(rep *probe.Report, n *harness.Node) (others, into *probe.Report) {
	o, i := *rep, *rep
	o.Flows, i.Flows = nil, nil
	for _, f := range rep.Flows {
		if isFrom(n, f.DstAddr) {
			i.Flows = append(i.Flows, f)
		} else {
			o.Flows = append(o.Flows, f)
		}
	}
	return &o, &i
}

// isFrom reports whether addr is one of n's workloads.
func isFrom(n *harness.Node, addr netip.Addr) bool { return n.NS.HasWorkloadAddr(addr) }
