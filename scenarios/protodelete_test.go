package scenarios_test

// Claim (design §4, end of "Changing the configuration on a running
// cluster"): once the route programmer has re-programmed a destination with
// its own protocol (80), BIRD cannot take that route away. BIRD removes a
// kernel route with a delete that names its own protocol, and the kernel
// matches a delete's protocol when it carries one, so the delete misses the
// programmer's route.
//
// Scenario: an IPIP cluster on pre-3.33; node-2 is upgraded to 3.33, so its
// routes to the other blocks become proto 80 while its new BIRD goes on
// learning those blocks over BGP. Then node-3's BIRD is stopped with
// SIGTERM, so it sends a Cease and every peer withdraws node-3's block at
// once. node-2 must keep its route to that block, at proto 80, with no window
// without it, no delete of it, and no probe lost from node-2 to node-3.
//
// Positive control: node-1 is still on pre-3.33, where the route is BIRD's;
// the same withdrawal deletes it there (the timeline shows the delete), so
// the withdrawal really happened. node-2's own BIRD is seen losing the
// BGP route too.
//
// A note on what this exercises on node-2: its 3.33 BIRD's kernel filter
// rejects the IPIP pool, so BIRD does not even try to remove node-2's route
// when the block is withdrawn. To hold the kernel half of the claim in place
// as well, the scenario then sends node-2's kernel the very delete BIRD
// would send for that prefix (BIRD's protocol and kernel metric) and asserts
// the kernel refuses it (ESRCH) and the proto 80 route stays.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

var _ = Describe("Protocol-matched delete", Label("ipip", "protodelete"), func() {
	It("BIRD's withdrawal of a destination the programmer has re-programmed removes nothing and loses no probe", func(ctx SpecContext) {
		// 1. Every node on pre-3.33: BIRD owns the IPIP routes.
		c := scenariotest.StartCluster(ctx, "ipip", harness.Options{Release: config.Pre333})
		node1, node2, node3 := c.Node("node-1"), c.Node("node-2"), c.Node("node-3")
		block := blockOf(node3.NS, "ipip-pool")
		for _, n := range []*harness.Node{node1, node2} {
			Eventually(n).WithPolling(50*time.Millisecond).
				Should(judge.HaveClusterRoute(block).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice), "guard before the upgrade")
		}

		By("2. node-2 to 3.33: its routes become the programmer's; its new BIRD recovers, reconciles and learns the blocks again")
		exportedToKernel := protoDeleteUpgradeNode2(ctx, c, node2, block)

		// 3. Probes node-2 <-> node-3, and node-1 -> node-3 for the control.
		wl1, wl2, wl3 := harness.Endpoint(node1.NS.Workloads[0]), harness.Endpoint(node2.NS.Workloads[0]), harness.Endpoint(node3.NS.Workloads[0])
		probes, err := c.Probes(ctx, harness.ProbeOptions{Flows: append(probe.Both(wl2, wl3), report.Flow{Src: wl1, Dst: wl3})})
		Expect(err).NotTo(HaveOccurred())

		// 4. The withdrawal: node-3's BIRD stops with SIGTERM and sends a
		// Cease, so its peers withdraw its block at once.
		withdrawn := scenariotest.Act(c.KillBIRD(ctx, node3.Name, syscall.SIGTERM))

		// 5. Positive control: on pre-3.33 node-1 the withdrawal deletes
		// BIRD's route, and node-2's BIRD loses the BGP route.
		Eventually(func() []event.Event { return deletesOf(c.Timeline(node1.Name), block, withdrawn.Mono, 0) }).
			WithPolling(20*time.Millisecond).ShouldNot(BeEmpty(),
			"control: node-1 (pre-3.33, BIRD's route) should lose its route to %s when node-3 withdraws it", block)
		Eventually(func() bool { return learnedOverBGP(ctx, node2, block) }).WithPolling(50*time.Millisecond).
			Should(BeFalse(), "node-2's BIRD should have seen the withdrawal of %s", block)
		controlDelete := deletesOf(c.Timeline(node1.Name), block, withdrawn.Mono, 0)[0]
		birdSawIt := c.Mark("node-2's BIRD lost the BGP route")

		// 6. The kernel half: the delete BIRD sends for this prefix names
		// its protocol and its kernel metric; node-2's kernel must refuse it.
		cl, err := c.Datastore().Read(ctx)
		Expect(err).NotTo(HaveOccurred())
		delErr := deleteAsBIRD(node2, block, confd.RouteMetric(cl.BGP, node2.Release()))
		Expect(errors.Is(delErr, unix.ESRCH)).To(BeTrue(),
			"a delete of %s carrying proto bird should miss node-2's proto 80 route (ESRCH); got %v", block, delErr)

		// 7. Long enough for BIRD's kernel scans and two full resyncs of the
		// programmer to have acted on whatever they would.
		waitFullResyncs(node2, 2)
		end := c.Mark("two full resyncs after the withdrawal")

		endRep, sentByEnd, rep := drainNode2ToNode3(probes, wl2, wl3)

		// 8. Figures.
		tl2 := c.Timeline(node2.Name)
		flaps := tl2.Flaps(block, withdrawn.Mono, end.Mono)
		res := c.Result("protocol-matched delete: BIRD withdraws a destination the programmer owns", rep)
		for _, f := range rep.Flows {
			res.Figure("lost "+f.Flow, float64(f.Lost), results.KindLoss)
			res.Figure("missing "+f.Flow, float64(f.Missing), results.KindLoss)
		}
		res.Figure("node2ToNode3SentByEndMark", float64(sentByEnd), results.KindSize)
		res.Figure("controlDeleteAfterWithdrawalMs", float64(controlDelete.At-withdrawn.Mono)/1e6, results.KindDuration)
		res.Figure("node2BIRDWithdrawalSeenByHarnessMs", float64(birdSawIt.Mono-withdrawn.Mono)/1e6, results.KindDuration)
		res.Figure("node2RouteEventsAfterWithdrawal", float64(flaps.Changes()), results.KindCount)
		res.Notes = append(res.Notes,
			fmt.Sprintf("node-2's BIRD exported %s to its kernel before the withdrawal: %v (3.33's kernel filter rejects IPIP pools)", block, exportedToKernel),
			fmt.Sprintf("a hand-made delete of %s with BIRD's protocol and metric on node-2: %v", block, delErr),
			"lost counts probes still in flight when the probes stopped (sent after the end mark); missing counts holes in the sequence")
		scenariotest.Record(fmt.Sprintf("protocol-matched delete: node-3's BIRD SIGTERMed; node-1 (3.32) lost its route %.0f ms after, node-2 (3.33) kept its proto 80 route",
			res.Figures["controlDeleteAfterWithdrawalMs"]), results.GapTable(rep), res)

		// 9. The claim, on node-2: no loss to node-3, the route stayed
		// proto 80 throughout, never missing, never deleted.
		Expect(flowBetween(rep, wl2, wl3)).To(judge.HaveNoGap().Through(endRep), "node-2 lost probes to node-3 after node-3's block was withdrawn")
		Expect(tl2.NoRouteWindows(block, withdrawn.Mono, end.Mono)).To(BeEmpty(), "node-2 had no route to %s after the withdrawal", block)
		Expect(deletesOf(tl2, block, withdrawn.Mono, end.Mono)).To(BeEmpty(), "node-2's route to %s was deleted after the withdrawal", block)
		Expect(flaps.Owners).To(Equal([]kroute.Protocol{designProgrammerProtocol}), "node-2's route to %s should stay the programmer's (proto 80) throughout; owners seen %v", block, flaps.Owners)
		Expect(node2).To(judge.HaveClusterRoute(block).ProgrammedBy(judge.ByProgrammer).Via(topo.TunnelDevice).Only())
	})
})

