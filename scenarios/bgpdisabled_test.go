package scenarios_test

// Claim (design §2, review note on tests that disable BGP): a test that
// disables BGP and expects cross-node connectivity to break is implicitly
// asserting that BIRD owns the routes. The programmer derives its routes
// from the datastore, so they outlive the BGP sessions: under the 3.33
// defaults (the programmer owns IPIP, BIRD owns no-encap) switching BGP off
// leaves IPIP connectivity up and takes the no-encap routes down.
//
// The cluster is the noencap shape with an IPIP pool first (workloads take
// their addresses from it, so probes judge IPIP connectivity) and the
// no-encap pool beside it (judged by its routes). "BGP off" is the
// datastore's bgpEnabled=false plus every node's BGP sessions disabled in
// its BIRD (`birdc disable`): the sessions go down while BIRD runs, so BIRD
// withdraws what it learned. Guards: before, every IPIP remote block is the
// programmer's and every no-encap one BIRD's, and probes flow; after, no
// BGP session is Established anywhere. The no-encap routes disappearing is
// the positive control that BGP really went away.

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

var _ = Describe("Disabling BGP under the 3.33 defaults", Label("ipip", "bgpdisabled", "claim9"), func() {
	It("leaves IPIP connectivity up (the programmer's routes outlive the sessions) and takes the no-encap routes down", func(ctx SpecContext) {
		t := topo.NoEncap(3, 1)
		t.Name = "noencap-mixed"
		t.Pools = append([]topo.Pool{{Name: "ipip-pool", CIDR: "10.245.0.0/16", IPIPMode: topo.IPIPAlways}}, t.Pools...)
		c := scenariotest.StartClusterOn(ctx, t, harness.Options{RouteRefreshInterval: 2 * time.Second})

		By("1. guards: the 3.33 defaults' owners, and probes flowing")
		for _, n := range c.Nodes() {
			for _, nd := range c.Net.Nodes {
				if nd.Name == n.Name {
					continue
				}
				Eventually(n).WithPolling(50 * time.Millisecond).
					Should(judge.HaveClusterRoute(blockOf(nd, "ipip-pool")).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via(topo.TunnelDevice).Only())
				Eventually(n).WithPolling(50 * time.Millisecond).
					Should(judge.HaveClusterRoute(blockOf(nd, "noencap-pool")).ProgrammedBy(judge.ByBIRD).Via("eth0").Only())
			}
		}
		probes, err := c.Probes(ctx, harness.ProbeOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("2. BGP off: the datastore says so and every session goes down")
		off := switchBGPOff(ctx, c)

		By("3. positive control and half the claim: the no-encap routes go")
		for _, n := range c.Nodes() {
			for _, nd := range c.Net.Nodes {
				if nd.Name == n.Name {
					continue
				}
				b := blockOf(nd, "noencap-pool")
				Eventually(func() ([]kroute.Route, error) { return n.Routes(b) }).WithPolling(50*time.Millisecond).
					Should(BeEmpty(), "%s should have no route to the no-encap block %s once BGP is off (BIRD owned it)", n.Name, b)
			}
		}

		By("4. the claim's other half: IPIP stays up, over two full resyncs")
		for _, n := range c.Nodes() {
			waitFullResyncs(n, 2)
		}
		end := c.Mark("two full resyncs after BGP went off")
		atEnd, err := probes.Report()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (*report.Report, error) { return probes.Report() }).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
			Should(judge.HaveNoGap().Through(atEnd), "every IPIP probe sent by the end should arrive")
		rep, err := probes.Stop()
		Expect(err).NotTo(HaveOccurred())
		var table strings.Builder
		for _, n := range c.Nodes() {
			for _, nd := range c.Net.Nodes {
				if nd.Name == n.Name {
					continue
				}
				b := blockOf(nd, "ipip-pool")
				Expect(n).To(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol).Via(topo.TunnelDevice).Only(),
					"%s's IPIP route to %s should outlive the BGP sessions", n.Name, b)
				Expect(c.Timeline(n.Name).NoRouteWindows(b, off.Mono, end.Mono)).To(BeEmpty(), "%s lost its route to %s", n.Name, b)
				fmt.Fprintf(&table, "%s -> %s (IPIP): kept; %s (no-encap): gone\n", n.Name, b, blockOf(nd, "noencap-pool"))
			}
		}
		res := c.Result("BGP disabled under the 3.33 defaults: IPIP up, no-encap down", rep)
		res.Figure("windowMs", float64(end.Mono-off.Mono)/1e6, results.KindDuration)
		scenariotest.Record("BGP switched off under the 3.33 defaults", table.String()+results.GapTable(rep), res)
		for _, f := range rep.Flows {
			Expect(f).To(judge.HaveNoGap().Through(atEnd), "IPIP flow %s lost probes after BGP went off", f.Flow)
		}
	})
})

// switchBGPOff is step 2 of the BGP-disabled spec: BGP off in the datastore,
// confd's re-render for it taken (so it cannot re-enable the sessions
// disabled next), every session disabled; guard: none Established.
func switchBGPOff(ctx SpecContext, c *harness.Cluster) results.Event {
	GinkgoHelper()
	off := c.Mark("BGP switched off")
	scenariotest.Act(c.Datastore().DisableBGP(ctx))
	// confd re-renders for the change (the config says bgpEnabled is
	// false); wait for that reconfigure so it cannot re-enable the
	// sessions disabled next.
	for _, n := range c.Nodes() {
		Eventually(func() bool {
			for _, a := range n.ConfdActions() {
				if a.SeenMono >= off.Mono && a.ConfiguredMono != 0 {
					return true
				}
			}
			return false
		}).WithPolling(100*time.Millisecond).Should(BeTrue(), "%s's confd reacts to bgpEnabled=false", n.Name)
	}
	for _, n := range c.Nodes() {
		for _, p := range n.Peers() {
			_, err := n.BIRD.Client().Run(ctx, "disable "+p.Protocol)
			Expect(err).NotTo(HaveOccurred(), "birdc disable %s on %s", p.Protocol, n.Name)
		}
	}
	for _, n := range c.Nodes() {
		Eventually(func() ([]string, error) {
			ps, err := n.BIRD.Client().Protocols(ctx)
			var up []string
			for _, p := range ps {
				if p.Established() {
					up = append(up, p.Name)
				}
			}
			return up, err
		}).WithPolling(100*time.Millisecond).Should(BeEmpty(), "guard: %s has no Established BGP session", n.Name)
	}
	return off
}
