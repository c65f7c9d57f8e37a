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
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/bpf"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
)

// birdDeleteScanTime is BIRD's kernel scan period here, long so that no
// scan falls between the takeover and the withdrawal (a scan has BIRD try
// to re-add its route, refused with "File exists").
const birdDeleteScanTime = 60

var _ = Describe("A real BIRD's delete of a route the programmer took over", Label("noencap", "protodelete", "claim3"), func() {
	It("misses the programmer's route: no delete, no window without a route, no probe lost", func(ctx SpecContext) {
		// 1. 3.33 defaults on no-encap: BIRD programs every remote block,
		// at kernel metric 0 by the kernelMetric knob (see the top: the
		// key BIRD's route shares with the programmer's; 3.33 itself
		// writes at 1024).
		sharedKey := 0
		c := startCluster(ctx, "noencap", harness.Options{RouteRefreshInterval: 2 * time.Second, Timers: confd.Timers{ScanTime: birdDeleteScanTime},
			BGP: datastore.BGPConfiguration{KernelMetric: &sharedKey}})
		node1, node2, node3 := c.Node("node-1"), c.Node("node-2"), c.Node("node-3")
		block1, block3 := blockOf(node1.NS, "noencap-pool"), blockOf(node3.NS, "noencap-pool")
		for _, b := range []netip.Prefix{block1, block3} {
			Eventually(node2).WithPolling(50*time.Millisecond).
				Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via("eth0").Only(), "guard: BIRD owns no-encap on the 3.33 defaults")
		}
		// The route traces of node-1 and node-2: what their BIRDs ask the
		// kernel. node-2's BIRD is never restarted, so one pid throughout.
		traces := map[string]*harness.RouteTrace{}
		for _, n := range []*harness.Node{node1, node2} {
			t, err := c.Measure().TraceRoutes(n.Name)
			testenv.SkipIfMissing(GinkgoT(), err, "the netlink route trace")
			Expect(err).NotTo(HaveOccurred())
			traces[n.Name] = t
		}
		bird2 := node2.BIRD.Pid()
		Expect(bird2).NotTo(BeZero(), "node-2's BIRD runs")

		// 2. Positive control: node-1's BIRD stops with a Cease; node-2's
		// BIRD deletes its own route to node-1's block.
		ctl := c.Mark("control: node-1's BIRD gets SIGTERM")
		act(c.KillBIRD(ctx, node1.Name, syscall.SIGTERM))
		Eventually(func() []event.Event { return deletesOf(c.Timeline(node2.Name), block1, ctl.Mono, 0) }).
			WithPolling(20*time.Millisecond).ShouldNot(BeEmpty(),
			"control: node-2's BIRD should delete its proto bird route to %s when node-1 withdraws it", block1)
		controlDel := deletesOf(c.Timeline(node2.Name), block1, ctl.Mono, 0)[0]
		Expect(controlDel.Route.Protocol).To(Equal(kroute.ProtoBIRD), "control: the route deleted is BIRD's")
		// Control, trace: that delete was node-2's BIRD's own request,
		// protocol bird, and the kernel accepted it.
		// (Eventually: BIRD may read the kernel's ack after the timeline saw
		// the route go.)
		var ctlDels bpf.RouteRequests
		Eventually(func() (bpf.RouteRequests, error) {
			reqs, err := traces[node2.Name].Requests()
			ctlDels = reqs.Between(ctl.Mono, 0).To(block1).Deletes()
			return ctlDels.From(bird2).WithProtocol(kroute.ProtoBIRD).Answered(0), err
		}).WithTimeout(machine.Wait(10*time.Second)).WithPolling(20*time.Millisecond).ShouldNot(BeEmpty(),
			"control: the trace should show node-2's BIRD (pid %d) send an RTM_DELROUTE %s proto bird that the kernel accepted", bird2, block1)
		ctlReq := ctlDels.From(bird2).WithProtocol(kroute.ProtoBIRD).Answered(0)[0]
		Expect(ctlReq.Comm).To(Equal("bird"), "control: the sender is BIRD: %v", ctlReq)
		Expect(ctlReq.NetNS).To(Equal(traces[node2.Name].NetNS()), "control: in node-2's namespace: %v", ctlReq)
		Expect(ctlReq.At).To(BeNumerically("<=", controlDel.At), "control: BIRD sent its delete before the timeline saw the route go")
		Expect(ctlDels.Answered(syscall.ESRCH)).To(BeEmpty(), "control: no delete of %s was refused: %v", block1, ctlDels.Strings())
		act(c.StartBIRD(ctx, node1.Name, harness.StartBIRDOptions{}))
		Expect(c.WaitConverged(ctx)).To(Succeed())
		Eventually(node2).WithPolling(50*time.Millisecond).
			Should(judge.HaveClusterRoute(block1).ProgrammedBy(judge.ByBIRD).Only(), "node-1's block back to BIRD's route after the control")

		// 3. The programmer takes the no-encap routes too (Felix Enabled;
		// BGPConfiguration unchanged, so BIRD keeps exporting them).
		takeover, _, _ := setPairLive(ctx, c, string(config.Enabled), "", false, config.R333)
		for _, n := range []*harness.Node{node1, node2} {
			Eventually(n).WithPolling(20*time.Millisecond).
				Should(judge.HaveClusterRoute(block3).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Only(),
					"%s's route to %s should now be the programmer's (proto %d), replacing BIRD's", n.Name, block3, designProgrammerProtocol)
		}
		// Peers' re-advertisements of the programmer's routes can move a
		// BIRD's best path after the programmer wrote, and BIRD then takes
		// the route back (quiesce_test.go). The claim is about routes the
		// programmer holds, so the withdrawal waits for the cluster routes
		// to stand still, and every node must then hold the programmer's.
		settled := quiesceClusterRoutes(c, takeover.Mono, machine.Wait(90*time.Second))
		for _, n := range c.Nodes() {
			for _, b := range c.RemoteBlocks(n.Name) {
				Expect(n).To(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Only(),
					"guard: once the routes stand still %s's route to %s is the programmer's", n.Name, b)
			}
		}
		// Guard: BIRD still exports node-3's block to node-2's kernel, so
		// the withdrawal has a kernel route for BIRD to remove.
		Eventually(func() bool { return exportedToKernel(ctx, node2, block3) }).WithPolling(100*time.Millisecond).
			Should(BeTrue(), "guard: node-2's BIRD should still export %s to kernel4 after the programmer took it", block3)
		Expect(learnedOverBGP(ctx, node2, block3)).To(BeTrue(), "guard: node-2's BIRD learns %s over BGP", block3)

		// 4. Probes node-1/node-2 <-> node-3 across the withdrawal.
		wl1, wl2, wl3 := harness.Endpoint(node1.NS.Workloads[0]), harness.Endpoint(node2.NS.Workloads[0]), harness.Endpoint(node3.NS.Workloads[0])
		probes, err := c.Probes(ctx, harness.ProbeOptions{Flows: append(probe.Both(wl2, wl3), probe.Both(wl1, wl3)...)})
		Expect(err).NotTo(HaveOccurred())

		// 5. The withdrawal: BGPConfiguration goes to Disabled (with Felix
		// Enabled, the supported pair in which the programmer owns
		// everything). BIRD reconfigures in place, its kernel filter now
		// rejects the pool, and its kernel protocol removes the routes it
		// had exported. The programmer's effective value does not change,
		// so it does not restart.
		reconf := map[string]string{}
		for _, n := range []*harness.Node{node1, node2} {
			reconf[n.Name] = lastReconfiguration(ctx, n)
		}
		restartsBefore := len(node2.Programmer.Restarts())
		withdrawn, err := c.SetProgramClusterRoutes(ctx, config.Enabled, config.Disabled)
		Expect(err).NotTo(HaveOccurred())

		// 6. Guards: each BIRD took the new config and stopped exporting
		// node-3's block to its kernel, and sent the kernel a delete for it:
		// the trace shows BIRD's process send RTM_DELROUTE for the block
		// with protocol bird, and the kernel answer ESRCH.
		cl, err := c.Store.Read(ctx)
		Expect(err).NotTo(HaveOccurred())
		birdMetric := confd.RouteMetric(cl.BGP, node1.Release())
		refused := map[string]bpf.RouteRequests{}
		for _, n := range []*harness.Node{node1, node2} {
			Eventually(func() string { return lastReconfiguration(ctx, n) }).WithPolling(100*time.Millisecond).
				ShouldNot(Equal(reconf[n.Name]), "%s's BIRD should reconfigure for BGPConfiguration Disabled", n.Name)
			Eventually(func() bool { return exportedToKernel(ctx, n, block3) }).WithPolling(50*time.Millisecond).
				Should(BeFalse(), "%s's BIRD should stop exporting %s to its kernel", n.Name, block3)
			pid := n.BIRD.Pid()
			// Sent, and its ack read by BIRD (all of them answered).
			Eventually(func() (bpf.RouteRequests, error) {
				reqs, err := traces[n.Name].Requests()
				dels := reqs.Between(withdrawn.Mono, 0).To(block3).Deletes().From(pid)
				if len(dels.Unanswered()) > 0 {
					return nil, err
				}
				return dels, err
			}).WithPolling(50*time.Millisecond).ShouldNot(BeEmpty(),
				"guard: %s's BIRD (pid %d) should send the kernel an RTM_DELROUTE for %s when it stops exporting it, and read the kernel's answer", n.Name, pid, block3)
			reqs, err := traces[n.Name].Requests()
			Expect(err).NotTo(HaveOccurred(), "the trace of %s is complete", n.Name)
			dels := reqs.Between(withdrawn.Mono, 0).To(block3).Deletes().From(pid)
			for _, d := range dels {
				Expect(d.Comm).To(Equal("bird"), "guard: %s's delete of %s came from BIRD: %v", n.Name, block3, d)
				Expect(d.NetNS).To(Equal(traces[n.Name].NetNS()), "guard: in %s's namespace: %v", n.Name, d)
				Expect(kroute.Protocol(d.Protocol)).To(Equal(kroute.ProtoBIRD), "guard: BIRD's delete of %s names protocol bird: %v", block3, d)
				Expect(d.Metric).To(BeEquivalentTo(birdMetric), "guard: BIRD's delete of %s names its kernel metric %d (no RTA_PRIORITY reads as 0): %v", block3, birdMetric, d)
				Expect(d.Answered).To(BeTrue(), "guard: BIRD received the kernel's answer to its delete: %v", d)
				Expect(d.Errno).To(Equal(syscall.ESRCH), "the kernel should refuse %s's BIRD's delete of %s (proto bird) with ESRCH: the route is the programmer's: %v", n.Name, block3, d)
			}
			refused[n.Name] = dels
		}

		// 7. Two BIRD scans and two full programmer resyncs for anything
		// that would act on the withdrawal to have done so.
		waitFullResyncs(node2, 2)
		end := c.Mark("two full resyncs after the withdrawal")
		Expect(node2.Programmer.Restarts()).To(HaveLen(restartsBefore), "guard: node-2's programmer did not restart (its ownership did not change), so nothing re-programmed the route behind BIRD's delete")
		endRep, err := probes.Report()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (*probe.Report, error) { return probes.Report() }).WithTimeout(machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
			Should(judge.HaveNoGap().Through(endRep), "every probe sent before the end mark should arrive")
		rep, err := probes.Stop()
		Expect(err).NotTo(HaveOccurred())

		// 8. Figures.
		res := c.Result("a real BIRD's delete misses the programmer's route (no-encap, BIRD gives up routes the programmer took)", rep)
		res.Figures["controlDeleteAfterWithdrawalMs"] = float64(controlDel.At-ctl.Mono) / 1e6
		afterWithdrawal := map[string]bpf.RouteRequests{}
		for _, n := range []*harness.Node{node1, node2} {
			reqs, err := traces[n.Name].Requests()
			Expect(err).NotTo(HaveOccurred())
			afterWithdrawal[n.Name] = reqs.Between(withdrawn.Mono, end.Mono).To(block3)
			res.Figures["birdDeletesRefused "+n.Name] = float64(len(refused[n.Name]))
			res.Figures["routeRequestsAfterWithdrawal "+n.Name] = float64(len(afterWithdrawal[n.Name]))
			res.Figures["routeEventsAfterWithdrawal "+n.Name] = float64(c.Timeline(n.Name).Flaps(block3, withdrawn.Mono, end.Mono).Changes())
			res.Notes = append(res.Notes, fmt.Sprintf("%s, route requests for %s after the withdrawal: %s", n.Name, block3, strings.Join(afterWithdrawal[n.Name].Strings(), "; ")))
		}
		res.Figures["controlDeleteAckMs"] = float64(ctlReq.AckAt-ctlReq.At) / 1e6
		noteQuiescence(&res, settled)
		res.Notes = append(res.Notes, "control, node-2: "+ctlReq.String())
		report(fmt.Sprintf("a real BIRD delete: BGPConfiguration Disabled, %s withdrawn by BIRD; node-1/node-2's BIRDs sent %d/%d RTM_DELROUTE proto bird, refused ESRCH; control delete of BIRD's own route accepted, %.0f ms after its withdrawal",
			block3, len(refused[node1.Name]), len(refused[node2.Name]), res.Figures["controlDeleteAfterWithdrawalMs"]), results.GapTable(rep), res)

		// 9. The claim, on node-1 and node-2: the programmer's route
		// stayed, never deleted, never missing, and no probe was lost.
		for _, n := range []*harness.Node{node1, node2} {
			tl := c.Timeline(n.Name)
			Expect(deletesOf(tl, block3, withdrawn.Mono, end.Mono)).To(BeEmpty(), "%s's route to %s was deleted after BIRD's withdrawal", n.Name, block3)
			Expect(tl.NoRouteWindows(block3, withdrawn.Mono, end.Mono)).To(BeEmpty(), "%s had no route to %s after the withdrawal", n.Name, block3)
			Expect(tl.Flaps(block3, withdrawn.Mono, end.Mono).Owners).To(Equal([]kroute.Protocol{designProgrammerProtocol}),
				"%s's route to %s stays the programmer's (proto %d) throughout", n.Name, block3, designProgrammerProtocol)
			Expect(n).To(judge.HaveClusterRoute(block3).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Only())
			Expect(afterWithdrawal[n.Name].Deletes().Answered(0)).To(BeEmpty(), "no delete of %s in %s's namespace succeeded after the withdrawal", block3, n.Name)
		}
		for _, f := range rep.Flows {
			Expect(f).To(judge.HaveNoGap().Through(endRep), "flow %s lost probes after BIRD withdrew the routes", f.Flow)
		}
	})
	It("on 3.33's own metric (BIRD at 1024) the routes coexist: BIRD's delete removes BIRD's route, the programmer's stays, no probe lost", func(ctx SpecContext) {
		// The faithful 3.33 render: BIRD writes at krt_metric 1024
		// (confd SetMetricForBGPRoutes @ 6609dea54713), the programmer at
		// priority 0, so the two are different kernel routes and the
		// claim's case (a delete of the key the programmer holds) does not
		// arise; what happens instead is shown here.
		c := startCluster(ctx, "noencap", harness.Options{RouteRefreshInterval: 2 * time.Second, Timers: confd.Timers{ScanTime: birdDeleteScanTime}})
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

		// The programmer takes no-encap too: its route at 0 goes in beside
		// BIRD's at 1024 (different keys), BIRD still exports its own.
		takeover, _, _ := setPairLive(ctx, c, string(config.Enabled), "", false, config.R333)
		Eventually(func() ([]kroute.Route, error) { return node2.Routes(block3) }).WithPolling(20*time.Millisecond).
			Should(ContainElement(SatisfyAll(HaveField("Protocol", designProgrammerProtocol), HaveField("Metric", 0))),
				"node-2 holds the programmer's route to %s at 0", block3)
		// Here a re-advertised programmer's route reaches a peer's kernel
		// at metric 0 (local_pref 2147483647, quiesce_test.go): BIRD can
		// take the programmer's key back until the routes stand still.
		settled := quiesceClusterRoutes(c, takeover.Mono, machine.Wait(90*time.Second))
		for _, n := range c.Nodes() {
			for _, b := range c.RemoteBlocks(n.Name) {
				Expect(n.Routes(b)).To(ContainElement(SatisfyAll(HaveField("Protocol", designProgrammerProtocol), HaveField("Metric", 0))),
					"guard: once the routes stand still %s holds the programmer's route to %s at 0", n.Name, b)
			}
		}
		Expect(node2.Routes(block3)).To(ConsistOf(
			SatisfyAll(HaveField("Protocol", designProgrammerProtocol), HaveField("Metric", 0)),
			SatisfyAll(HaveField("Protocol", kroute.ProtoBIRD), HaveField("Metric", 1024))),
			"node-2 holds the programmer's route to %s at 0 beside BIRD's at 1024", block3)
		Eventually(func() bool { return exportedToKernel(ctx, node2, block3) }).WithPolling(100*time.Millisecond).
			Should(BeTrue(), "guard: node-2's BIRD still exports %s to kernel4", block3)

		wl2, wl3 := harness.Endpoint(node2.NS.Workloads[0]), harness.Endpoint(node3.NS.Workloads[0])
		probes, err := c.Probes(ctx, harness.ProbeOptions{Flows: probe.Both(wl2, wl3)})
		Expect(err).NotTo(HaveOccurred())

		// BGPConfiguration Disabled: BIRD withdraws what it exported.
		reconf := lastReconfiguration(ctx, node2)
		withdrawn, err := c.SetProgramClusterRoutes(ctx, config.Enabled, config.Disabled)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return lastReconfiguration(ctx, node2) }).WithPolling(100*time.Millisecond).
			ShouldNot(Equal(reconf), "node-2's BIRD should reconfigure for BGPConfiguration Disabled")
		pid := node2.BIRD.Pid()
		var dels bpf.RouteRequests
		Eventually(func() (bpf.RouteRequests, error) {
			reqs, err := trace.Requests()
			dels = reqs.Between(withdrawn.Mono, 0).To(block3).Deletes().From(pid)
			if len(dels.Unanswered()) > 0 {
				return nil, err
			}
			return dels, err
		}).WithPolling(50*time.Millisecond).ShouldNot(BeEmpty(),
			"node-2's BIRD (pid %d) should send an RTM_DELROUTE for %s when it stops exporting it", pid, block3)
		for _, d := range dels {
			Expect(kroute.Protocol(d.Protocol)).To(Equal(kroute.ProtoBIRD), "BIRD's delete names protocol bird: %v", d)
			// (BIRD 2.0.12 names no RTA_PRIORITY on this delete, read as
			// metric 0 — measured; its routes' metric is per route,
			// krt_metric, under kernel `metric 0`. An IPv4 delete without
			// a priority matches on the protocol it names, so it takes
			// BIRD's 1024 route, not the programmer's proto 80 one: the
			// timeline checks below say which went.)
			Expect(d.Errno).To(BeZero(), "the kernel accepts BIRD's delete of its own 1024 route: %v", d)
		}
		waitFullResyncs(node2, 2)
		end := c.Mark("two full resyncs after the withdrawal")
		endRep, err := probes.Report()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (*probe.Report, error) { return probes.Report() }).WithTimeout(machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
			Should(judge.HaveNoGap().Through(endRep), "every probe sent before the end mark should arrive")
		rep, err := probes.Stop()
		Expect(err).NotTo(HaveOccurred())

		tl := c.Timeline(node2.Name)
		var progDeletes, birdDeletes int
		for _, e := range deletesOf(tl, block3, withdrawn.Mono, end.Mono) {
			switch e.Route.Protocol {
			case designProgrammerProtocol:
				progDeletes++
			case kroute.ProtoBIRD:
				birdDeletes++
			}
		}
		res := c.Result("a real BIRD's delete on 3.33's metric 1024 removes BIRD's own route beside the programmer's (no-encap)", rep)
		res.Figures["birdDeletesAccepted node-2"] = float64(len(dels))
		res.Figures["routeEventsAfterWithdrawal node-2"] = float64(tl.Flaps(block3, withdrawn.Mono, end.Mono).Changes())
		noteQuiescence(&res, settled)
		res.Notes = append(res.Notes, "node-2 route requests for "+block3.String()+" after the withdrawal: "+strings.Join(dels.Strings(), "; "))
		report(fmt.Sprintf("a real BIRD delete at 3.33's metric 1024: node-2's BIRD sent %d RTM_DELROUTE proto bird, accepted; BIRD's route deleted %d time(s), the programmer's %d", len(dels), birdDeletes, progDeletes),
			results.GapTable(rep), res)

		Expect(birdDeletes).To(Equal(1), "BIRD's own 1024 route to %s went once", block3)
		Expect(progDeletes).To(BeZero(), "the programmer's route to %s was never deleted", block3)
		Expect(tl.NoRouteWindows(block3, withdrawn.Mono, end.Mono)).To(BeEmpty(), "node-2 had no route to %s after the withdrawal", block3)
		Expect(node2).To(judge.HaveClusterRoute(block3).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Only())
		for _, f := range rep.Flows {
			Expect(f).To(judge.HaveNoGap().Through(endRep), "flow %s lost probes after BIRD withdrew its route", f.Flow)
		}
	})
})