// deleteAsBIRD sends n's kernel the delete BIRD sends for p: main table,
// BIRD's kernel metric, protocol bird, any scope.
func deleteAsBIRD(n *harness.Node, p netip.Prefix, metric int) error {
	h, err := n.NS.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	return h.RouteDel(&netlink.Route{
		Dst:      &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
		Table:    syscall.RT_TABLE_MAIN,
		Priority: metric,
		Protocol: netlink.RouteProtocol(kroute.ProtoBIRD),
		Scope:    netlink.SCOPE_NOWHERE,
	})
}

// flowBetween returns the report's flow from a to b.
func flowBetween(rep *report.Report, a, b report.Endpoint) report.GapReport {
	for _, f := range rep.Flows {
		if f.SrcAddr == a.Addr && f.DstAddr == b.Addr {
			return f
		}
	}
	Fail(fmt.Sprintf("no probe flow %s -> %s in the report", a.Name, b.Name))
	return report.GapReport{}
}

// protoDeleteUpgradeNode2 is step 2: node-2 to 3.33, its routes become the
// programmer's, its new BIRD recovers, reconciles and learns the blocks
// over BGP again (guard: or there is nothing for it to withdraw). It
// returns whether node-2's BIRD exported block to its kernel, for a note.
func protoDeleteUpgradeNode2(ctx SpecContext, c *harness.Cluster, node2 *harness.Node, block netip.Prefix) bool {
	GinkgoHelper()
	scenariotest.Act(c.UpgradeNode(ctx, node2.Name, config.R333, harness.UpgradeOptions{}))
	for _, b := range c.RemoteBlocks(node2.Name) {
		Eventually(node2).WithPolling(20 * time.Millisecond).
			Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).Via(topo.TunnelDevice).Only())
	}
	Expect(c.WaitConverged(ctx)).To(Succeed())
	Eventually(func() []kroute.Route { return birdRoutesTo(node2, c.RemoteBlocks(node2.Name)) }).
		WithPolling(100*time.Millisecond).Should(BeEmpty(), "node-2's new BIRD finished recovery and reconciled")
	Eventually(func() bool { return learnedOverBGP(ctx, node2, block) }).WithPolling(100*time.Millisecond).
		Should(BeTrue(), "guard: node-2's new BIRD must learn node-3's block over BGP, or there is nothing for it to withdraw")
	return exportedToKernel(ctx, node2, block)
}

// drainNode2ToNode3: every node-2 -> node-3 probe sent before the end mark
// is inside the claim's window and must arrive, with no hole before it. On
// a loaded emulated machine packets can trail the sender by a second or
// more, so this waits for them (late probes fill holes too); those sent
// after the mark and still in flight when the probes stop are outside the
// window and only reported.
func drainNode2ToNode3(probes *probe.Session, wl2, wl3 report.Endpoint) (endRep *report.Report, sentByEnd uint64, rep *report.Report) {
	GinkgoHelper()
	endRep, err := probes.Report()
	Expect(err).NotTo(HaveOccurred())
	sentByEnd = flowBetween(endRep, wl2, wl3).Sent
	Eventually(func() (report.GapReport, error) {
		r, err := probes.Report()
		if err != nil {
			return report.GapReport{}, err
		}
		return flowBetween(r, wl2, wl3), nil
	}).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).Should(judge.HaveNoGap().Through(endRep),
		"node-2 -> node-3 should deliver every probe it sent before the end mark, with no gap")
	rep, err = probes.Stop()
	Expect(err).NotTo(HaveOccurred())
	return endRep, sentByEnd, rep
}
