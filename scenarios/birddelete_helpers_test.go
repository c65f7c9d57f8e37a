package scenarios_test

// The steps of the real-BIRD-delete specs (birddelete_test.go), one method
// per numbered step.

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
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// birdDelete is one run of the shared-key spec: the three nodes, their
// blocks, the route traces and what each step saw.
type birdDelete struct {
	c                   *harness.Cluster
	node1, node2, node3 *harness.Node
	block1, block3      netip.Prefix
	traces              map[string]*harness.RouteTrace
	bird2               int // node-2's BIRD's pid, one throughout

	ctl, withdrawn, end results.Event
	controlDel          event.Event
	ctlReq              bpf.RouteRequest
	settled             quiescence
	restartsBefore      int
	refused             map[string]bpf.RouteRequests
}

// startBIRDDelete is step 1: 3.33 defaults on no-encap, BIRD programs every
// remote block at kernel metric 0 by the kernelMetric knob (see the top of
// birddelete_test.go: the key BIRD's route shares with the programmer's;
// 3.33 itself writes at 1024); the route traces of node-1 and node-2, what
// their BIRDs ask the kernel.
func startBIRDDelete(ctx SpecContext) *birdDelete {
	GinkgoHelper()
	sharedKey := 0
	d := &birdDelete{traces: map[string]*harness.RouteTrace{}, refused: map[string]bpf.RouteRequests{}}
	d.c = scenariotest.StartCluster(ctx, "noencap", harness.Options{RouteRefreshInterval: 2 * time.Second, Timers: confd.Timers{ScanTime: birdDeleteScanTime},
		BGP: datastore.BGPConfiguration{KernelMetric: &sharedKey}})
	d.node1, d.node2, d.node3 = d.c.Node("node-1"), d.c.Node("node-2"), d.c.Node("node-3")
	d.block1, d.block3 = blockOf(d.node1.NS, "noencap-pool"), blockOf(d.node3.NS, "noencap-pool")
	for _, b := range []netip.Prefix{d.block1, d.block3} {
		Eventually(d.node2).WithPolling(50*time.Millisecond).
			Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via("eth0").Only(), "guard: BIRD owns no-encap on the 3.33 defaults")
	}
	for _, n := range []*harness.Node{d.node1, d.node2} {
		t, err := d.c.Measure().TraceRoutes(n.Name)
		testenv.SkipIfMissing(GinkgoT(), err, "the netlink route trace")
		Expect(err).NotTo(HaveOccurred())
		d.traces[n.Name] = t
	}
	d.bird2 = d.node2.BIRD.Pid()
	Expect(d.bird2).NotTo(BeZero(), "node-2's BIRD runs")
	return d
}

// controlDelete is step 2: node-1's BIRD stops with a Cease; node-2's BIRD
// deletes its own route to node-1's block, and the trace shows that delete
// from node-2's BIRD, protocol bird, accepted; then node-1's BIRD is back.
func (d *birdDelete) controlDelete(ctx SpecContext) {
	GinkgoHelper()
	c, node2, block1 := d.c, d.node2, d.block1
	d.ctl = c.Mark("control: node-1's BIRD gets SIGTERM")
	scenariotest.Act(c.KillBIRD(ctx, d.node1.Name, syscall.SIGTERM))
	Eventually(func() []event.Event { return deletesOf(c.Timeline(node2.Name), block1, d.ctl.Mono, 0) }).
		WithPolling(20*time.Millisecond).ShouldNot(BeEmpty(),
		"control: node-2's BIRD should delete its proto bird route to %s when node-1 withdraws it", block1)
	d.controlDel = deletesOf(c.Timeline(node2.Name), block1, d.ctl.Mono, 0)[0]
	Expect(d.controlDel.Route.Protocol).To(Equal(kroute.ProtoBIRD), "control: the route deleted is BIRD's")
	// (Eventually: BIRD may read the kernel's ack after the timeline saw
	// the route go.)
	var ctlDels bpf.RouteRequests
	Eventually(func() (bpf.RouteRequests, error) {
		reqs, err := d.traces[node2.Name].Requests()
		ctlDels = reqs.Between(d.ctl.Mono, 0).To(block1).Deletes()
		return ctlDels.From(d.bird2).WithProtocol(kroute.ProtoBIRD).Answered(0), err
	}).WithTimeout(scenariotest.Machine.Wait(10*time.Second)).WithPolling(20*time.Millisecond).ShouldNot(BeEmpty(),
		"control: the trace should show node-2's BIRD (pid %d) send an RTM_DELROUTE %s proto bird that the kernel accepted", d.bird2, block1)
	d.ctlReq = ctlDels.From(d.bird2).WithProtocol(kroute.ProtoBIRD).Answered(0)[0]
	Expect(d.ctlReq.Comm).To(Equal("bird"), "control: the sender is BIRD: %v", d.ctlReq)
	Expect(d.ctlReq.NetNS).To(Equal(d.traces[node2.Name].NetNS()), "control: in node-2's namespace: %v", d.ctlReq)
	Expect(d.ctlReq.At).To(BeNumerically("<=", d.controlDel.At), "control: BIRD sent its delete before the timeline saw the route go")
	Expect(ctlDels.Answered(syscall.ESRCH)).To(BeEmpty(), "control: no delete of %s was refused: %v", block1, ctlDels.Strings())
	scenariotest.Act(c.StartBIRD(ctx, d.node1.Name, harness.StartBIRDOptions{}))
	Expect(c.WaitConverged(ctx)).To(Succeed())
	Eventually(node2).WithPolling(50*time.Millisecond).
		Should(judge.HaveClusterRoute(block1).ProgrammedBy(judge.ByBIRD).Only(), "node-1's block back to BIRD's route after the control")
}

