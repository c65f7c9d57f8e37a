package scenarios_test

// Claim (design §4, end of "Changing the configuration on a running
// cluster"): once the route programmer has re-programmed a destination,
// BIRD can no longer withdraw it out from under the programmer. BIRD's
// kernel protocol removes a route it exported with a delete that carries
// RTPROT_BIRD, and the kernel matches the protocol of a delete that names
// one, so the delete misses the programmer's proto 80 route.
//
// protodelete_test.go holds the kernel half with a delete made by hand,
// because there BIRD (3.33, IPIP rejected) never sends one. Here the delete
// is a real BIRD's: on no-encap with the 3.33 defaults BIRD programs the
// cluster routes; FelixConfiguration is then set to Enabled, so the
// programmer takes them too (RouteReplace turns each proto bird route into
// its own in one operation) while BIRD, whose config did not change, still
// exports them to its kernel protocol. Then BGPConfiguration is set to
// Disabled — the supported pair in which the programmer owns everything —
// and BIRD, reconfiguring in place, withdraws what it had exported: its
// kernel protocol sends the kernel a delete for each route.
//
// (A withdrawal by a peer does not serve here: once node-3's BIRD stops,
// node-1 re-advertises the programmer's route to node-3's block to node-2
// over iBGP — §5's known gap for no-encap — so node-2's BIRD never drops
// the prefix; it swaps next hop source and keeps exporting it.)
//
// What BIRD asked the kernel is read from a netlink route trace of each
// node's namespace (harness.RouteTrace, bpf/nltrace.c): every RTM_DELROUTE
// a process there sent, with its protocol, metric, sender and the errno of
// the kernel's ack. BIRD 2 ignores ESRCH on its deletes and logs nothing,
// and a refused delete changes no route, so neither BIRD's log nor the
// route timeline can tell "BIRD's delete missed" from "BIRD sent none"; the
// trace can.
//
// The kernel-metric knob: the claim is about a delete of a route whose key
// (destination, TOS, priority) the programmer's route shares. From 3.32
// Calico's kernel filter writes BGP routes at krt_metric 1024
// (calico_kernel_programming, confd SetMetricForBGPRoutes @ de60d98e97a7 /
// 6609dea54713; docs/conformance.md rows 17–18) while Felix writes IPv4
// cluster routes at priority 0 (felix/routetable normalizeRouteKey, same
// commits), so on the faithful 3.33 profile BIRD's route and the
// programmer's are two kernel routes: the programmer adds beside BIRD's,
// and BIRD's delete removes BIRD's own route, leaving the programmer's
// untouched (the second entry shows that). The design's model — one route
// per destination, BIRD's at the fork's metric 0 (3.31, T31 bird_ipam @
// 3cdeae8f7ace) — is what the first entry runs, with
// BGPConfiguration.kernelMetric 0 (a birdcage knob, recorded as a departure
// in the result) so that BIRD's route and the programmer's share the key.
//
// Guards: before the withdrawal node-2's BIRD exports node-3's block to its
// kernel protocol (so there is a route for it to remove) and the route in
// the kernel is the programmer's; after it, BIRD has reconfigured, no
// longer exports it, and the trace shows BIRD's own process (its host pid,
// comm bird, in the node's namespace) sending RTM_DELROUTE for the block
// with protocol bird, answered ESRCH; the trace dropped nothing; and the
// programmer did not restart (so nothing re-programmed the route behind the
// delete). Positive control, on the same cluster before the takeover:
// node-1's BIRD stopping with a Cease makes node-2's BIRD delete its own
// route to node-1's block, and the trace shows that delete from the same
// BIRD process, protocol bird, answered 0, with the route gone from the
// timeline: a delete the trace reports as sent does remove what it matches.

