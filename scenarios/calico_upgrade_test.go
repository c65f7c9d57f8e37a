package scenarios_test

// The headline upgrade on real Calico (issue 45): every node starts on
// the image $BIRDCAGE_CALICO_FROM (a 3.32 build), node-2's pod is
// replaced by one of $BIRDCAGE_CALICO (3.33) — every process of the old
// image SIGKILLed (or, the variant, SIGTERMed as runsvdir passes a pod's
// SIGTERM on to each service), the new image's started, BIRD with -R — with probes
// both ways between every pair of nodes. The claim is the model's: the
// upgraded node never has a remote block without a route, and loses no
// outbound probe beyond the platform's own loss; on IPIP from a 3.32
// build, the model's known gap (a window per block) instead. On no-encap BIRD owns
// the routes on both sides (3.32's BGPConfiguration.programClusterRoutes
// default Enabled, 3.33's EnabledNoEncapOnly); on IPIP 3.32's BIRD
// hands them to 3.33's Felix (FelixConfiguration.programClusterRoutes
// default EnabledIPIPOnly), on whichever tunl0 the kernel gives (Felix's
// IPIP manager takes an existing tunl0 of any link type).

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// calicoFromSource is $BIRDCAGE_CALICO_FROM, the image an upgrade starts
// from, or the spec skips naming the feature.
func calicoFromSource() string {
	GinkgoHelper()
	dir := cfg.CalicoFrom
	if dir == "" {
		testenv.Missing(GinkgoT(), testenv.Calico, "set "+env.CalicoFrom+"=DIR (the image an upgrade starts from, e.g. a 3.32 build) and "+env.Calico+"=DIR (the image it moves to)")
	}
	return dir
}