// takeOver is step 3: the programmer takes the no-encap routes too (Felix
// Enabled; BGPConfiguration unchanged, so BIRD keeps exporting them).
func (d *birdDelete) takeOver(ctx SpecContext) {
	GinkgoHelper()
	c, node2, block3 := d.c, d.node2, d.block3
	takeover, _, _ := setPairLive(ctx, c, string(config.Enabled), "", false, config.R333)
	for _, n := range []*harness.Node{d.node1, node2} {
		Eventually(n).WithPolling(20*time.Millisecond).
			Should(judge.HaveClusterRoute(block3).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Only(),
				"%s's route to %s should now be the programmer's (proto %d), replacing BIRD's", n.Name, block3, designProgrammerProtocol)
	}
	// Peers' re-advertisements of the programmer's routes can move a BIRD's
	// best path after the programmer wrote, and BIRD then takes the route
	// back (quiesce_test.go). The claim is about routes the programmer
	// holds, so the withdrawal waits for the cluster routes to stand still,
	// and every node must then hold the programmer's.
	d.settled = quiesceClusterRoutes(c, takeover.Mono, scenariotest.Machine.Wait(90*time.Second))
	for _, n := range c.Nodes() {
		for _, b := range c.RemoteBlocks(n.Name) {
			Expect(n).To(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via("eth0").Only(),
				"guard: once the routes stand still %s's route to %s is the programmer's", n.Name, b)
		}
	}
	// Guard: BIRD still exports node-3's block to node-2's kernel, so the
	// withdrawal has a kernel route for BIRD to remove.
	Eventually(func() bool { return exportedToKernel(ctx, node2, block3) }).WithPolling(100*time.Millisecond).
		Should(BeTrue(), "guard: node-2's BIRD should still export %s to kernel4 after the programmer took it", block3)
	Expect(learnedOverBGP(ctx, node2, block3)).To(BeTrue(), "guard: node-2's BIRD learns %s over BGP", block3)
}