import (
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// birdDeleteScanTime is BIRD's kernel scan period here, long so that no
// scan falls between the takeover and the withdrawal (a scan has BIRD try
// to re-add its route, refused with "File exists").
const birdDeleteScanTime = 60

var _ = Describe("A real BIRD's delete of a route the programmer took over", Label("noencap", "protodelete", "claim3"), func() {
	It("misses the programmer's route: no delete, no window without a route, no probe lost", func(ctx SpecContext) {
		By("1. 3.33 defaults on no-encap, BIRD at kernel metric 0 (the key it shares with the programmer); route traces of node-1 and node-2")
		d := startBIRDDelete(ctx)
		By("2. positive control: node-1's BIRD stops with a Cease; node-2's BIRD deletes its own route, accepted")
		d.controlDelete(ctx)
		By("3. the programmer takes the no-encap routes too; guard: BIRD still exports node-3's block to node-2's kernel")
		d.takeOver(ctx)
		By("4. probes node-1/node-2 <-> node-3 across the withdrawal")
		wl1, wl2, wl3 := harness.Endpoint(d.node1.NS.Workloads[0]), harness.Endpoint(d.node2.NS.Workloads[0]), harness.Endpoint(d.node3.NS.Workloads[0])
		probes, err := d.c.Probes(ctx, harness.ProbeOptions{Flows: append(probe.Both(wl2, wl3), probe.Both(wl1, wl3)...)})
		Expect(err).NotTo(HaveOccurred())
		By("5-6. BGPConfiguration Disabled: each BIRD withdraws and sends the kernel a delete for the block, refused ESRCH")
		d.withdraw(ctx)
		By("7. two full resyncs; guard: node-2's programmer did not restart; every probe sent before the end arrives")
		rep, endRep := d.settle(probes)
		By("8. figures")
		afterWithdrawal := d.recordFigures(rep)
		By("9. the claim, on node-1 and node-2: the programmer's route stayed, never deleted, never missing, no probe lost")
		for _, n := range []*harness.Node{d.node1, d.node2} {
			tl := d.c.Timeline(n.Name)
			Expect(deletesOf(tl, d.block3, d.withdrawn.Mono, d.end.Mono)).To(BeEmpty(), "%s's route to %s was deleted after BIRD's withdrawal", n.Name, d.block3)
			Expect(tl.NoRouteWindows(d.block3, d.withdrawn.Mono, d.end.Mono)).To(BeEmpty(), "%s had no route to %s after the withdrawal", n.Name, d.block3)
			Expect(tl.Flaps(d.block3, d.withdrawn.Mono, d.end.Mono).Owners).To(Equal([]kroute.Protocol{designProgrammerProtocol}),
				"%s's route to %s stays the programmer's (proto %d) throughout", n.Name, d.block3, designProgrammerProtocol)
			Expect(n).To(judge.HaveClusterRoute(d.block3).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Only())
			Expect(afterWithdrawal[n.Name].Deletes().Answered(0)).To(BeEmpty(), "no delete of %s in %s's namespace succeeded after the withdrawal", d.block3, n.Name)
		}
		for _, f := range rep.Flows {
			Expect(f).To(judge.HaveNoGap().Through(endRep), "flow %s lost probes after BIRD withdrew the routes", f.Flow)
		}
	})
	It("on 3.33's own metric (BIRD at 1024) the routes coexist: BIRD's delete removes BIRD's route, the programmer's stays, no probe lost", func(ctx SpecContext) {
		// The faithful 3.33 render: BIRD writes at krt_metric 1024 (confd
		// SetMetricForBGPRoutes @ 6609dea54713), the programmer at priority
		// 0, so the two are different kernel routes and the claim's case (a
		// delete of the key the programmer holds) does not arise; what
		// happens instead is shown here.
		By("3.33 defaults on no-encap; guard: node-2's BIRD route to node-3's block at 1024")
		c := scenariotest.StartCluster(ctx, "noencap", harness.Options{RouteRefreshInterval: 2 * time.Second, Timers: confd.Timers{ScanTime: birdDeleteScanTime}})
		node2, node3 := c.Node("node-2"), c.Node("node-3")
		block3 := blockOf(node3.NS, "noencap-pool")
		Eventually(node2).WithPolling(50*time.Millisecond).
			Should(judge.HaveClusterRoute(block3).ProgrammedBy(judge.ByBIRD).Via("eth0").Only(), "guard: BIRD owns no-encap on the 3.33 defaults")
		cl, err := c.Store.Read(ctx)
		Expect(err).NotTo(HaveOccurred())
		birdMetric := confd.RouteMetric(cl.BGP, node2.Release())
		Expect(birdMetric).To(Equal(1024), "guard: 3.33's BIRD writes BGP routes at 1024")
		Expect(birdMetricsTo(node2, []netip.Prefix{block3})).To(Equal([]int{1024}), "guard: node-2's BIRD route to %s is at 1024", block3)
		trace, err := c.Measure().TraceRoutes(node2.Name)
		testenv.SkipIfMissing(GinkgoT(), err, "the netlink route trace")
		Expect(err).NotTo(HaveOccurred())

		By("the programmer takes no-encap too: its route at 0 beside BIRD's at 1024")
		settled := takeOverBeside1024(ctx, c, node2, block3)
		wl2, wl3 := harness.Endpoint(node2.NS.Workloads[0]), harness.Endpoint(node3.NS.Workloads[0])
		probes, err := c.Probes(ctx, harness.ProbeOptions{Flows: probe.Both(wl2, wl3)})
		Expect(err).NotTo(HaveOccurred())

		By("BGPConfiguration Disabled: BIRD withdraws what it exported; its delete of its own 1024 route is accepted")
		withdrawn, dels := withdrawOwn1024Route(ctx, c, node2, block3, trace)
		end, rep, endRep := resyncAndDrain(c, node2, probes)

		By("figures, then the claim: BIRD's own route went once, the programmer's never, no window, no probe lost")
		tl := c.Timeline(node2.Name)
		birdDeletes, progDeletes := recordBIRDDelete1024(c, rep, dels, block3, withdrawn.Mono, end.Mono, settled)
		Expect(birdDeletes).To(Equal(1), "BIRD's own 1024 route to %s went once", block3)
		Expect(progDeletes).To(BeZero(), "the programmer's route to %s was never deleted", block3)
		Expect(tl.NoRouteWindows(block3, withdrawn.Mono, end.Mono)).To(BeEmpty(), "node-2 had no route to %s after the withdrawal", block3)
		Expect(node2).To(judge.HaveClusterRoute(block3).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Only())
		for _, f := range rep.Flows {
			Expect(f).To(judge.HaveNoGap().Through(endRep), "flow %s lost probes after BIRD withdrew its route", f.Flow)
		}
	})
})
