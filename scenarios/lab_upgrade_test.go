package scenarios_test

// Claim (design §4, "Upgrading the code"), held against a lab birdcage did
// not build, as upgrade_test.go holds it on the built-in target: upgrading a
// node of an IPIP cluster from pre-3.33 (BIRD programs the tunnel routes) to
// 3.33 (the route programmer does) leaves no window in which the upgraded
// node has no route to another node's block, deletes none of them, and loses
// none of its outbound probes beyond what the platform loses at the same
// time. The lab's own commands do the upgrade; birdcage only watches. At the
// end the node is moved back (old BIRD TERMed) and the lab must be exactly
// as found.
//
// Needs an IPIP lab: the hand-made labs build one (a kernel with ipip: the
// VM), a manifest's lab must already run pre-3.33 on an IPIP pool (the
// guard says so if not).

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/harness/lab"
	"github.com/birdcage/birdcage/harness/probe"
	"github.com/birdcage/birdcage/harness/timeline"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
)

// labTunnel is the IPIP device of a Calico node.
const labTunnel = "tunl0"

var _ = func() bool {
	if os.Getenv(labEnv) == "" {
		return false
	}
	Describe("Upgrade handover on IPIP against a lab, node by node", Label("lab", "ipip", "upgrade", "timing"), func() {
		DescribeTable("the upgraded node loses no outbound probe while the programmer takes over BIRD's tunnel routes, and the lab is left as found",
			func(ctx SpecContext, sig syscall.Signal) {
				const upgraded = "node-2"
				// 1. Every node on 3.31 (headlineFrom, see upgrade_test.go):
				// BIRD owns the IPIP routes, at the programmer's metric 0.
				l, _ := attachLab(ctx, labStart{from: ownership{owner: judge.ByBIRD}, ipip: true, release: headlineFrom, upgraded: upgraded},
					lab.ActionUpgrade)
				up := l.Node(upgraded)
				Expect(up).NotTo(BeNil(), "the lab has no %s to upgrade", upgraded)
				remote := l.RemoteBlocks(upgraded)
				Expect(remote).NotTo(BeEmpty())

				// 2. Guard: BIRD really programs every remote block via
				// tunl0 before the upgrade (attachLab waited for BIRD's
				// route and no other), or "no loss" would prove nothing.
				for _, b := range remote {
					Expect(viaTunnel(l.ClusterRoutes(upgraded, b))).To(BeTrue(),
						"guard: %s's route to %s goes via %s (an IPIP lab): %v", upgraded, b, labTunnel, l.ClusterRoutes(upgraded, b))
				}

				// 3. Probes both ways between every pair of nodes; they
				// flow before anything is done.
				probes, err := l.Probes(ctx, lab.ProbeOptions{})
				Expect(err).NotTo(HaveOccurred())

				// 4. The upgrade, by the lab's own command; the platform's
				// loss counts from the snapshot just before it.
				atBegin, err := probes.Report()
				Expect(err).NotTo(HaveOccurred())
				begin, err := l.UpgradeNode(ctx, upgraded, config.R333, sig)
				Expect(err).NotTo(HaveOccurred())

				// 5. Its IPIP cluster routes move to the programmer: its
				// route, via tunl0, and no other beside it...
				wait, cancel := context.WithTimeout(ctx, scaled(30*time.Second))
				defer cancel()
				for _, b := range remote {
					Expect(l.WaitOwnedOnlyBy(wait, upgraded, b, l.M.RouteProtocol())).To(Succeed())
					Expect(viaTunnel(l.ClusterRoutes(upgraded, b))).To(BeTrue(), "the programmer's route to %s is not via %s", b, labTunnel)
				}
				// ...and the lab converges again: every BIRD's sessions
				// are up (so the new BIRD's recovery ran), and the other
				// nodes route the upgraded node's blocks by BIRD alone.
				var sessions string
				if l.M.Has(lab.ActionBirdc) {
					for _, n := range l.Nodes {
						Expect(l.WaitBGPEstablished(wait, n.Name)).To(Succeed())
					}
					sessions = "every node's BGP sessions Established (birdc action)"
				} else {
					sessions = "BIRD's sessions not seen: the manifest has no birdc action"
				}
				for _, n := range l.Nodes {
					if n.Name == upgraded {
						continue
					}
					for _, b := range up.Blocks {
						Expect(l.WaitOwnedOnlyBy(wait, n.Name, b, kroute.ProtoBIRD)).To(Succeed())
					}
				}
				end := l.Mark("converged after upgrade")
				// Every probe sent up to here is inside the claim's window.
				atEnd, err := probes.Report()
				Expect(err).NotTo(HaveOccurred())
				rep, err := probes.Stop()
				Expect(err).NotTo(HaveOccurred())

				// Figures, named as on the built-in target.
				isUp := func(a netip.Addr) bool {
					return slices.ContainsFunc(up.Workloads, func(w probe.Endpoint) bool { return w.Addr == a })
				}
				res := harness.ScenarioResult{Name: fmt.Sprintf("upgrade handover IPIP (%s) on lab %s", sig, l.M.Name),
					Topology: "lab:" + l.M.Name, Probes: rep, Events: l.Events(), Figures: map[string]float64{}, RouteEvents: l.RouteEvents()}
				res.Figures["lostProbes"] = float64(rep.Total.Lost)
				res.Figures["sentProbes"] = float64(rep.Total.Sent)
				res.Figures["longestProbeGapMs"] = rep.Total.LongestGapMs
				res.Figures["lostOutboundUpgradedNode"] = 0
				res.Figures["lostInboundUpgradedNode"] = 0
				for _, f := range rep.Flows {
					if isUp(f.SrcAddr) {
						res.Figures["lostOutboundUpgradedNode"] += float64(f.Lost)
					}
					if isUp(f.DstAddr) {
						res.Figures["lostInboundUpgradedNode"] += float64(f.Lost)
					}
				}
				res.Figures["handoverSeconds"] = float64(end.Mono-begin.Mono) / 1e9
				var window float64
				var deletes []timeline.Event
				tl := l.Timeline(upgraded)
				for _, b := range remote {
					for _, w := range tl.NoRouteWindows(b, begin.Mono, end.Mono) {
						window = max(window, w.Ms())
					}
					for _, e := range tl.EventsFor(b, begin.Mono, end.Mono) {
						if e.Kind == timeline.Delete && e.Route.Table == kroute.MainTable {
							deletes = append(deletes, e)
						}
					}
				}
				res.Figures["longestNoRouteWindowMs"] = window
				res.Figures["deletesAtUpgradedNode"] = float64(len(deletes))
				res.Notes = append(res.Notes, "against a lab: the programmer's restarts and confd's reaction are the lab's own and not seen",
					"converged: "+sessions, fmt.Sprintf("probe interval %.1f ms", 1000/float64(rep.Rate)))

				// The platform's own loss, by the one rule every upgrade
				// spec uses (judge.PlatformLossOf): flows with neither end
				// at the upgraded node cross no route that changes, so
				// natively they must lose nothing; under QEMU TCG they
				// measure the stalls that hit every flow at once.
				isControl := func(f probe.GapReport) bool { return !isUp(f.SrcAddr) && !isUp(f.DstAddr) }
				controls, err := judge.Holes(rep, judge.SinceSnapshot(atBegin, atEnd), isControl)
				Expect(err).NotTo(HaveOccurred())
				platform, err := judge.PlatformLossOf(controls)
				Expect(err).NotTo(HaveOccurred(), "guard: flows that do not involve %s measure the platform's own loss", upgraded)
				res.Figures["platformMissingPerControlFlowMax"] = float64(platform.Max)
				AddReportEntry("platform loss", platform.String())
				report(fmt.Sprintf("upgrade of %s %s → 3.33 on lab %s, old BIRD %s: lost probes per flow", upgraded, headlineFrom, l.M.Name, sig),
					harness.GapTable(rep), res)

				// 6. The claim: no window and no delete on the upgraded
				// node's timeline...
				for _, b := range remote {
					Expect(tl.NoRouteWindows(b, begin.Mono, end.Mono)).To(BeEmpty(),
						"%s had no route to %s for a while during its upgrade", upgraded, b)
				}
				Expect(deletes).To(BeEmpty(), "%s's routes to other nodes' blocks were deleted during its upgrade, not replaced", upgraded)
				// ...and nothing lost on its way out beyond the platform's.
				for _, f := range rep.Flows {
					if isUp(f.SrcAddr) {
						Expect(f).To(judge.HaveNoGap().Through(atEnd).BeyondPlatform(platform), "%s lost probes to %s during its upgrade", upgraded, f.DstAddr)
					}
				}
			},
			Entry("old BIRD SIGKILLed, as when the pod is deleted", syscall.SIGKILL),
			Entry("old BIRD SIGTERMed, so it sends a Cease", syscall.SIGTERM),
		)
	})
	return true
}()

// viaTunnel reports whether there is exactly one route and every next hop
// of it goes via the IPIP device.
func viaTunnel(rs []kroute.Route) bool {
	if len(rs) != 1 || len(rs[0].NextHops) == 0 {
		return false
	}
	for _, h := range rs[0].NextHops {
		if h.Device != labTunnel {
			return false
		}
	}
	return true
}
