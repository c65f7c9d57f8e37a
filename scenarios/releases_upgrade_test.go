package scenarios_test

// Claim (design §4, "Upgrading the code", steps 1 and 3, applied to BIRD
// itself — the fork's retirement replaces BIRD 1.6 with upstream 2.x, and
// users will move 2.x to 3.x): the old BIRD exits and, configured with
// `persist`, leaves its routes in the kernel; the new BIRD starts with -R,
// holds the routes it found through graceful-restart recovery, and then
// reconciles. So a node whose BIRD is replaced keeps every route it had:
// its outbound flows lose nothing, and its route timeline never shows a
// remote block without a route.
//
// How its peers see it depends on how the old BIRD went, and the design
// does not say: SIGKILL (a pod deletion) leaves peers holding its routes
// as stale (graceful restart), SIGTERM sends a Cease and peers withdraw at
// once, until the new BIRD is Established and advertises again — which on
// the fork's base (1.6) is slower. Inbound gaps are measured and reported
// per flow and direction, and asserted only as far as graceful restart
// promises: none with SIGKILL, up to and including the end of every
// peer's graceful restart — except a hole inside a peer's own no-route
// window when a peer on the fork's base (1.6) installs the refreshed
// route by delete-then-add (see peerWindows below; figures
// peerNoRouteWindows, longestPeerNoRouteMs, inboundLostInPeerNoRouteWindows).
//
// On the 3.33 defaults on the no-encap topology (BIRD owns no-encap), node-2's BIRD moves
// 1.6 → 2.0 (bird + bird6 become one daemon with channels) and 2.0 → 3.1,
// the programmer restarting with it as a pod replacement does. Guards:
// BIRD programs every remote block of node-2 before the upgrade (else no
// loss proves nothing), probes flow on every pair, node-2's BIRD answers
// as the old release before and the new one after.

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// peerWindowLag is how late a route timeline may stamp an event: it
// stamps one when it reads it (9.7 ms seen under load, 2026-12-02).
const peerWindowLag = 20 * time.Millisecond

// gracefulRestartsDone counts the graceful restarts of a neighbour n's
// BIRD has logged as done.
func gracefulRestartsDone(n *harness.Node) int {
	b, err := os.ReadFile(n.BIRD.LogPath())
	if err != nil {
		Fail(fmt.Sprintf("node %s: read BIRD's log: %v", n.Name, err))
	}
	return strings.Count(string(b), "Neighbor graceful restart done")
}

// birdAnswers is the first line of `birdc show status` on n ("BIRD 2.0.12").
func birdAnswers(ctx SpecContext, n *harness.Node) string { return birdStatusLine(ctx, n.BIRD) }

var _ = Describe("BIRD upgrade on one node, with probes running", Label("noencap", "upgrade", "releases", "timing"), func() {
	DescribeTable("the node whose BIRD is replaced keeps its routes and loses no outbound probe",
		func(ctx SpecContext, from, to release.Name, sig syscall.Signal, full bool) {
			if full {
				needFull(fmt.Sprintf("BIRD upgrade %s→%s with %s", from, to, sig))
			}
			By("node-2 on BIRD " + string(from) + " programming its remote blocks, probes running")
			u := startBIRDUpgrade(ctx, from, to, sig)
			By("node-2's BIRD replaced: converged, every peer done with its graceful restart, every flow delivering")
			u.upgrade(ctx)
			By("figures: gaps per direction, the peers' own no-route windows")
			res := u.recordFigures()
			peerWindows := u.peerNoRouteWindows(&res)
			By("the claim: node-2 loses no outbound probe; after a SIGKILL, inbound loses nothing outside a 1.6 peer's own delete-then-add windows")
			u.expectFlows(&res, peerWindows)
			for _, b := range u.remote {
				Expect(u.c.Timeline(u.up.Name).NoRouteWindows(b, u.begin.Mono, u.end.Mono)).To(BeEmpty(), "node-2 had no route to %s while its BIRD moved %s→%s", b, from, to)
			}
		},
		Entry("1.6 → 2.0 (the fork's retirement), old BIRD SIGKILLed", Label("bird-1.6", "bird-2.0"), release.BIRD16, release.BIRD20, syscall.SIGKILL, false),
		Entry("1.6 → 2.0, old BIRD SIGTERMed", Label("bird-1.6", "bird-2.0"), release.BIRD16, release.BIRD20, syscall.SIGTERM, true),
		Entry("2.0 → 3.1, old BIRD SIGKILLed", Label("bird-2.0", "bird-3.1"), release.BIRD20, release.BIRD31, syscall.SIGKILL, true),
		Entry("2.0 → 3.1, old BIRD SIGTERMed", Label("bird-2.0", "bird-3.1"), release.BIRD20, release.BIRD31, syscall.SIGTERM, true),
	)
})

