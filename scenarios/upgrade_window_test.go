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
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
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
			By("1-2. every node on 3.32; guard: BIRD programs every remote block via tunl0 at 1024, alone")
			w := startUpgradeWindow(ctx, writeOrder)
			By("3-4. probes between every pair; node-2 upgraded to 3.33 (old BIRD SIGKILLed), the programmer takes the routes over")
			w.upgrade(ctx)
			By("5. per block: the takeover's order and its windows, from node-2's route timeline")
			tos, lines := w.takeovers()
			w.recordFigures(tos, lines)
			if wantWindow {
				By("6. the gap: BIRD's route deleted before the programmer's was added, and a window, for some block")
				Expect(slices.ContainsFunc(tos, func(t takeover) bool { return t.deleteFirst() && len(t.windows) > 0 })).To(BeTrue(),
					"known gap closed: the 3.32 → 3.33 upgrade left no remote block without a route (%s). "+
						"Update the design's §4 (\"Upgrading the code\") for this path and turn this entry into the claim", strings.Join(lines, "; "))
				return
			}
			By("6. control: replace-first adds the programmer's route beside BIRD's first; no window, no outbound loss")
			for _, t := range tos {
				Expect(t.deleteFirst()).To(BeFalse(), "control: with replace-first the programmer's route to %s is added before BIRD's is deleted: %s", t.block, t)
				Expect(t.windows).To(BeEmpty(), "control: with replace-first node-2 is never without a route to %s: %s", t.block, t)
			}
			w.expectNoOutboundLossBeyondPlatform()
		},
		Entry("Felix's order (delete-first): BIRD's metric-1024 route is deleted before the programmer's is added, a window per block", "", true),
		Entry("control, write order replace-first: the programmer's route goes in beside BIRD's first, no window", "replace-first", false),
	)
})

// upgradeWindow is one entry of the upgrade-window spec.
type upgradeWindow struct {
	c              *harness.Cluster
	wantOrder      string // the programmer's write order
	upgraded       *harness.Node
	remote         []netip.Prefix
	probes         *probe.Session
	begin, end     results.Event
	atBegin, atEnd *report.Report
	rep            *report.Report
}

// startUpgradeWindow is steps 1-3: every node on 3.32 (BIRD owns the IPIP
// routes, at 1024), guarded; probes both ways between every pair of nodes.
func startUpgradeWindow(ctx SpecContext, writeOrder string) *upgradeWindow {
	GinkgoHelper()
	w := &upgradeWindow{wantOrder: writeOrder}
	if w.wantOrder == "" {
		w.wantOrder = "delete-first"
	}
	w.c = scenariotest.StartCluster(ctx, "ipip", harness.Options{Release: config.R332, ProgrammerKnobs: programmer.Knobs{WriteOrder: writeOrder}})
	w.upgraded = w.c.Node("node-2")
	w.remote = w.c.RemoteBlocks(w.upgraded.Name)
	Expect(w.remote).NotTo(BeEmpty())
	// 2. Guard: BIRD programs every w.remote block via tunl0 at
	// metric 1024, and no other route to it.
	for _, b := range w.remote {
		Eventually(w.upgraded).WithPolling(50 * time.Millisecond).
			Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice).Gateway(nodeAddrOf(w.c, b)).Onlink().Only())
	}
	metrics := birdMetricsTo(w.upgraded, w.remote)
	Expect(metrics).To(HaveLen(len(w.remote)), "guard: one BIRD route per w.remote block")
	Expect(metrics).To(HaveEach(windowBIRDMetric), "guard: on 3.32 BIRD writes its routes at metric %d", windowBIRDMetric)
	var err error
	w.probes, err = w.c.Probes(ctx, harness.ProbeOptions{})
	Expect(err).NotTo(HaveOccurred())
	w.atBegin, err = w.probes.Report()
	Expect(err).NotTo(HaveOccurred())
	return w
}

// upgrade is step 4.
func (w *upgradeWindow) upgrade(ctx SpecContext) {
	GinkgoHelper()
	// 4. Upgrade node-2 to 3.33, the old BIRD SIGKILLed (a pod
	// deletion); the programmer takes the routes over.
	w.begin = scenariotest.Act(w.c.UpgradeNode(ctx, w.upgraded.Name, config.R333, harness.UpgradeOptions{Signal: syscall.SIGKILL}))
	st, err := w.upgraded.Programmer.Status()
	Expect(err).NotTo(HaveOccurred())
	Expect(st.WriteOrder).To(Equal(w.wantOrder), "guard: the 3.33 programmer writes %s", w.wantOrder)
	Expect(st.ClaimsBIRDTunnelRoutes).To(BeTrue(), "guard: the 3.33 programmer claims BIRD's tunl0 routes")
	for _, b := range w.remote {
		Eventually(w.upgraded).WithPolling(20 * time.Millisecond).
			Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).
				Via(topo.TunnelDevice).Gateway(nodeAddrOf(w.c, b)).Onlink().Only())
	}
	Expect(w.c.WaitConverged(ctx)).To(Succeed())
	Eventually(func() []kroute.Route { return birdRoutesTo(w.upgraded, w.remote) }).
		WithPolling(100 * time.Millisecond).Should(BeEmpty())
	w.end = w.c.Mark("converged after upgrade")
	w.atEnd, err = w.probes.Report()
	Expect(err).NotTo(HaveOccurred())
	w.rep, err = w.probes.Stop()
	Expect(err).NotTo(HaveOccurred())
}

