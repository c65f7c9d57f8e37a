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
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

// calicoFromSource is $BIRDCAGE_CALICO_FROM, the image an upgrade starts
// from, or the spec skips naming the feature.
func calicoFromSource() string {
	GinkgoHelper()
	dir := scenariotest.Config.CalicoFrom
	if dir == "" {
		testenv.Missing(GinkgoT(), testenv.Calico, "set "+env.CalicoFrom+"=DIR (the image an upgrade starts from, e.g. a 3.32 build) and "+env.Calico+"=DIR (the image it moves to)")
	}
	return dir
}

var _ = Describe("Real Calico upgrade", Label("calico", "upgrade", "headline", "timing"), func() {
	DescribeTable("the upgraded node keeps a route to every remote block and loses no outbound probe (on IPIP from a 3.32 build: the known per-block window, upgrade_window)",
		func(ctx SpecContext, topology string, after judge.Owner, sig syscall.Signal) {
			to := sideOf(calicoSource(), env.Calico)
			from := sideOf(calicoFromSource(), env.CalicoFrom)
			Expect(to.flavour()).To(Equal(from.flavour()), "%s and %s: both Calico directories, or both model:REL", env.Calico, env.CalicoFrom)
			By("1. guard: before the upgrade Calico's BIRD owns every remote block's route; probes running")
			u := startCalicoUpgrade(ctx, topology, from, to, sig)
			By("2. the pod replacement (on the model: its programmer and BIRD, the same signal); the new owner's route alone to every remote block; converged")
			u.replacePod(ctx, to, after, sig)
			By("3. figures: loss each way, the longest gap, the no-route windows per block, the deletes")
			windows, platform := u.recordFigures(sig)
			c, upgraded, remote, rep, isUp := u.c, u.upgraded, u.remote, u.rep, u.isUp
			begin, end, atEnd, fromRel := u.begin, u.end, u.atEnd, u.fromRel
			tl := c.Timeline(upgraded)
			By("4. the claim: no window, no outbound loss beyond the platform's (on IPIP from 3.32: the known window)")
			// 4. The claim, as the model's headline states it — except on
			// IPIP from 3.32, where the model holds a known gap
			// (upgrade_window_test.go: 3.32's BIRD writes at 1024, 3.33's
			// Felix deletes before it adds) and real Calico is held to the
			// same: a window, reported, and the gap's closing a failure
			// that asks for the design and upgrade_window to be updated.
			// Measured on the 3.32 and 3.33 builds here, 5 runs per
			// signal: a window on every block every run (0.011-16.8 ms).
			if topology == "ipip" && fromRel == config.R332 {
				u.res.Notes = append(u.res.Notes, "known gap (upgrade_window): from 3.32 Felix's delete-first leaves each block without a route for a moment")
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

// calicoUpgrade is one entry of the real-Calico upgrade spec.
type calicoUpgrade struct {
	c              *harness.Cluster
	topology       string
	upgraded       string
	n              *harness.Node
	fromRel, toRel config.Release
	remote         []netip.Prefix
	probes         *probe.Session
	begin, end     results.Event
	atBegin, atEnd *report.Report
	rep            *report.Report
	res            results.ScenarioResult
	from           calicoSide
	versions       []string
	trace          *harness.RouteTrace
	conformance    string // the case's name in the conformance table
}

// isUp says whether a is a workload of the upgraded node.
func (u *calicoUpgrade) isUp(a netip.Addr) bool { return u.c.WorkloadNode(a) == u.upgraded }

// route is the matcher of u's routes to b by o (via tunl0 on IPIP).
func (u *calicoUpgrade) route(ctx SpecContext, b netip.Prefix, o judge.Owner) *judge.ClusterRouteMatcher {
	m := judge.HaveClusterRoute(b).ProgrammedBy(o).WithProgrammerProtocol(u.c.ProgrammerProtocol(ctx))
	if u.topology == "ipip" {
		m = m.Via(topo.TunnelDevice)
	}
	return m
}

// startCalicoUpgrade is step 1: the cluster on the from-image. Guard:
// before the upgrade Calico's BIRD owns every remote block's route (the
// from-release's default), or "no window" would prove nothing.
func startCalicoUpgrade(ctx SpecContext, topology string, from, to calicoSide, sig syscall.Signal) *calicoUpgrade {
	GinkgoHelper()
	u := &calicoUpgrade{topology: topology, upgraded: "node-2", from: from, toRel: config.R333}
	if to.dir == "" {
		u.toRel = to.model
	}
	u.c = scenariotest.StartCluster(ctx, topology, from.options())
	u.versions = expectSide(u.c, from)
	u.n = u.c.Node(u.upgraded)
	u.fromRel = u.n.Release()
	u.conformance = fmt.Sprintf("upgrade %s → %s, %s, %s", u.fromRel, u.toRel, topology, sig)
	scenariotest.NameConformance(u.conformance, u.upgraded)
	u.remote = u.c.RemoteBlocks(u.upgraded)
	Expect(u.remote).NotTo(BeEmpty(), "guard: %s has remote blocks to judge", u.upgraded)
	for _, b := range u.remote {
		Eventually(u.n).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
			Should(u.route(ctx, b, judge.ByBIRD).Only(), "guard: on %s BIRD owns %s's route to %s", u.fromRel, u.upgraded, b)
	}
	u.trace = traceConformance(u.c, u.upgraded)
	var err error
	u.probes, err = u.c.Probes(ctx, harness.ProbeOptions{})
	Expect(err).NotTo(HaveOccurred())
	u.atBegin, err = u.probes.Report()
	Expect(err).NotTo(HaveOccurred())
	return u
}

// replacePod is step 2.
func (u *calicoUpgrade) replacePod(ctx SpecContext, to calicoSide, after judge.Owner, sig syscall.Signal) {
	GinkgoHelper()
	u.begin = scenariotest.Act(u.c.UpgradeNode(ctx, u.upgraded, u.toRel, harness.UpgradeOptions{Signal: sig, Calico: to.dir}))
	u.toRel = u.n.Release()
	for _, b := range u.remote {
		Eventually(u.n).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(20*time.Millisecond).
			Should(u.route(ctx, b, after).Only(), "after the upgrade to %s: %s's route to %s by %s alone", u.toRel, u.upgraded, b, after)
	}
	wait, cancel := context.WithTimeout(ctx, scenariotest.Machine.Wait(60*time.Second))
	defer cancel()
	Expect(u.c.WaitConverged(wait)).To(Succeed())
	u.end = u.c.Mark("converged after upgrade")
	var err error
	u.atEnd, err = u.probes.Report()
	Expect(err).NotTo(HaveOccurred())
	u.rep, err = u.probes.Stop()
	Expect(err).NotTo(HaveOccurred())
}

// recordFigures is step 3; it returns the count of no-route windows and the
// platform's own loss for the claim.
func (u *calicoUpgrade) recordFigures(sig syscall.Signal) (windows int, platform judge.PlatformLoss) {
	GinkgoHelper()
	rep := u.rep
	name := fmt.Sprintf("%s upgrade %s → %s on %s, old pod %s", u.from.flavour(), u.fromRel, u.toRel, u.topology, sig)
	res := u.c.Result(name, rep)
	recordConformance(u.c, &res, u.trace, u.conformance, u.begin.Mono, u.end.Mono)
	res.AddProbeFigures(rep)
	res.AddNodeLossFigures(rep, u.isUp)
	res.Figure("handoverSeconds", float64(u.end.Mono-u.begin.Mono)/1e9, results.KindDuration)
	tl := u.c.Timeline(u.upgraded)
	Expect(tl.Judgeable(u.begin.Mono, u.end.Mono)).To(Succeed(), "%s's route timeline over the upgrade", u.upgraded)
	var longest float64
	deletes := 0
	for _, b := range u.remote {
		for _, w := range tl.NoRouteWindows(b, u.begin.Mono, u.end.Mono) {
			windows++
			longest = max(longest, w.Ms())
			res.MaxFigure("noRouteWindowMs "+b.String(), w.Ms(), results.KindGap)
		}
		for _, e := range tl.EventsFor(b, u.begin.Mono, u.end.Mono) {
			if e.Kind == event.Delete && e.Route.Table == kroute.MainTable {
				deletes++
			}
		}
	}
	res.Figure("noRouteWindows", float64(windows), results.KindCount)
	res.Figure("longestNoRouteWindowMs", longest, results.KindGap)
	res.Figure("deletesAtUpgradedNode", float64(deletes), results.KindCount)
	controls, err := judge.Holes(rep, judge.SinceSnapshot(u.atBegin, u.atEnd), func(f report.GapReport) bool { return !u.isUp(f.SrcAddr) && !u.isUp(f.DstAddr) })
	Expect(err).NotTo(HaveOccurred())
	platform, err = judge.PlatformLossOf(controls, scenariotest.Machine.Stalls())
	Expect(err).NotTo(HaveOccurred(), "guard: flows that do not involve %s measure the platform's own loss", u.upgraded)
	res.Figure("platformMissingPerControlFlowMax", float64(platform.Max), results.KindMachine)
	scenariotest.Record(name, strings.Join(u.versions, "\n")+"\n"+results.GapTable(rep), res)
	u.res = res
	return windows, platform
}