// dirGap is the worst of a set of flows.
type dirGap struct {
	gap   float64
	lost  int64
	flows int
}

func (d *dirGap) add(f report.GapReport) {
	d.gap = max(d.gap, f.LongestGapMs)
	d.lost += f.Lost
	d.flows++
}

// upgradeGaps splits the flows into out of node n, into it, and between
// the others.
func upgradeGaps(n *harness.Node, rep *report.Report) (out, in, other dirGap) {
	for _, f := range rep.Flows {
		switch {
		case isFrom(n, f.SrcAddr):
			out.add(f)
		case isFrom(n, f.DstAddr):
			in.add(f)
		default:
			other.add(f)
		}
	}
	return out, in, other
}

func upgradeTable(n *harness.Node, rep *report.Report, out, in, other dirGap) string {
	tab := results.NewTable("direction", "flows", "longest gap ms", "lost")
	tab.Add(results.Cellf("out of %s", n.Name), out.flows, results.Cellf("%.1f", out.gap), out.lost)
	tab.Add(results.Cellf("into %s", n.Name), in.flows, results.Cellf("%.1f", in.gap), in.lost)
	tab.Add("between the others", other.flows, results.Cellf("%.1f", other.gap), other.lost)
	return tab.String()
}

// birdUpgrade is one entry of the BIRD-upgrade spec: node-2 (up) moving
// from one BIRD release to another, its probes and marks.
type birdUpgrade struct {
	c                       *harness.Cluster
	from, to                release.Name
	sig                     syscall.Signal
	up                      *harness.Node
	remote                  []netip.Prefix
	probes                  *probe.Session
	begin, established, end results.Event
	atEnd, rep              *report.Report
}

// startBIRDUpgrade: node-2 starts on BIRD from (guard) and programs every
// remote block (guard); probes running.
func startBIRDUpgrade(ctx SpecContext, from, to release.Name, sig syscall.Signal) *birdUpgrade {
	GinkgoHelper()
	u := &birdUpgrade{from: from, to: to, sig: sig}
	needRelease(to)
	u.c = releaseCluster(ctx, from, builtinTopology("noencap"), harness.Options{})
	u.up = u.c.Node("node-2")
	u.remote = u.c.RemoteBlocks(u.up.Name)
	Expect(u.remote).NotTo(BeEmpty())
	Expect(birdAnswers(ctx, u.up)).To(HavePrefix("BIRD "+string(from)+"."), "guard: node-2 starts on BIRD %s", from)
	expectBIRDPrograms(ctx, u.up, u.remote, "guard, before the upgrade")
	var err error
	u.probes, err = u.c.Probes(ctx, harness.ProbeOptions{})
	Expect(err).NotTo(HaveOccurred())
	return u
}

