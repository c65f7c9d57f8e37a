package scenarios_test

// Claim about the gate itself (issue 26): the headline upgrade's checks
// catch a programmer that leaves a window where the design says it replaces
// in one operation. The upgrade is the headline's (3.31 → 3.33 on IPIP, old
// BIRD SIGKILLed), with one fault injected into every programmer: a route it
// takes over is deleted first and its own written 100 ms later
// (programmer.Knobs.TakeoverGap; dataplane/routetable's root test shows the
// fault opens that window). The headline spec's own checks must then fail:
//
//   - the route timeline shows node-2 without a route to a remote block for
//     about the gap — everywhere, the VM under TCG included, since the
//     timeline does not depend on probes;
//   - where the platform does not stall (natively, on the eBPF tunl0 or the
//     kernel's), the probe judge the headline uses fails for node-2's
//     outbound flows too; under TCG it is reported, since a 100 ms hole can
//     hide in the platform's own stalls, which is why the timeline check is
//     the one that must hold there.
//
// This spec passes when the gate catches the fault, and fails — naming what
// the gate let through — when it does not.

import (
	"fmt"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/topo"
)

const injectedTakeoverGap = 100 * time.Millisecond

var _ = Describe("The upgrade gate catches a window", Label("ipip", "upgrade", "headline", "gatecheck", "timing"), func() {
	It("fails the headline's checks when the programmer deletes BIRD's route and writes its own 100 ms later", func(ctx SpecContext) {
		// 1. The headline's cluster, every programmer carrying the fault.
		c := startCluster(ctx, "ipip", harness.Options{Release: config.R331,
			ProgrammerKnobs: programmer.Knobs{TakeoverGap: injectedTakeoverGap}})
		upgraded := c.Node("node-2")
		remote := c.RemoteBlocks(upgraded.Name)
		Expect(remote).NotTo(BeEmpty())

		// 2. Guard: BIRD owns every remote block before the upgrade (the
		// fault has nothing to act on until the 3.33 programmer takes
		// over), or a window would come from elsewhere.
		for _, b := range remote {
			Eventually(upgraded).WithTimeout(scaled(30 * time.Second)).WithPolling(50 * time.Millisecond).
				Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice).Gateway(nodeAddrOf(c, b)).Onlink().Only())
		}
		probes, err := c.Probes(ctx, harness.ProbeOptions{})
		Expect(err).NotTo(HaveOccurred())
		atBegin, err := probes.Report()
		Expect(err).NotTo(HaveOccurred())

		// 3. The headline's upgrade.
		begin := act(c.UpgradeNode(ctx, upgraded.Name, config.R333, harness.UpgradeOptions{Signal: syscall.SIGKILL}))
		for _, b := range remote {
			Eventually(upgraded).WithTimeout(scaled(30 * time.Second)).WithPolling(20 * time.Millisecond).
				Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).Via(topo.TunnelDevice).Only())
		}
		Expect(c.WaitConverged(ctx)).To(Succeed())
		end := c.Mark("converged after the faulty upgrade")
		atEnd, err := probes.Report()
		Expect(err).NotTo(HaveOccurred())
		rep, err := probes.Stop()
		Expect(err).NotTo(HaveOccurred())

		// 4. The headline's route-timeline check, expected to fail: some
		// remote block had no route for about the injected gap.
		var longest float64
		for _, b := range remote {
			for _, w := range c.Timeline(upgraded.Name).NoRouteWindows(b, begin.Mono, end.Mono) {
				longest = max(longest, w.Ms())
			}
		}
		// 5. The headline's probe judge on node-2's outbound flows.
		controls, err := judge.Holes(rep, judge.SinceSnapshot(atBegin, atEnd), judge.NotInvolving(upgraded))
		Expect(err).NotTo(HaveOccurred())
		platform, err := judge.PlatformLossOf(controls)
		Expect(err).NotTo(HaveOccurred(), "guard: flows that do not involve node-2 measure the platform's own loss")
		caught := 0
		for _, f := range rep.Flows {
			if isFrom(upgraded, f.SrcAddr) {
				if ok, err := judge.HaveNoGap().Through(atEnd).BeyondPlatform(platform).Match(f); err == nil && !ok {
					caught++
				}
			}
		}
		res := c.Result("upgrade gate check: 100 ms takeover window injected", rep)
		res.Figures["injectedTakeoverGapMs"] = ms(injectedTakeoverGap)
		res.Figures["longestNoRouteWindowMs"] = longest
		res.Figures["outboundFlowsFailingTheProbeJudge"] = float64(caught)
		res.Figures["platformMissingPerControlFlowMax"] = float64(platform.Max)
		report(fmt.Sprintf("upgrade with a %s takeover window injected: the longest window the timeline saw %.1f ms; node-2's outbound flows the probe judge failed: %d",
			injectedTakeoverGap, longest, caught), harness.GapTable(rep), res)

		Expect(longest).To(BeNumerically(">=", ms(injectedTakeoverGap)*0.9),
			"the gate let a %s takeover window through: the route timeline saw node-2 without a route for at most %.1f ms", injectedTakeoverGap, longest)
		if platform.Strict() {
			Expect(caught).To(BeNumerically(">", 0),
				"the gate let a %s takeover window through: on a platform that lost nothing the probe judge passed every outbound flow of node-2", injectedTakeoverGap)
		}
	})
})
