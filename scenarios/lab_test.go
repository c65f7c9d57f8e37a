package scenarios_test

// Claim (design §4, "Changing the configuration on a running cluster"), held
// against a lab birdcage did not build (harness/lab): setting the
// programClusterRoutes fields moves every cluster route to the new owner,
// and the gap is measured. The lab's own software does the work — its
// programmer restarts, its BIRD is reconfigured, by the commands its
// manifest gives — while birdcage only attaches: route timelines, probes
// and BPF counters inside the lab's namespaces. The verdict is the end
// state, as on the built-in target (liveconfig_test.go), plus one more: the
// lab is left exactly as it was found (links, addresses, routes, qdiscs, tc
// filters, TCX programs of every namespace attached to), once its starting
// configuration is put back.
//
// These specs exist only when $BIRDCAGE_LAB names a lab: a manifest path
// (`birdcage run --lab MANIFEST`), or one of the kind-shaped labs
// harness/lab/handmade builds per spec: "handmade" (named namespaces made
// with ip commands) or "handmade-runc" (every node a runc container with
// its own network namespace, the programmer and BIRD inside it, actions by
// runc exec). Specs whose actions the manifest lacks skip, naming them.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/harness/lab"
	"github.com/birdcage/birdcage/harness/lab/handmade"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/internal/run"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
)

var _ = func() bool {
	if cfg.Lab == "" {
		return false
	}
	Describe("Live programClusterRoutes change against a lab", Label("lab", "liveconfig", "timing"), func() {
		DescribeTable("moves every cluster route to the new owner, with a gap that is measured, and leaves the lab as found",
			func(ctx SpecContext, from, to ownership) {
				start := labStart{from: from}
				if to.owner == judge.ByBIRD {
					// As the built-in live change (liveconfig_test.go): the
					// programmer → BIRD direction runs with BIRD at the
					// programmer's key (kernelMetric 0, a recorded
					// departure), the model its bound is written in. On 3.33
					// as shipped BIRD writes at krt_metric 1024 (confd
					// SetMetricForBGPRoutes @ 6609dea54713); a peer's
					// re-advertised programmer route is briefly the best,
					// and when it goes upstream BIRD 2.0 replaces in place at
					// 1024 and leaves the metric-0 proto bird route behind
					// (docs/conformance.md row 17), where Calico's fork
					// deletes and re-adds. A manifest's lab is taken as it is.
					shared := 0
					start.kernelMetric = &shared
				}
				l, timing := attachLab(ctx, start, lab.ActionSetProgramClusterRoutes)
				res, rep, hs := labLiveChange(ctx, l, from, to, timing)
				if to.owner == judge.ByBIRD {
					// As on the built-in target: the window is bounded by
					// BIRD's scan time or the lab confd's reaction.
					bound := max(monoclock.Ms(timing.BIRDScanTime), monoclock.Ms(timing.ConfdLatency)) + scanSlackMs
					for _, h := range hs {
						Expect(h.WindowMs).To(BeNumerically("<=", bound),
							"%s: %s was without a route for %.1f ms (%s), longer than BIRD's scan time %s or confd's latency %s allow",
							h.Node, h.Block, h.WindowMs, h.Ordering, timing.BIRDScanTime, timing.ConfdLatency)
					}
				}
				report(fmt.Sprintf("live change on lab %s, %s → %s (longest window without a route: %.1f ms)", l.M.Name, from.owner, to.owner,
					res.Figures["longestNoRouteWindowMs"]), results.GapTable(rep)+hs.Table(), res)
			},
			Entry("no-encap, BIRD → programmer", Label("noencap"), noEncapByBIRD, noEncapByProgrammer),
			Entry("no-encap, programmer → BIRD", Label("noencap"), noEncapByProgrammer, noEncapByBIRD),
		)
	})
	return true
}()