// upgrade replaces node-2's BIRD and waits until every flow delivers.
func (u *birdUpgrade) upgrade(ctx SpecContext) {
	GinkgoHelper()
	grBefore := map[string]int{}
	for _, n := range u.c.Nodes() {
		grBefore[n.Name] = gracefulRestartsDone(n)
	}
	u.begin = u.c.Mark(fmt.Sprintf("BIRD upgrade %s→%s begins", u.from, u.to))
	Expect(u.c.UpgradeNode(ctx, u.up.Name, config.R333, harness.UpgradeOptions{Signal: u.sig, BIRD: string(u.to)})).Error().NotTo(HaveOccurred())
	Expect(u.c.WaitConverged(ctx)).To(Succeed())
	u.established = u.c.Mark("converged after the BIRD upgrade")
	if u.sig == syscall.SIGKILL {
		// The span runs until every peer has ended node-2's
		// graceful restart (BIRD logs it, v1.6.8 and v2.0.12
		// proto/bgp/bgp.c), where it installs the refreshed
		// routes: so what that does to the kernel is judged in
		// every run, not only when it happens to come early.
		for _, n := range u.c.Nodes() {
			if n == u.up {
				continue
			}
			Eventually(func() int { return gracefulRestartsDone(n) }).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
				Should(BeNumerically(">", grBefore[n.Name]), "%s's BIRD should end node-2's graceful restart (its log: %s)", n.Name, n.BIRD.LogPath())
		}
		u.c.Mark("every peer ended node-2's graceful restart")
	}
	expectBIRDPrograms(ctx, u.up, u.remote, "after the upgrade to BIRD "+string(u.to))
	// Every flow delivering again, so the report's gaps are closed.
	Eventually(flowsDelivering(u.probes)).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(60 * time.Second)).WithPolling(50 * time.Millisecond).Should(Succeed())
	u.end = u.c.Mark("every flow delivering")
	Expect(birdAnswers(ctx, u.up)).To(HavePrefix("BIRD "+string(u.to)+"."), "node-2 runs BIRD %s after the upgrade", u.to)
	var err error
	u.atEnd, err = u.probes.Report()
	Expect(err).NotTo(HaveOccurred())
	u.rep, err = u.probes.Stop()
	Expect(err).NotTo(HaveOccurred())
}

// recordFigures registers the gaps per direction; the figures of the
// peers' windows join the same row afterwards.
func (u *birdUpgrade) recordFigures() results.ScenarioResult {
	GinkgoHelper()
	name := fmt.Sprintf("BIRD upgrade %s→%s on node-2 (%s)", u.from, u.to, u.sig)
	res := u.c.Result(name, u.rep)
	out, in, other := upgradeGaps(u.up, u.rep)
	res.Figure("outboundLongestGapMs", out.gap, results.KindGap)
	res.Figure("inboundLongestGapMs", in.gap, results.KindGap)
	res.Figure("otherLongestGapMs", other.gap, results.KindGap)
	res.Figure("outboundLost", float64(out.lost), results.KindLoss)
	res.Figure("inboundLost", float64(in.lost), results.KindLoss)
	res.Figure("convergedMs", monoclock.Ms(u.established.Mono-u.begin.Mono), results.KindDuration)
	res.Figure("allDeliveringMs", monoclock.Ms(u.end.Mono-u.begin.Mono), results.KindDuration)
	res.Notes = append(res.Notes, fmt.Sprintf("node-2's BIRD %s → %s, old BIRD %s, new BIRD started with -R; the programmer restarts with it (pod replacement)", u.from, u.to, u.sig))
	if u.sig == syscall.SIGKILL && u.from != release.BIRD16 {
		// The peers run `from`: upstream BIRD 2 replaces the
		// refreshed route; the 1.6 → 2.0 entry is the fork's side.
		res.DependsOnUpstreamBIRD(upstreamReplaceNoWindow)
	}
	scenariotest.Record(name+": gap per flow", upgradeTable(u.up, u.rep, out, in, other)+results.GapTable(u.rep), res)
	return res
}

