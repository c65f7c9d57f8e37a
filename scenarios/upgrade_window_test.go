package scenarios_test

// Known gap (design §4, "Upgrading the code"): the design says upgrading a
// node from a release in which BIRD programs the IPIP cluster routes to
// 3.33 leaves no moment in which a destination has no route, because the
// programmer takes each of BIRD's persisted routes with one RouteReplace.
// That holds from 3.31 (upgrade_test.go), not from 3.32, as Calico ships
// it:
//
//   - from 3.32 confd's kernel filter writes BGP routes at krt_metric 1024
//     (calico_kernel_programming, confd SetMetricForBGPRoutes @
//     de60d98e97a7; docs/conformance.md row 17), while Felix's IPv4 route
//     key has priority 0 (felix/routetable normalizeRouteKey, same commit
//     and 6609dea54713): BIRD's route and the programmer's are different
//     kernel routes, so no replace takes BIRD's;
//   - 3.33's Felix claims BIRD's routes via tunl0 when it owns IPIP
//     (felix/routetable/ownershippol RouteIsOurs @ 6609dea54713), and its
//     route table applies a pass's deletes before its replaces ("first
//     clean up any old routes", felix/routetable/route_table.go
//     applyUpdates @ 6609dea54713).
//
// So on a 3.32 → 3.33 upgrade the new programmer deletes BIRD's
// metric-1024 route to each remote block and only then adds its own at 0:
// a no-route window per block (docs/conformance-programmer.md measures it
// with the programmer alone: sub-millisecond at 3 blocks, 28–52 ms median
// per block at 1000). The spec asserts the window on the upgraded node's
// route timeline for some remote block and reports its length per block
// (upgradeNoRouteWindowMs); the day it is gone (Felix replacing first,
// say) the spec fails and asks for the design's §4 to be updated for this
// path.
//
// Guard: before the upgrade BIRD's routes to every remote block are at
// metric 1024 via tunl0 (else there is nothing to delete first). Positive
// control, the same upgrade with the programmer's write-order knob
// replace-first (birdcage's old order): the programmer's route is added
// beside BIRD's before BIRD's is deleted, and the timeline shows no window
// and the upgraded node loses no outbound probe beyond the platform's own.

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// windowBIRDMetric is the kernel metric 3.32's BIRD writes BGP routes at
// (krt_metric 1024 in calico_kernel_programming @ de60d98e97a7).
const windowBIRDMetric = 1024

// takeover is what the upgraded node's timeline shows for one remote
// block: when BIRD's metric-1024 route was deleted, when the programmer's
// route was added, and the no-route windows in between.
type takeover struct {
	block      netip.Prefix
	birdDelAt  int64 // 0: no delete of BIRD's route seen
	progAddAt  int64 // 0: no add of the programmer's route seen
	windows    []event.Window
	windowNs   int64 // total length of the observed windows
	unjudgable []string
}

func (t takeover) deleteFirst() bool {
	return t.birdDelAt != 0 && t.progAddAt != 0 && t.birdDelAt <= t.progAddAt
}

func (t takeover) String() string {
	order := fmt.Sprintf("the programmer's add, then BIRD's route deleted %.3f ms later", float64(t.birdDelAt-t.progAddAt)/1e6)
	if t.deleteFirst() {
		order = fmt.Sprintf("BIRD's route deleted, then the programmer's added %.3f ms later", float64(t.progAddAt-t.birdDelAt)/1e6)
	}
	return fmt.Sprintf("%s: %s; %d window(s), %.3f ms without a route", t.block, order, len(t.windows), float64(t.windowNs)/1e6)
}