// labStart is the state a lab spec starts from, and how it is put back.
type labStart struct {
	// from is the routes' owner and the programClusterRoutes values.
	from ownership
	// ipip and release shape a hand-made lab (an IPIP pool; every node on
	// release, "" for 3.33); a manifest's lab must already be so.
	ipip    bool
	release config.Release
	// upgraded is the node a spec upgrades: the end moves it back to
	// release (the old BIRD TERMed) rather than setting programClusterRoutes.
	upgraded string
	// kernelMetric, when set, builds a hand-made lab whose BIRD writes at
	// this metric (BGPConfiguration.kernelMetric, a recorded departure).
	kernelMetric *int
}

// handmadeLabs are the $BIRDCAGE_LAB values that build a hand-made lab.
var handmadeLabs = map[string]handmade.Flavour{"handmade": handmade.NetnsFlavour, "handmade-runc": handmade.RuncFlavour}

// attachLab attaches to $BIRDCAGE_LAB in the start state, settled, and
// registers the spec's end: the start put back, detach, and the
// before/after comparison, which fails the spec if the lab is not as
// found. A manifest without the actions skips, naming them.
func attachLab(ctx context.Context, start labStart, needs ...lab.Action) (*lab.Lab, timing.Model) {
	GinkgoHelper()
	from := start.from
	timing, err := timing.FromEnv(cfg)
	Expect(err).NotTo(HaveOccurred())
	var m *lab.Manifest
	if name := cfg.Lab; handmadeLabs[name] != "" {
		r, err := run.New()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(r.Close()).To(Succeed(), "tear down the hand-made lab") })
		hl, err := handmade.Build(ctx, r, handmade.Options{Flavour: handmadeLabs[name], IPIP: start.ipip, Release: start.release,
			Felix: from.felix, BGP: from.bgp, Timing: timing, KernelMetric: start.kernelMetric, Programmer: cfg.Programmer})
		testenv.SkipIfMissing(GinkgoT(), err, "hand-made lab "+name)
		Expect(err).NotTo(HaveOccurred(), "build the hand-made lab")
		m, err = lab.Load(hl.Manifest)
		Expect(err).NotTo(HaveOccurred())
	} else {
		m, err = lab.Load(name)
		Expect(err).NotTo(HaveOccurred())
		timing.Name = "the lab's own (" + m.Name + "); bounds use birdcage's model: " + timing.Name
		// A lab not made for this spec is put in `from` first.
		if m.Has(lab.ActionSetProgramClusterRoutes) {
			_, err := m.Run(ctx, lab.ActionSetProgramClusterRoutes, map[string]string{"felix": string(from.felix), "bgp": string(from.bgp)})
			Expect(err).NotTo(HaveOccurred())
		}
	}
	if miss := m.Missing(needs...); len(miss) > 0 {
		Skip(fmt.Sprintf("lab manifest %s does not provide actions.%v", m.Source(), miss))
	}
	// Settled before the snapshot: the comparison is about what birdcage
	// does, not the lab still converging.
	settle, err := lab.Attach(ctx, m, lab.AttachOptions{Machine: machine})
	Expect(err).NotTo(HaveOccurred())
	waitLabOwned(ctx, settle, from.owner, "guard: the lab settles with its routes owned by "+from.owner.String())
	_, _ = settle.Detach()

	l, err := lab.Attach(ctx, m, lab.AttachOptions{Machine: machine})
	Expect(err).NotTo(HaveOccurred(), "attach to lab %s", m.Source())
	DeferCleanup(func(ctx SpecContext) {
		switch {
		case start.upgraded != "":
			rel := start.release
			if rel == "" {
				rel = config.R333
			}
			_, err := l.UpgradeNode(ctx, start.upgraded, rel, harness.UpgradeOptions{Signal: syscall.SIGTERM})
			Expect(err).NotTo(HaveOccurred(), "move %s back to %s", start.upgraded, rel)
			waitLabOwned(ctx, l, from.owner, "the lab's starting owner is back")
		case m.Has(lab.ActionSetProgramClusterRoutes):
			_, err := l.SetProgramClusterRoutes(ctx, from.felix, from.bgp)
			Expect(err).NotTo(HaveOccurred(), "put the lab's starting configuration back")
			waitLabOwned(ctx, l, from.owner, "the lab's starting owner is back")
		}
		diffs, err := l.Detach()
		Expect(err).NotTo(HaveOccurred(), "detach from the lab")
		var b strings.Builder
		for _, d := range diffs {
			b.WriteString(d.String())
		}
		fmt.Printf("[birdcage] lab %s: %d namespaces compared before/after: %d differ\n", m.Name, len(l.Snapshots()), len(diffs))
		Expect(diffs).To(BeEmpty(), "the lab is not as found after detaching:\n%s", b.String())
	}, NodeTimeout(machine.Wait(2*time.Minute)))
	return l, timing
}