// withdraw is steps 5-6. The withdrawal: BGPConfiguration goes to Disabled
// (with Felix Enabled, the supported pair in which the programmer owns
// everything). BIRD reconfigures in place, its kernel filter now rejects
// the pool, and its kernel protocol removes the routes it had exported. The
// programmer's effective value does not change, so it does not restart.
// Guards: each BIRD took the new config and stopped exporting node-3's
// block to its kernel, and sent the kernel a delete for it: the trace shows
// BIRD's process send RTM_DELROUTE for the block with protocol bird, and
// the kernel answer ESRCH.
func (d *birdDelete) withdraw(ctx SpecContext) {
	GinkgoHelper()
	c, block3 := d.c, d.block3
	reconf := map[string]string{}
	for _, n := range []*harness.Node{d.node1, d.node2} {
		reconf[n.Name] = lastReconfiguration(ctx, n)
	}
	d.restartsBefore = len(d.node2.Programmer.Restarts())
	var err error
	d.withdrawn, err = c.SetProgramClusterRoutes(ctx, config.Enabled, config.Disabled)
	Expect(err).NotTo(HaveOccurred())

	cl, err := c.Store.Read(ctx)
	Expect(err).NotTo(HaveOccurred())
	birdMetric := confd.RouteMetric(cl.BGP, d.node1.Release())
	for _, n := range []*harness.Node{d.node1, d.node2} {
		Eventually(func() string { return lastReconfiguration(ctx, n) }).WithPolling(100*time.Millisecond).
			ShouldNot(Equal(reconf[n.Name]), "%s's BIRD should reconfigure for BGPConfiguration Disabled", n.Name)
		Eventually(func() bool { return exportedToKernel(ctx, n, block3) }).WithPolling(50*time.Millisecond).
			Should(BeFalse(), "%s's BIRD should stop exporting %s to its kernel", n.Name, block3)
		pid := n.BIRD.Pid()
		// Sent, and its ack read by BIRD (all of them answered).
		Eventually(func() (bpf.RouteRequests, error) {
			reqs, err := d.traces[n.Name].Requests()
			dels := reqs.Between(d.withdrawn.Mono, 0).To(block3).Deletes().From(pid)
			if len(dels.Unanswered()) > 0 {
				return nil, err
			}
			return dels, err
		}).WithPolling(50*time.Millisecond).ShouldNot(BeEmpty(),
			"guard: %s's BIRD (pid %d) should send the kernel an RTM_DELROUTE for %s when it stops exporting it, and read the kernel's answer", n.Name, pid, block3)
		reqs, err := d.traces[n.Name].Requests()
		Expect(err).NotTo(HaveOccurred(), "the trace of %s is complete", n.Name)
		dels := reqs.Between(d.withdrawn.Mono, 0).To(block3).Deletes().From(pid)
		for _, del := range dels {
			Expect(del.Comm).To(Equal("bird"), "guard: %s's delete of %s came from BIRD: %v", n.Name, block3, del)
			Expect(del.NetNS).To(Equal(d.traces[n.Name].NetNS()), "guard: in %s's namespace: %v", n.Name, del)
			Expect(kroute.Protocol(del.Protocol)).To(Equal(kroute.ProtoBIRD), "guard: BIRD's delete of %s names protocol bird: %v", block3, del)
			Expect(del.Metric).To(BeEquivalentTo(birdMetric), "guard: BIRD's delete of %s names its kernel metric %d (no RTA_PRIORITY reads as 0): %v", block3, birdMetric, del)
			Expect(del.Answered).To(BeTrue(), "guard: BIRD received the kernel's answer to its delete: %v", del)
			Expect(del.Errno).To(Equal(syscall.ESRCH), "the kernel should refuse %s's BIRD's delete of %s (proto bird) with ESRCH: the route is the programmer's: %v", n.Name, block3, del)
		}
		d.refused[n.Name] = dels
	}
}

// settle is step 7: two BIRD scans and two full programmer resyncs for
// anything that would act on the withdrawal to have done so; every probe
// sent before the end mark arrives.
func (d *birdDelete) settle(probes *probe.Session) (rep, endRep *report.Report) {
	GinkgoHelper()
	waitFullResyncs(d.node2, 2)
	d.end = d.c.Mark("two full resyncs after the withdrawal")
	Expect(d.node2.Programmer.Restarts()).To(HaveLen(d.restartsBefore), "guard: node-2's programmer did not restart (its ownership did not change), so nothing re-programmed the route behind BIRD's delete")
	endRep, err := probes.Report()
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() (*report.Report, error) { return probes.Report() }).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
		Should(judge.HaveNoGap().Through(endRep), "every probe sent before the end mark should arrive")
	rep, err = probes.Stop()
	Expect(err).NotTo(HaveOccurred())
	return rep, endRep
}

// recordFigures is step 8; it returns each node's route requests for
// node-3's block after the withdrawal, for the claim.
func (d *birdDelete) recordFigures(rep *report.Report) map[string]bpf.RouteRequests {
	GinkgoHelper()
	c, block3 := d.c, d.block3
	res := c.Result("a real BIRD's delete misses the programmer's route (no-encap, BIRD gives up routes the programmer took)", rep)
	res.Figure("controlDeleteAfterWithdrawalMs", float64(d.controlDel.At-d.ctl.Mono)/1e6, results.KindDuration)
	afterWithdrawal := map[string]bpf.RouteRequests{}
	for _, n := range []*harness.Node{d.node1, d.node2} {
		reqs, err := d.traces[n.Name].Requests()
		Expect(err).NotTo(HaveOccurred())
		afterWithdrawal[n.Name] = reqs.Between(d.withdrawn.Mono, d.end.Mono).To(block3)
		res.Figure("birdDeletesRefused "+n.Name, float64(len(d.refused[n.Name])), results.KindCount)
		res.Figure("routeRequestsAfterWithdrawal "+n.Name, float64(len(afterWithdrawal[n.Name])), results.KindCount)
		res.Figure("routeEventsAfterWithdrawal "+n.Name, float64(c.Timeline(n.Name).Flaps(block3, d.withdrawn.Mono, d.end.Mono).Changes()), results.KindCount)
		res.Notes = append(res.Notes, fmt.Sprintf("%s, route requests for %s after the withdrawal: %s", n.Name, block3, strings.Join(afterWithdrawal[n.Name].Strings(), "; ")))
	}
	res.Figure("controlDeleteAckMs", float64(d.ctlReq.AckAt-d.ctlReq.At)/1e6, results.KindDuration)
	noteQuiescence(&res, d.settled)
	res.Notes = append(res.Notes, "control, node-2: "+d.ctlReq.String())
	scenariotest.Record(fmt.Sprintf("a real BIRD delete: BGPConfiguration Disabled, %s withdrawn by BIRD; node-1/node-2's BIRDs sent %d/%d RTM_DELROUTE proto bird, refused ESRCH; control delete of BIRD's own route accepted, %.0f ms after its withdrawal",
		block3, len(d.refused[d.node1.Name]), len(d.refused[d.node2.Name]), res.Figures["controlDeleteAfterWithdrawalMs"]), results.GapTable(rep), res)
	return afterWithdrawal
}