func takeoverOf(tl *timeline.Monitor, b netip.Prefix, from, to int64) takeover {
	GinkgoHelper()
	t := takeover{block: b}
	for _, e := range tl.EventsFor(b, from, to) {
		switch {
		case t.birdDelAt == 0 && e.Kind == event.Delete && e.Route.Protocol == kroute.ProtoBIRD && e.Route.Metric == windowBIRDMetric:
			t.birdDelAt = e.At
		case t.progAddAt == 0 && e.Kind != event.Delete && e.Route.Protocol == designProgrammerProtocol:
			t.progAddAt = e.At
		}
	}
	for _, w := range tl.NoRouteWindows(b, from, to) {
		if w.Unjudgeable != "" {
			t.unjudgable = append(t.unjudgable, w.Unjudgeable)
			continue
		}
		t.windows = append(t.windows, w)
		t.windowNs += w.To - w.From
	}
	return t
}

var _ = Describe("Upgrade 3.32 → 3.33 on IPIP: Felix's delete-first opens a no-route window per block (known gap, design §4)", Label("knowngap", "ipip", "upgrade", "timing", "claim4"), func() {
	DescribeTable("the upgraded node's route to a remote block",
		func(ctx SpecContext, writeOrder string, wantWindow bool) {
			// 1. Every node on 3.32: BIRD owns the IPIP routes, at 1024.
			c := startCluster(ctx, "ipip", harness.Options{Release: config.R332, ProgrammerKnobs: programmer.Knobs{WriteOrder: writeOrder}})
			upgraded := c.Node("node-2")
			remote := c.RemoteBlocks(upgraded.Name)
			Expect(remote).NotTo(BeEmpty())

			// 2. Guard: BIRD programs every remote block via tunl0 at
			// metric 1024, and no other route to it.
			for _, b := range remote {
				Eventually(upgraded).WithPolling(50 * time.Millisecond).
					Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice).Gateway(nodeAddrOf(c, b)).Onlink().Only())
			}
			metrics := birdMetricsTo(upgraded, remote)
			Expect(metrics).To(HaveLen(len(remote)), "guard: one BIRD route per remote block")
			Expect(metrics).To(HaveEach(windowBIRDMetric), "guard: on 3.32 BIRD writes its routes at metric %d", windowBIRDMetric)

			// 3. Probes both ways between every pair of nodes.
			probes, err := c.Probes(ctx, harness.ProbeOptions{})
			Expect(err).NotTo(HaveOccurred())
			atBegin, err := probes.Report()
			Expect(err).NotTo(HaveOccurred())

			// 4. Upgrade node-2 to 3.33, the old BIRD SIGKILLed (a pod
			// deletion); the programmer takes the routes over.
			begin := act(c.UpgradeNode(ctx, upgraded.Name, config.R333, harness.UpgradeOptions{Signal: syscall.SIGKILL}))
			st, err := upgraded.Programmer.Status()
			Expect(err).NotTo(HaveOccurred())
			wantOrder := writeOrder
			if wantOrder == "" {
				wantOrder = "delete-first"
			}
			Expect(st.WriteOrder).To(Equal(wantOrder), "guard: the 3.33 programmer writes %s", wantOrder)
			Expect(st.ClaimsBIRDTunnelRoutes).To(BeTrue(), "guard: the 3.33 programmer claims BIRD's tunl0 routes")
			for _, b := range remote {
				Eventually(upgraded).WithPolling(20 * time.Millisecond).
					Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).
						Via(topo.TunnelDevice).Gateway(nodeAddrOf(c, b)).Onlink().Only())
			}
			Expect(c.WaitConverged(ctx)).To(Succeed())
			Eventually(func() []kroute.Route { return birdRoutesTo(upgraded, remote) }).
				WithPolling(100 * time.Millisecond).Should(BeEmpty())
			end := c.Mark("converged after upgrade")
			atEnd, err := probes.Report()
			Expect(err).NotTo(HaveOccurred())
			rep, err := probes.Stop()
			Expect(err).NotTo(HaveOccurred())

			// 5. Per block: the takeover's order and its windows, from the
			// upgraded node's route timeline (judgeable over the upgrade).
			tl := c.Timeline(upgraded.Name)
			Expect(tl.Judgeable(begin.Mono, end.Mono)).To(Succeed(), "the route timeline of %s saw the whole upgrade", upgraded.Name)
			var tos []takeover
			var lines []string
			for _, b := range remote {
				t := takeoverOf(tl, b, begin.Mono, end.Mono)
				Expect(t.unjudgable).To(BeEmpty(), "%s: windows the timeline cannot judge", b)
				Expect(t.birdDelAt).NotTo(BeZero(), "control: %s's timeline shows BIRD's metric-%d route to %s deleted (the claim's takeover happened); events %v", upgraded.Name, windowBIRDMetric, b, tl.EventsFor(b, begin.Mono, end.Mono))
				Expect(t.progAddAt).NotTo(BeZero(), "control: %s's timeline shows the programmer's route to %s added", upgraded.Name, b)
				tos = append(tos, t)
				lines = append(lines, t.String())
			}

			res := c.Result(fmt.Sprintf("upgrade 3.32 → 3.33 IPIP, programmer write order %s (SIGKILL)", wantOrder), rep)
			var ms []float64
			withWindow := 0
			for _, t := range tos {
				w := float64(t.windowNs) / 1e6
				res.Figures[t.block.String()+" upgradeNoRouteWindowMs"] = w
				ms = append(ms, w)
				if len(t.windows) > 0 {
					withWindow++
				}
			}
			sort.Float64s(ms)
			res.Figures["upgradeNoRouteWindowMsMin"] = ms[0]
			res.Figures["upgradeNoRouteWindowMsMedian"] = ms[len(ms)/2]
			res.Figures["upgradeNoRouteWindowMsMax"] = ms[len(ms)-1]
			res.Figures["blocksWithNoRouteWindow"] = float64(withWindow)
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
			res.Notes = append(res.Notes, lines...)
			report(fmt.Sprintf("upgrade of node-2 3.32 → 3.33, write order %s: %d of %d remote blocks without a route for a while, per block min/median/max %.3f/%.3f/%.3f ms; outbound lost %.0f",
				wantOrder, withWindow, len(tos), ms[0], ms[len(ms)/2], ms[len(ms)-1], res.Figures["lostOutboundUpgradedNode"]),
				strings.Join(lines, "\n")+"\n"+results.GapTable(rep), res)

			if wantWindow {
				// 6. The gap: BIRD's route deleted before the programmer's
				// was added, and a window on the timeline, for some block.
				Expect(slices.ContainsFunc(tos, func(t takeover) bool { return t.deleteFirst() && len(t.windows) > 0 })).To(BeTrue(),
					"known gap closed: the 3.32 → 3.33 upgrade left no remote block without a route (%s). "+
						"Update the design's §4 (\"Upgrading the code\") for this path and turn this entry into the claim", strings.Join(lines, "; "))
				return
			}
			// 6. Control: replace-first adds the programmer's route beside
			// BIRD's before deleting BIRD's, and there is no window.
			for _, t := range tos {
				Expect(t.deleteFirst()).To(BeFalse(), "control: with replace-first the programmer's route to %s is added before BIRD's is deleted: %s", t.block, t)
				Expect(t.windows).To(BeEmpty(), "control: with replace-first node-2 is never without a route to %s: %s", t.block, t)
			}
			controls, err := judge.Holes(rep, judge.SinceSnapshot(atBegin, atEnd), judge.NotInvolving(upgraded))
			Expect(err).NotTo(HaveOccurred())
			platform, err := judge.PlatformLossOf(controls, machine.Stalls())
			Expect(err).NotTo(HaveOccurred(), "guard: flows that do not involve node-2 measure the platform's own loss")
			AddReportEntry("platform loss", platform.String())
			for _, f := range rep.Flows {
				if isFrom(upgraded, f.SrcAddr) {
					Expect(f).To(judge.HaveNoGap().Through(atEnd).BeyondPlatform(platform), "control: node-2 lost probes to %s during its upgrade with replace-first", f.DstAddr)
				}
			}
		},
		Entry("Felix's order (delete-first): BIRD's metric-1024 route is deleted before the programmer's is added, a window per block", "", true),
		Entry("control, write order replace-first: the programmer's route goes in beside BIRD's first, no window", "replace-first", false),
	)
})