var _ = Describe("Real Calico upgrade", Label("calico", "upgrade", "headline", "timing"), func() {
	DescribeTable("the upgraded node keeps a route to every remote block and loses no outbound probe (on IPIP from a 3.32 build: the known per-block window, upgrade_window)",
		func(ctx SpecContext, topology string, after judge.Owner, sig syscall.Signal) {
			to := calicoSource()
			from := calicoFromSource()
			c := startCluster(ctx, topology, harness.Options{Calico: from})
			const upgraded = "node-2"
			n := c.Node(upgraded)
			fromRel := n.Release()
			remote := c.RemoteBlocks(upgraded)
			Expect(remote).NotTo(BeEmpty(), "guard: %s has remote blocks to judge", upgraded)
			isUp := func(a netip.Addr) bool { return c.WorkloadNode(a) == upgraded }
			route := func(b netip.Prefix, o judge.Owner) *judge.ClusterRouteMatcher {
				m := judge.HaveClusterRoute(b).ProgrammedBy(o).WithProgrammerProtocol(c.ProgrammerProtocol(ctx))
				if topology == "ipip" {
					m = m.Via(topo.TunnelDevice)
				}
				return m
			}

			// 1. Guard: before the upgrade Calico's BIRD owns every remote
			// block's route (the from-release's default), or "no window"
			// would prove nothing.
			for _, b := range remote {
				Eventually(n).WithTimeout(machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
					Should(route(b, judge.ByBIRD).Only(), "guard: on %s BIRD owns %s's route to %s", fromRel, upgraded, b)
			}
			probes, err := c.Probes(ctx, harness.ProbeOptions{})
			Expect(err).NotTo(HaveOccurred())
			atBegin, err := probes.Report()
			Expect(err).NotTo(HaveOccurred())

			// 2. The pod replacement.
			begin := act(c.UpgradeNode(ctx, upgraded, config.R333, harness.UpgradeOptions{Signal: sig, Calico: to}))
			toRel := n.Release()
			for _, b := range remote {
				Eventually(n).WithTimeout(machine.Wait(60*time.Second)).WithPolling(20*time.Millisecond).
					Should(route(b, after).Only(), "after the upgrade to %s: %s's route to %s by %s alone", toRel, upgraded, b, after)
			}
			wait, cancel := context.WithTimeout(ctx, machine.Wait(60*time.Second))
			defer cancel()
			Expect(c.WaitConverged(wait)).To(Succeed())
			end := c.Mark("converged after upgrade")
			atEnd, err := probes.Report()
			Expect(err).NotTo(HaveOccurred())
			rep, err := probes.Stop()
			Expect(err).NotTo(HaveOccurred())

			// 3. Figures: loss each way, the longest gap, the no-route
			// windows per block and the deletes at the upgraded node.
			name := fmt.Sprintf("real Calico upgrade %s → %s on %s, old pod %s", fromRel, toRel, topology, sig)
			res := c.Result(name, rep)
			res.AddProbeFigures(rep)
			res.Figures["lostOutboundUpgradedNode"], res.Figures["lostInboundUpgradedNode"] = 0, 0
			for _, f := range rep.Flows {
				if isUp(f.SrcAddr) {
					res.Figures["lostOutboundUpgradedNode"] += float64(f.Lost)
				}
				if isUp(f.DstAddr) {
					res.Figures["lostInboundUpgradedNode"] += float64(f.Lost)
				}
			}
			res.Figures["handoverSeconds"] = float64(end.Mono-begin.Mono) / 1e9
			tl := c.Timeline(upgraded)
			Expect(tl.Judgeable(begin.Mono, end.Mono)).To(Succeed(), "%s's route timeline over the upgrade", upgraded)
			var longest float64
			windows := 0
			deletes := 0
			for _, b := range remote {
				for _, w := range tl.NoRouteWindows(b, begin.Mono, end.Mono) {
					windows++
					longest = max(longest, w.Ms())
					res.Figures["noRouteWindowMs "+b.String()] = max(res.Figures["noRouteWindowMs "+b.String()], w.Ms())
				}
				for _, e := range tl.EventsFor(b, begin.Mono, end.Mono) {
					if e.Kind == event.Delete && e.Route.Table == kroute.MainTable {
						deletes++
					}
				}
			}
			res.Figures["noRouteWindows"] = float64(windows)
			res.Figures["longestNoRouteWindowMs"] = longest
			res.Figures["deletesAtUpgradedNode"] = float64(deletes)
			controls, err := judge.Holes(rep, judge.SinceSnapshot(atBegin, atEnd), func(f probe.GapReport) bool { return !isUp(f.SrcAddr) && !isUp(f.DstAddr) })
			Expect(err).NotTo(HaveOccurred())
			platform, err := judge.PlatformLossOf(controls, machine.Stalls())
			Expect(err).NotTo(HaveOccurred(), "guard: flows that do not involve %s measure the platform's own loss", upgraded)
			res.Figures["platformMissingPerControlFlowMax"] = float64(platform.Max)
			report(name, results.GapTable(rep), res)

			// 4. The claim, as the model's headline states it — except on
			// IPIP from 3.32, where the model holds a known gap
			// (upgrade_window_test.go: 3.32's BIRD writes at 1024, 3.33's
			// Felix deletes before it adds) and real Calico is held to the
			// same: a window, reported, and the gap's closing a failure
			// that asks for the design and upgrade_window to be updated.
			// Measured on the 3.32 and 3.33 builds here, 5 runs per
			// signal: a window on every block every run (0.011-16.8 ms).
			if topology == "ipip" && fromRel == config.R332 {
				res.Notes = append(res.Notes, "known gap (upgrade_window): from 3.32 Felix's delete-first leaves each block without a route for a moment")
				Expect(windows).To(BeNumerically(">", 0), "known gap closed on real Calico: the 3.32 → 3.33 IPIP upgrade left no remote block of %s without a route; update the design's §4 and upgrade_window_test.go", upgraded)
				return
			}
			for _, b := range remote {
				Expect(tl.NoRouteWindows(b, begin.Mono, end.Mono)).To(BeEmpty(), "%s had no route to %s for a while during its upgrade", upgraded, b)
			}
			for _, f := range rep.Flows {
				if isUp(f.SrcAddr) {
					Expect(f).To(judge.HaveNoGap().Through(atEnd).BeyondPlatform(platform), "%s lost probes to %s during its upgrade", upgraded, f.DstAddr)
				}
			}
		},
		Entry("no-encap, old pod SIGKILLed: BIRD before and after", Label("noencap"), "noencap", judge.ByBIRD, syscall.SIGKILL),
		Entry("IPIP, old pod SIGKILLed: 3.32's BIRD hands the tunnel routes to 3.33's Felix", Label("ipip"), "ipip", judge.ByProgrammer, syscall.SIGKILL),
		Entry("no-encap, old pod SIGTERMed: each service stops on its own terms, BIRD with a Cease", Label("noencap", "sigterm"), "noencap", judge.ByBIRD, syscall.SIGTERM),
		Entry("IPIP, old pod SIGTERMed", Label("ipip", "sigterm"), "ipip", judge.ByProgrammer, syscall.SIGTERM),
	)
})