// peerNoRouteWindows: the peers' own no-route windows for node-2's blocks. Graceful
// restart keeps their routes while node-2's BIRD is away, but
// when it ends a peer installs the refreshed route, and where
// the new BIRD announces other attributes (2.0 after 1.6) a
// peer on the fork's base deletes the old kernel route and then
// adds the new one: the fork's krt_replace_rte does
// NL_OP_DELETE then NL_OP_ADD on purpose (projectcalico/bird
// feature-ipinip 1e2ff99d, sysdep/linux/netlink.c; upstream
// v1.6.8 the same), where BIRD 2 replaces IPv4 routes in one
// operation (v2.0.12 nl_allow_replace). Measured here: one or
// two such windows per peer, 0.003–1.05 ms, at "graceful
// restart done", and 1 probe in 4 runs lost in one when it fell
// before the converged mark.
func (u *birdUpgrade) peerNoRouteWindows(res *results.ScenarioResult) map[string][]event.Window {
	GinkgoHelper()
	peerWindows := map[string][]event.Window{}
	var nWindows int
	var longestWindow float64
	for _, n := range u.c.Nodes() {
		if n == u.up {
			continue
		}
		for _, b := range u.up.NS.Blocks {
			for _, w := range u.c.Timeline(n.Name).NoRouteWindows(b.CIDR, u.begin.Mono, u.end.Mono) {
				peerWindows[n.Name] = append(peerWindows[n.Name], w)
				nWindows++
				longestWindow = max(longestWindow, w.Ms())
			}
		}
	}
	res.Figure("peerNoRouteWindows", float64(nWindows), results.KindCount)
	res.Figure("longestPeerNoRouteMs", longestWindow, results.KindGap)
	return peerWindows
}

// expectFlows judges every flow of node-2: outbound none lost (design §4,
// persist and -R); inbound after a SIGKILL none lost, except inside a 1.6
// peer's own delete-then-add windows.
func (u *birdUpgrade) expectFlows(res *results.ScenarioResult, peerWindows map[string][]event.Window) {
	GinkgoHelper()
	var inPeerWindows uint64
	for _, f := range u.rep.Flows {
		if isFrom(u.up, f.SrcAddr) {
			Expect(f).To(judge.HaveNoGap().Through(u.atEnd), "design §4 (persist, -R): node-2 lost probes to %s while its BIRD moved %s→%s", f.DstAddr, u.from, u.to)
		}
		if u.sig != syscall.SIGKILL || !isFrom(u.up, f.DstAddr) {
			continue
		}
		src := u.c.Net.NodeOfWorkloadAddr(f.SrcAddr).Name
		ws := peerWindows[src]
		if u.from != release.BIRD16 || len(ws) == 0 {
			Expect(f).To(judge.HaveNoGap().Through(u.atEnd), "graceful restart: after a SIGKILL peers keep node-2's routes as stale, so %s→node-2 loses nothing", f.SrcAddr)
			continue
		}
		// A 1.6 peer that opened a delete-then-add window: each
		// hole of the flow must lie in one (the timeline stamps
		// an event when it reads it, up to peerWindowLag late).
		Expect(f.DisruptionCount).To(Equal(len(f.Disruptions)), "flow %s: more holes than the report lists, so not every hole can be explained", f.Flow)
		for _, d := range f.Disruptions {
			if d.StartNs < u.begin.Mono || d.StartNs > u.end.Mono {
				continue
			}
			explained := slices.ContainsFunc(ws, func(w event.Window) bool {
				return w.Unjudgeable == "" && d.StartNs >= w.From-int64(peerWindowLag) && d.StartNs <= w.To
			})
			Expect(explained).To(BeTrue(), "graceful restart: after a SIGKILL peers keep node-2's routes as stale, so %s→node-2 loses nothing outside %s's own delete-then-add windows %v; lost %d at %+.1f ms", f.SrcAddr, src, ws, d.Lost, float64(d.StartNs-u.begin.Mono)/1e6)
			inPeerWindows += d.Lost
		}
	}
	res.Figure("inboundLostInPeerNoRouteWindows", float64(inPeerWindows), results.KindLoss)
}
