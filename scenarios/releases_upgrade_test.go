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
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
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
			needRelease(to)
			c := releaseCluster(ctx, from, builtinTopology("noencap"), harness.Options{})
			up := c.Node("node-2")
			remote := c.RemoteBlocks(up.Name)
			Expect(remote).NotTo(BeEmpty())
			Expect(birdAnswers(ctx, up)).To(HavePrefix("BIRD "+string(from)+"."), "guard: node-2 starts on BIRD %s", from)
			expectBIRDPrograms(ctx, up, remote, "guard, before the upgrade")
			probes, err := c.Probes(ctx, harness.ProbeOptions{})
			Expect(err).NotTo(HaveOccurred())

			grBefore := map[string]int{}
			for _, n := range c.Nodes() {
				grBefore[n.Name] = gracefulRestartsDone(n)
			}
			begin := c.Mark(fmt.Sprintf("BIRD upgrade %s→%s begins", from, to))
			Expect(c.UpgradeNode(ctx, up.Name, config.R333, harness.UpgradeOptions{Signal: sig, BIRD: string(to)})).Error().NotTo(HaveOccurred())
			Expect(c.WaitConverged(ctx)).To(Succeed())
			established := c.Mark("converged after the BIRD upgrade")
			if sig == syscall.SIGKILL {
				// The span runs until every peer has ended node-2's
				// graceful restart (BIRD logs it, v1.6.8 and v2.0.12
				// proto/bgp/bgp.c), where it installs the refreshed
				// routes: so what that does to the kernel is judged in
				// every run, not only when it happens to come early.
				for _, n := range c.Nodes() {
					if n == up {
						continue
					}
					Eventually(func() int { return gracefulRestartsDone(n) }).WithTimeout(machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
						Should(BeNumerically(">", grBefore[n.Name]), "%s's BIRD should end node-2's graceful restart (its log: %s)", n.Name, n.BIRD.LogPath())
				}
				c.Mark("every peer ended node-2's graceful restart")
			}
			expectBIRDPrograms(ctx, up, remote, "after the upgrade to BIRD "+string(to))
			// Every flow delivering again, so the report's gaps are closed.
			Eventually(flowsDelivering(probes)).WithContext(ctx).WithTimeout(machine.Wait(60 * time.Second)).WithPolling(50 * time.Millisecond).Should(Succeed())
			end := c.Mark("every flow delivering")
			Expect(birdAnswers(ctx, up)).To(HavePrefix("BIRD "+string(to)+"."), "node-2 runs BIRD %s after the upgrade", to)
			atEnd, err := probes.Report()
			Expect(err).NotTo(HaveOccurred())
			rep, err := probes.Stop()
			Expect(err).NotTo(HaveOccurred())

			name := fmt.Sprintf("BIRD upgrade %s→%s on node-2 (%s)", from, to, sig)
			res := c.Result(name, rep)
			out, in, other := upgradeGaps(up, rep)
			res.Figures["outboundLongestGapMs"] = out.gap
			res.Figures["inboundLongestGapMs"] = in.gap
			res.Figures["otherLongestGapMs"] = other.gap
			res.Figures["outboundLost"] = float64(out.lost)
			res.Figures["inboundLost"] = float64(in.lost)
			res.Figures["convergedMs"] = monoclock.Ms(established.Mono - begin.Mono)
			res.Figures["allDeliveringMs"] = monoclock.Ms(end.Mono - begin.Mono)
			res.Notes = append(res.Notes, fmt.Sprintf("node-2's BIRD %s → %s, old BIRD %s, new BIRD started with -R; the programmer restarts with it (pod replacement)", from, to, sig))
			if sig == syscall.SIGKILL && from != release.BIRD16 {
				// The peers run `from`: upstream BIRD 2 replaces the
				// refreshed route; the 1.6 → 2.0 entry is the fork's side.
				res.DependsOnUpstreamBIRD(upstreamReplaceNoWindow)
			}
			report(name+": gap per flow", upgradeTable(up, rep, out, in, other)+results.GapTable(rep), res)

			// The peers' own no-route windows for node-2's blocks. Graceful
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
			peerWindows := map[string][]event.Window{}
			var nWindows int
			var longestWindow float64
			for _, n := range c.Nodes() {
				if n == up {
					continue
				}
				for _, b := range up.NS.Blocks {
					for _, w := range c.Timeline(n.Name).NoRouteWindows(b.CIDR, begin.Mono, end.Mono) {
						peerWindows[n.Name] = append(peerWindows[n.Name], w)
						nWindows++
						longestWindow = max(longestWindow, w.Ms())
					}
				}
			}
			res.Figures["peerNoRouteWindows"] = float64(nWindows)
			res.Figures["longestPeerNoRouteMs"] = longestWindow
			var inPeerWindows uint64
			for _, f := range rep.Flows {
				if isFrom(up, f.SrcAddr) {
					Expect(f).To(judge.HaveNoGap().Through(atEnd), "design §4 (persist, -R): node-2 lost probes to %s while its BIRD moved %s→%s", f.DstAddr, from, to)
				}
				if sig != syscall.SIGKILL || !isFrom(up, f.DstAddr) {
					continue
				}
				src := c.Net.NodeOfWorkloadAddr(f.SrcAddr).Name
				ws := peerWindows[src]
				if from != release.BIRD16 || len(ws) == 0 {
					Expect(f).To(judge.HaveNoGap().Through(atEnd), "graceful restart: after a SIGKILL peers keep node-2's routes as stale, so %s→node-2 loses nothing", f.SrcAddr)
					continue
				}
				// A 1.6 peer that opened a delete-then-add window: each
				// hole of the flow must lie in one (the timeline stamps
				// an event when it reads it, up to peerWindowLag late).
				Expect(f.DisruptionCount).To(Equal(len(f.Disruptions)), "flow %s: more holes than the report lists, so not every hole can be explained", f.Flow)
				for _, d := range f.Disruptions {
					if d.StartNs < begin.Mono || d.StartNs > end.Mono {
						continue
					}
					explained := slices.ContainsFunc(ws, func(w event.Window) bool {
						return w.Unjudgeable == "" && d.StartNs >= w.From-int64(peerWindowLag) && d.StartNs <= w.To
					})
					Expect(explained).To(BeTrue(), "graceful restart: after a SIGKILL peers keep node-2's routes as stale, so %s→node-2 loses nothing outside %s's own delete-then-add windows %v; lost %d at %+.1f ms", f.SrcAddr, src, ws, d.Lost, float64(d.StartNs-begin.Mono)/1e6)
					inPeerWindows += d.Lost
				}
			}
			res.Figures["inboundLostInPeerNoRouteWindows"] = float64(inPeerWindows)
			for _, b := range remote {
				Expect(c.Timeline(up.Name).NoRouteWindows(b, begin.Mono, end.Mono)).To(BeEmpty(), "node-2 had no route to %s while its BIRD moved %s→%s", b, from, to)
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

func (d *dirGap) add(f probe.GapReport) {
	d.gap = max(d.gap, f.LongestGapMs)
	d.lost += f.Lost
	d.flows++
}

// upgradeGaps splits the flows into out of node n, into it, and between
// the others.
func upgradeGaps(n *harness.Node, rep *probe.Report) (out, in, other dirGap) {
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

func upgradeTable(n *harness.Node, rep *probe.Report, out, in, other dirGap) string {
	tab := results.NewTable("direction", "flows", "longest gap ms", "lost")
	tab.Add(results.Cellf("out of %s", n.Name), out.flows, results.Cellf("%.1f", out.gap), out.lost)
	tab.Add(results.Cellf("into %s", n.Name), in.flows, results.Cellf("%.1f", in.gap), in.lost)
	tab.Add("between the others", other.flows, results.Cellf("%.1f", other.gap), other.lost)
	return tab.String()
}