// takeOverBeside1024: the programmer takes no-encap too; its route at 0
// goes in beside BIRD's at 1024 (different keys), BIRD still exports its
// own. Here a re-advertised programmer's route reaches a peer's kernel at
// metric 0 (local_pref 2147483647, quiesce_test.go): BIRD can take the
// programmer's key back until the routes stand still.
func takeOverBeside1024(ctx SpecContext, c *harness.Cluster, node2 *harness.Node, block3 netip.Prefix) quiescence {
	GinkgoHelper()
	takeover, _, _ := setPairLive(ctx, c, string(config.Enabled), "", false, config.R333)
	Eventually(func() ([]kroute.Route, error) { return node2.Routes(block3) }).WithPolling(20*time.Millisecond).
		Should(ContainElement(SatisfyAll(HaveField("Protocol", designProgrammerProtocol), HaveField("Metric", 0))),
			"node-2 holds the programmer's route to %s at 0", block3)
	settled := quiesceClusterRoutes(c, takeover.Mono, scenariotest.Machine.Wait(90*time.Second))
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
	return settled
}

// withdrawOwn1024Route sets BGPConfiguration Disabled: BIRD withdraws what
// it exported; its deletes name protocol bird and the kernel accepts them.
func withdrawOwn1024Route(ctx SpecContext, c *harness.Cluster, node2 *harness.Node, block3 netip.Prefix, trace *harness.RouteTrace) (results.Event, bpf.RouteRequests) {
	GinkgoHelper()
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
		// krt_metric, under kernel `metric 0`. An IPv4 delete without a
		// priority matches on the protocol it names, so it takes BIRD's
		// 1024 route, not the programmer's proto 80 one: the timeline
		// checks say which went.)
		Expect(d.Errno).To(BeZero(), "the kernel accepts BIRD's delete of its own 1024 route: %v", d)
	}
	return withdrawn, dels
}

// recordBIRDDelete1024 registers the 1024 spec's figures and returns how
// often BIRD's and the programmer's routes to block3 were deleted.
func recordBIRDDelete1024(c *harness.Cluster, rep *report.Report, dels bpf.RouteRequests, block3 netip.Prefix, withdrawn, end int64, settled quiescence) (birdDeletes, progDeletes int) {
	GinkgoHelper()
	tl := c.Timeline("node-2")
	for _, e := range deletesOf(tl, block3, withdrawn, end) {
		switch e.Route.Protocol {
		case designProgrammerProtocol:
			progDeletes++
		case kroute.ProtoBIRD:
			birdDeletes++
		}
	}
	res := c.Result("a real BIRD's delete on 3.33's metric 1024 removes BIRD's own route beside the programmer's (no-encap)", rep)
	res.Figure("birdDeletesAccepted node-2", float64(len(dels)), results.KindSize)
	res.Figure("routeEventsAfterWithdrawal node-2", float64(tl.Flaps(block3, withdrawn, end).Changes()), results.KindCount)
	noteQuiescence(&res, settled)
	res.Notes = append(res.Notes, "node-2 route requests for "+block3.String()+" after the withdrawal: "+strings.Join(dels.Strings(), "; "))
	scenariotest.Record(fmt.Sprintf("a real BIRD delete at 3.33's metric 1024: node-2's BIRD sent %d RTM_DELROUTE proto bird, accepted; BIRD's route deleted %d time(s), the programmer's %d", len(dels), birdDeletes, progDeletes),
		results.GapTable(rep), res)
	return birdDeletes, progDeletes
}

// resyncAndDrain waits for two full resyncs of node's programmer, marks the
// end, and waits for every probe sent before it to arrive.
func resyncAndDrain(c *harness.Cluster, node *harness.Node, probes *probe.Session) (end results.Event, rep, endRep *report.Report) {
	GinkgoHelper()
	waitFullResyncs(node, 2)
	end = c.Mark("two full resyncs after the withdrawal")
	endRep, err := probes.Report()
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() (*report.Report, error) { return probes.Report() }).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
		Should(judge.HaveNoGap().Through(endRep), "every probe sent before the end mark should arrive")
	rep, err = probes.Stop()
	Expect(err).NotTo(HaveOccurred())
	return end, rep, endRep
}
