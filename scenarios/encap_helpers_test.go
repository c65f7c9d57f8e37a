package scenarios_test

// The IPIP specs that judge routes (re-advertisement, cleanup) would pass on
// a tunl0 that does not encapsulate: between nodes of one L2 segment bare
// packets still arrive (issue 28; topo.TunnelEBPFNoEncap is that tunnel).
// expectIPIPEncapsulated is their guard: a short probe burst over the routes
// the spec has just judged, and encap.CheckIPIP on its hop
// counters — every IPIP flow left its node inside protocol 4 between the two
// nodes' addresses, none was seen bare on the underlay — then delivery, so
// the burst is real traffic (positive control).

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/encap"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// encapBurstProbes is how many probes each flow of the burst sends: 0.2 s
// at 1 kHz, enough to count, short enough to cost nothing.
const encapBurstProbes = 200

// expectIPIPEncapsulated sends encapBurstProbes probes on each flow (every
// node pair when flows is nil), fails the spec naming the flow if any IPIP
// one crossed the underlay bare, and returns the evidence for figures.
func expectIPIPEncapsulated(ctx context.Context, c *harness.Cluster, flows []report.Flow, why string) encap.Evidence {
	GinkgoHelper()
	rep, ev, err := ipipEncapBurst(ctx, c, flows, why)
	Expect(err).NotTo(HaveOccurred(), "%s: IPIP flows must cross the underlay inside protocol 4 between their nodes", why)
	for _, f := range rep.Flows {
		Expect(f.Received).To(BeNumerically(">", 0), "guard: the burst flow %s delivered nothing (sent %d, send errors %v)", f.Flow, f.Sent, f.SendErrors)
	}
	return ev
}

// ipipEncapBurst is the burst and the check, with the check's verdict
// returned (the negative control expects it to fail).
func ipipEncapBurst(ctx context.Context, c *harness.Cluster, flows []report.Flow, why string) (*report.Report, encap.Evidence, error) {
	GinkgoHelper()
	// MayNotFlow: on a tunnel that does not encapsulate, flows across the
	// router never arrive, and the verdict that names the encapsulation is
	// the check below, not "probes never flowed".
	ps, err := c.Probes(ctx, harness.ProbeOptions{Flows: flows, MayNotFlow: true})
	Expect(err).NotTo(HaveOccurred(), "start the encapsulation burst")
	defer ps.Close()
	Eventually(func() (uint64, error) {
		rep, err := ps.Report()
		if err != nil {
			return 0, err
		}
		least := uint64(0)
		for i, f := range rep.Flows {
			if i == 0 || f.Sent < least {
				least = f.Sent
			}
		}
		return least, nil
	}).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(30*time.Second)).WithPolling(20*time.Millisecond).
		Should(BeNumerically(">=", encapBurstProbes), "guard: every flow of the encapsulation burst sends %d probes", encapBurstProbes)
	rep, err := ps.Stop()
	Expect(err).NotTo(HaveOccurred())
	ev, err := encap.CheckIPIP(c.Net, rep)
	AddReportEntry("IPIP on the underlay: "+why, ev.Table())
	return rep, ev, err
}

// encapFigures records what the burst judged in a spec's row.
func encapFigures(res *results.ScenarioResult, ev encap.Evidence) {
	res.Figure("ipipFlowsEncapsulated", float64(len(ev.Rows)), results.KindSize)
	res.Figure("ipipInnerPacketsOnUnderlay", float64(ev.Inner), results.KindSize)
}

// flowsFrom is one flow from src's first workload to each dst's first
// workload (the burst over the routes one node holds).
func flowsFrom(c *harness.Cluster, src string, dsts ...string) []report.Flow {
	GinkgoHelper()
	first := func(name string) report.Endpoint {
		n := c.Node(name)
		if len(n.NS.Workloads) == 0 {
			Fail(fmt.Sprintf("node %s has no workload to probe", name))
		}
		return harness.Endpoint(n.NS.Workloads[0])
	}
	var out []report.Flow
	for _, d := range dsts {
		out = append(out, report.Flow{Src: first(src), Dst: first(d)})
	}
	return out
}