// waitLabOwned waits until every node's remote blocks have exactly one
// route, the owner's.
func waitLabOwned(ctx context.Context, l *lab.Lab, owner judge.Owner, why string) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(ctx, machine.Wait(60*time.Second))
	defer cancel()
	proto := labProto(l, owner)
	var blocks int
	for _, n := range l.Nodes {
		for _, b := range l.RemoteBlocks(n.Name) {
			blocks++
			Expect(l.WaitOwnedOnlyBy(ctx, n.Name, b, proto)).To(Succeed(), why)
		}
	}
	Expect(blocks).To(BeNumerically(">", 0), "the lab's nodes have no remote blocks (give blocks in the manifest, or its datastore): nothing to judge")
}

func labProto(l *lab.Lab, o judge.Owner) kroute.Protocol {
	if o == judge.ByBIRD {
		return protoOf(o)
	}
	return l.M.RouteProtocol()
}

// labLiveChange is liveChange (liveconfig_test.go) against a lab: the same
// steps and figures, except those only a built cluster can see (the
// programmer's restarts, confd's reaction).
func labLiveChange(ctx SpecContext, l *lab.Lab, from, to ownership, timing timing.Model) (results.ScenarioResult, *probe.Report, judge.Handovers) {
	GinkgoHelper()
	// 1. The routes belong to `from` (attachLab waited for it).
	probes, err := l.Probes(ctx, harness.ProbeOptions{})
	Expect(err).NotTo(HaveOccurred())

	// 2. The change, both fields at once, by the manifest's command.
	change, err := l.SetProgramClusterRoutes(ctx, to.felix, to.bgp)
	Expect(err).NotTo(HaveOccurred())

	// 3. Every remote block ends with the new owner's route only, and
	// every flow delivers again.
	waitLabOwned(ctx, l, to.owner, "after the change: the new owner's route, and no other")
	Eventually(flowsDelivering(probes)).WithPolling(50 * time.Millisecond).Should(Succeed())
	end := l.Mark("converged after the change")
	rep, err := probes.Stop()
	Expect(err).NotTo(HaveOccurred())

	// 4. Figures, named as on the built-in target so the two compare.
	hs := l.Handovers(labProto(l, from.owner), labProto(l, to.owner), to.owner, change.Mono, end.Mono)
	res := results.ScenarioResult{Name: fmt.Sprintf("live change on lab %s: %s → %s", l.M.Name, from.owner, to.owner),
		Topology: "lab:" + l.M.Name, Probes: rep, Events: l.Events(), Figures: map[string]float64{}, Timing: &timing,
		RouteEvents: l.RouteEvents()}
	res.AddProbeFigures(rep)
	hs.AddFigures(&res)
	res.Notes = append(res.Notes, "against a lab: the programmer's restarts and confd's reaction are the lab's own and not seen")
	Expect(hs.Judgeable()).To(Succeed(), "the lab's route timelines over the live change")
	return res, rep, hs
}