// takeovers is step 5: per block, the takeover's order and its windows,
// from the upgraded node's route timeline (judgeable over the upgrade).
func (w *upgradeWindow) takeovers() ([]takeover, []string) {
	GinkgoHelper()
	tl := w.c.Timeline(w.upgraded.Name)
	Expect(tl.Judgeable(w.begin.Mono, w.end.Mono)).To(Succeed(), "the route timeline of %s saw the whole upgrade", w.upgraded.Name)
	var tos []takeover
	var lines []string
	for _, b := range w.remote {
		t := takeoverOf(tl, b, w.begin.Mono, w.end.Mono)
		Expect(t.unjudgable).To(BeEmpty(), "%s: windows the timeline cannot judge", b)
		Expect(t.birdDelAt).NotTo(BeZero(), "control: %s's timeline shows BIRD's metric-%d route to %s deleted (the claim's takeover happened); events %v", w.upgraded.Name, windowBIRDMetric, b, tl.EventsFor(b, w.begin.Mono, w.end.Mono))
		Expect(t.progAddAt).NotTo(BeZero(), "control: %s's timeline shows the programmer's route to %s added", w.upgraded.Name, b)
		tos = append(tos, t)
		lines = append(lines, t.String())
	}
	return tos, lines
}

// recordFigures registers the windows per block and the upgraded node's
// loss.
func (w *upgradeWindow) recordFigures(tos []takeover, lines []string) {
	GinkgoHelper()
	res := w.c.Result(fmt.Sprintf("upgrade 3.32 → 3.33 IPIP, programmer write order %s (SIGKILL)", w.wantOrder), w.rep)
	var ms []float64
	withWindow := 0
	for _, t := range tos {
		w := float64(t.windowNs) / 1e6
		res.Figure(t.block.String()+" upgradeNoRouteWindowMs", w, results.KindGap)
		ms = append(ms, w)
		if len(t.windows) > 0 {
			withWindow++
		}
	}
	sort.Float64s(ms)
	res.Figure("upgradeNoRouteWindowMsMin", ms[0], results.KindGap)
	res.Figure("upgradeNoRouteWindowMsMedian", ms[len(ms)/2], results.KindGap)
	res.Figure("upgradeNoRouteWindowMsMax", ms[len(ms)-1], results.KindGap)
	res.Figure("blocksWithNoRouteWindow", float64(withWindow), results.KindCount)
	res.AddNodeLossFigures(w.rep, func(a netip.Addr) bool { return isFrom(w.upgraded, a) })
	res.Notes = append(res.Notes, lines...)
	scenariotest.Record(fmt.Sprintf("upgrade of node-2 3.32 → 3.33, write order %s: %d of %d w.remote blocks without a route for a while, per block min/median/max %.3f/%.3f/%.3f ms; outbound lost %.0f",
		w.wantOrder, withWindow, len(tos), ms[0], ms[len(ms)/2], ms[len(ms)-1], res.Figures["lostOutboundUpgradedNode"]),
		strings.Join(lines, "\n")+"\n"+results.GapTable(w.rep), res)
}

// expectNoOutboundLossBeyondPlatform: the control's node-2 lost no
// outbound probe beyond the platform's own loss (the flows not involving it).
func (w *upgradeWindow) expectNoOutboundLossBeyondPlatform() {
	GinkgoHelper()
	controls, err := judge.Holes(w.rep, judge.SinceSnapshot(w.atBegin, w.atEnd), judge.NotInvolving(w.upgraded))
	Expect(err).NotTo(HaveOccurred())
	platform, err := judge.PlatformLossOf(controls, scenariotest.Machine.Stalls())
	Expect(err).NotTo(HaveOccurred(), "guard: flows that do not involve node-2 measure the platform's own loss")
	AddReportEntry("platform loss", platform.String())
	for _, f := range w.rep.Flows {
		if isFrom(w.upgraded, f.SrcAddr) {
			Expect(f).To(judge.HaveNoGap().Through(w.atEnd).BeyondPlatform(platform), "control: node-2 lost probes to %s during its upgrade with replace-first", f.DstAddr)
		}
	}
}
