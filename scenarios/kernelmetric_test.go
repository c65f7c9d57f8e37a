package scenarios_test

// Claim (birdcage DESIGN.md, "Defaults that matter for fidelity"): the
// kernel keys a route on its metric, and BIRD 2 writes (and only manages)
// its routes at its kernel protocol's metric. So whether the programmer's
// RouteReplace takes BIRD's route in one operation depends on BIRD's kernel
// metric being the programmer's (0, as the fork's): at the same metric the
// replace finds BIRD's route and replaces it, and one route remains; at a
// different one (BIRD 2's own default, 32) it finds nothing to replace, so
// it adds a second route and the two coexist, BIRD's still there. The knob
// is BGPConfiguration.kernelMetric (a birdcage field, not Calico's;
// confd.KernelMetric reads it), set here when the cluster starts.
//
// Scenario, natively on no-encap at 3.33 (BIRD programs the no-encap
// cluster routes): node-1's routes to every remote block are BIRD's; then
// FelixConfiguration.programClusterRoutes goes to Enabled with
// BGPConfiguration left unset, so the programmer takes the no-encap routes
// too while BIRD, whose config does not change, keeps exporting them to its
// kernel. Two entries that differ only in the knob:
//   - metric 0 (the programmer's): on node-1's route timeline, for every
//     remote block, BIRD's route is replaced by the programmer's in one
//     operation: a replace event to proto 80, no delete, never two routes,
//     never none; after two resyncs one route, the programmer's.
//   - metric 32: the programmer's route is added beside BIRD's: two routes
//     at once on the timeline, BIRD's never deleted; after two resyncs both
//     are still there, each at its own metric.
//
// Guards: before the change each remote block has exactly one route, BIRD's,
// at the knob's metric (so the knob reached BIRD); after it the programmer's
// route is there (so it did take over). The entries are each other's
// control: the same change, the only difference the metric.
//
// Fails when: the knob stops reaching BIRD (the first guard, in the
// metric-32 entry); the programmer deletes and adds instead of replacing,
// or writes at another metric than 0 (the metric-0 entry: a delete, a
// window, or two routes); the kernel stops keying on metric, or BIRD
// manages routes at other metrics than its own (the metric-32 entry: one
// route, or BIRD's deleted).

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// programmerMetric is the metric the programmer writes cluster routes at
// (birdcage DESIGN.md: its RouteReplace is at metric 0).
const programmerMetric = 0

var _ = Describe("BIRD's kernel metric against the programmer's RouteReplace", Label("noencap", "kernelmetric"), func() {
	DescribeTable("the programmer taking over BIRD's no-encap routes: one replace when the metrics match, two routes side by side when they differ",
		func(ctx SpecContext, birdMetric int) {
			same := birdMetric == programmerMetric
			m := birdMetric
			// 1. No-encap at 3.33, BIRD's kernel metric set by the knob.
			c := scenariotest.StartCluster(ctx, "noencap", harness.Options{Release: config.R333, RouteRefreshInterval: time.Second,
				BGP: datastore.BGPConfiguration{KernelMetric: &m}, Timers: confd.Timers{ScanTime: 1}})
			n := c.Node("node-1")
			cl, err := c.Datastore().Read(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(confd.KernelMetric(cl.BGP)).To(Equal(birdMetric), "guard: the datastore holds kernelMetric %d", birdMetric)
			remote := c.RemoteBlocks(n.Name)
			Expect(remote).NotTo(BeEmpty(), "guard: node-1 has remote blocks")

			// 2. Guard: each remote block has one route, BIRD's, at the
			// knob's metric (the change's mark syncs the route timelines,
			// so the window judged from it starts from this route).
			tl := c.Timeline(n.Name)
			for _, b := range remote {
				Eventually(func() ([]kroute.Route, error) { return routesExactly(n, b) }).WithPolling(100*time.Millisecond).
					Should(SatisfyAll(HaveLen(1), ContainElement(SatisfyAll(
						HaveField("Protocol", kroute.ProtoBIRD), HaveField("Metric", birdMetric)))),
						"guard: before the change node-1's only route to %s is BIRD's at metric %d", b, birdMetric)
			}

			// 3. The programmer takes the no-encap routes too; BIRD's config
			// does not change (BGPConfiguration unset: EnabledNoEncapOnly).
			change := scenariotest.Act(c.SetProgramClusterRoutes(ctx, config.Enabled, ""))
			for _, b := range remote {
				Eventually(func() ([]kroute.Route, error) { return routesExactly(n, b) }).WithPolling(50*time.Millisecond).
					Should(ContainElement(SatisfyAll(HaveField("Protocol", designProgrammerProtocol), HaveField("Metric", programmerMetric))),
						"guard: the programmer programs %s at metric %d", b, programmerMetric)
			}
			// Until the routes stand still: two resyncs of every programmer
			// (and BIRD scans) with no change, for either side to act on the
			// other's route if it would. Peers' re-advertisements of the
			// programmer's routes can move BIRD's best path after the
			// takeover, and at a shared metric BIRD then takes the route back
			// until the next resync (quiesce_test.go); those writes are
			// counted, not judged.
			settled := quiesceClusterRoutes(c, change.Mono, scenariotest.Machine.Wait(90*time.Second))
			end := c.Mark("the routes stood still after the takeover")

			var table strings.Builder
			var deletes, most, replaces, adds int
			for _, b := range remote {
				evs := tl.EventsFor(b, change.Mono, end.Mono)
				r, a := 0, 0
				for _, e := range evs {
					if e.Route.Protocol == designProgrammerProtocol && e.Route.Metric == programmerMetric {
						switch e.Kind {
						case event.Replace:
							r++
						case event.Add:
							a++
						}
					}
				}
				d := len(deletesOf(tl, b, change.Mono, end.Mono))
				mx := maxRoutesAtOnce(tl, b, change.Mono, end.Mono)
				deletes, replaces, adds = deletes+d, replaces+r, adds+a
				most = max(most, mx)
				now, err := routesExactly(n, b)
				Expect(err).NotTo(HaveOccurred())
				fmt.Fprintf(&table, "%-18s replaces to the programmer's %d, adds %d, deletes %d, most routes at once %d, now %v\n", b, r, a, d, mx, now)

				// 4. The claim, per entry.
				Expect(d).To(BeZero(), "node-1's route to %s was deleted during the takeover: %v", b, evs)
				Expect(tl.NoRouteWindows(b, change.Mono, end.Mono)).To(BeEmpty(), "node-1 had no route to %s for a while", b)
				if same {
					Expect(r).To(BeNumerically(">=", 1), "at metric %d the programmer's RouteReplace should replace BIRD's route to %s in one operation; events %v", birdMetric, b, evs)
					Expect(a).To(BeZero(), "at BIRD's metric %d the programmer's route to %s should never be a second route; events %v", birdMetric, b, evs)
					Expect(mx).To(Equal(1), "node-1 had two routes to %s at once although BIRD's metric is the programmer's", b)
					Expect(now).To(SatisfyAll(HaveLen(1), ContainElement(HaveField("Protocol", designProgrammerProtocol))),
						"after the takeover node-1's one route to %s is the programmer's", b)
				} else {
					Expect(a).To(BeNumerically(">=", 1), "at BIRD's metric %d the programmer's RouteReplace at metric %d should add a route to %s beside BIRD's; events %v", birdMetric, programmerMetric, b, evs)
					Expect(mx).To(Equal(2), "node-1 should hold BIRD's and the programmer's routes to %s at once", b)
					Expect(now).To(SatisfyAll(HaveLen(2),
						ContainElement(SatisfyAll(HaveField("Protocol", kroute.ProtoBIRD), HaveField("Metric", birdMetric))),
						ContainElement(SatisfyAll(HaveField("Protocol", designProgrammerProtocol), HaveField("Metric", programmerMetric)))),
						"after the takeover BIRD's route to %s (metric %d) and the programmer's (metric %d) coexist", b, birdMetric, programmerMetric)
				}
			}
			res := c.Result(fmt.Sprintf("kernel metric %d against the programmer's RouteReplace", birdMetric), nil)
			res.Figure("birdKernelMetric", float64(birdMetric), results.KindSize)
			res.Figure("remoteBlocks", float64(len(remote)), results.KindSize)
			res.Figure("replacesToProgrammer", float64(replaces), results.KindSize)
			res.Figure("addsBesideBIRD", float64(adds), results.KindSize)
			res.Figure("deletesOfRemoteBlocks", float64(deletes), results.KindCount)
			res.Figure("mostRoutesAtOnce", float64(most), results.KindSize)
			noteQuiescence(&res, settled)
			scenariotest.Record(fmt.Sprintf("node-1, BIRD at kernel metric %d, the programmer taking over its no-encap routes", birdMetric), table.String(), res)
		},
		Entry("BIRD at the programmer's metric 0: RouteReplace replaces BIRD's route", 0),
		Entry("BIRD at BIRD 2's default metric 32: the two routes coexist", 32),
	)
})
