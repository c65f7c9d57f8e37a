package scenarios_test

// The live change (design §4: a gap, "unmeasured") per Calico release and
// per address family. The design is silent on metrics; Calico's code is not,
// and it makes the two families hand over differently:
//
//   - BIRD writes every BGP route into the kernel at krt_metric 1024, IPv4
//     and IPv6 alike (confd's NormalRoutePriority, default 1024, applied by
//     SetMetricForBGPRoutes in calico_kernel_programming: bgp_processor.go
//     @ de60d98e97a7 on release-v3.32, getNormalRoutePriority @ 6609dea54713
//     on release-v3.33).
//   - Felix's no-encap managers (one per family, int_dataplane.go at both
//     commits) name no priority, so an IPv4 route goes in at 0, while its
//     route table turns an IPv6 priority 0 into 1024, the kernel's default
//     (normalizeRouteKey, felix/routetable/route_table.go at both commits).
//
// So on IPv4 BIRD's route and the programmer's are two kernel routes (keyed
// by prefix and metric) that may stand side by side for a moment, while on
// IPv6 they share one key: the programmer's replace takes BIRD's route over,
// and BIRD's add is refused while the programmer's stands. What that does to
// the gap is the figure, per family: the longest window without a route and
// the probes lost, with the handover orderings. The verdict is the end
// state, as in liveconfig_test.go: each family's remote blocks carry the new
// owner's route alone, at that release's metric, and every flow of both
// families delivers again; programmer → BIRD, the window is held to the
// same bound as there.
//
// What the figures showed (BIRD 2.0.12, 3 nodes): programmer → BIRD, the
// IPv6 window is BIRD's next kernel scan (~1.1 s, the refused add), the
// IPv4 one tens of ms, and not because BIRD writes beside the programmer at
// once. While the programmer owns no-encap, every BIRD learns the
// programmer's routes from the kernel and re-advertises them (the known
// gap of §5) with bgp_local_pref 2147483647, i.e. krt_metric 0: after the
// change a node's best path to a block is a peer's re-advertisement, whose
// kernel write would share the programmer's key. BIRD writes its own
// route, at 1024, only when the peers' restarted programmers delete theirs
// and the re-advertisements are withdrawn; the window is how far the
// node's own programmer's delete runs ahead of that. The handovers say so
// by the kernel key: judge.BIRDWroteAfterDelete on IPv4 (BIRD's route at
// another metric), judge.BIRDTriedFirst, with the scan's prediction, on
// IPv6.
//
// 3.31 is not in the table: its BGPConfiguration has no programClusterRoutes
// (docs/conformance.md row 1), so BIRD programs every pool whatever Felix
// does, and no change hands the routes over.

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/probe"
	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// liveFamilyCase is one release's pair of no-encap owners in that
// release's own values: 3.32 has only Enabled and Disabled on each
// resource, 3.33 has the four-valued enum.
type liveFamilyCase struct {
	release  config.Release
	from, to ownership
}

var (
	// 3.32: BIRD owns no-encap with Felix Disabled (its default) and BGP
	// Enabled (its default); the programmer with Felix Enabled, BGP
	// Disabled.
	noEncapByBIRD332       = ownership{config.Disabled, config.Enabled, judge.ByBIRD}
	noEncapByProgrammer332 = ownership{config.Enabled, config.Disabled, judge.ByProgrammer}
)

// releaseMetric is the kernel metric Calico's owner writes a cluster route
// at, per family (the facts above).
func releaseMetric(o judge.Owner, family int) int {
	if o == judge.ByProgrammer && family == 4 {
		return 0
	}
	return 1024
}

var _ = Describe("Live programClusterRoutes change per release and address family", Label("liveconfig", "ipv6", "noencap", "timing"), func() {
	DescribeTable("moves the IPv4 and the IPv6 no-encap routes to the new owner at the release's metrics, every flow of both families delivering after",
		func(ctx SpecContext, tc liveFamilyCase) {
			t := dualStackNoEncap()
			lc := liveChangeOn(ctx, t, tc.from, tc.to, liveOptions{
				vary: []func(*harness.Options){func(o *harness.Options) { o.Release = tc.release }},
				flows: func(c *harness.Cluster) []report.Flow {
					var eps6 []report.Endpoint
					for _, nd := range c.Net.Nodes {
						eps6 = append(eps6, endpoint6(nd.Workloads[0]))
					}
					return append(harness.EveryNodePair(c.Net), probe.AllPairs(eps6...)...)
				},
			})
			c, rep, res := lc.c, lc.rep, lc.res
			// One result per release and direction (compare pairs by name).
			res.Name = fmt.Sprintf("live change on %s, Calico %s: %s → %s", t.Name, tc.release, tc.from.owner, tc.to.owner)

			// Guards: both families have remote blocks, flows and
			// handovers to judge.
			blocks := map[int]int{}
			for _, n := range c.Nodes() {
				for _, b := range c.RemoteBlocks(n.Name) {
					blocks[familyOf(b)]++
				}
			}
			Expect(blocks).To(Equal(map[int]int{4: 6, 6: 6}), "guard: every node has two remote blocks per family")
			flows := map[int]int{}
			for _, f := range rep.Flows {
				flows[familyOfAddr(f.DstAddr)]++
			}
			Expect(flows).To(Equal(map[int]int{4: 6, 6: 6}), "guard: six probe flows per family")
			Expect(lc.handovers).To(HaveLen(12), "guard: a handover read for every node's remote block")

			// The end state, per family: the new owner's route alone, at
			// the release's metric.
			for _, n := range c.Nodes() {
				for _, b := range c.RemoteBlocks(n.Name) {
					exact, err := routesExactly(n, b)
					Expect(err).NotTo(HaveOccurred())
					want := releaseMetric(tc.to.owner, familyOf(b))
					Expect(exact).To(HaveLen(1), "%s: one route to %s after the change, not one per owner: %v", n.Name, b, exact)
					Expect(exact[0].Protocol).To(Equal(protoOf(tc.to.owner)), "%s: %s's route is the new owner's (%s)", n.Name, b, tc.to.owner)
					Expect(exact[0].Metric).To(Equal(want), "%s: %s on %s writes IPv%d cluster routes at metric %d",
						n.Name, tc.to.owner, tc.release, familyOf(b), want)
				}
			}

			// Programmer → BIRD: the window is held to the stated bound
			// liveconfig_test.go holds it to (toBIRDBoundMs), on both
			// families.
			if tc.to.owner == judge.ByBIRD {
				bound := toBIRDBoundMs(c.Timing())
				for _, h := range lc.handovers {
					Expect(h.WindowMs).To(BeNumerically("<=", bound),
						"%s: %s was without a route for %.1f ms (%s), longer than BIRD's scan time or confd's stated reaction allow (%.0f ms)",
						h.Node, h.Block, h.WindowMs, h.Ordering, bound)
				}
			}

			// Figures per family.
			byFam := map[int]*familyFigures{4: {}, 6: {}}
			for _, h := range lc.handovers {
				ff := byFam[familyOf(h.Block)]
				ff.handovers = append(ff.handovers, h)
			}
			for _, f := range rep.Flows {
				ff := byFam[familyOfAddr(f.DstAddr)]
				ff.lost += max(f.Lost, 0)
				ff.gapMs = max(ff.gapMs, f.LongestGapMs)
			}
			var tab strings.Builder
			fmt.Fprintf(&tab, "%-6s %-22s %-18s %-10s %s\n", "family", "longest no-route (ms)", "longest gap (ms)", "lost", "orderings")
			for _, fam := range []int{4, 6} {
				ff := byFam[fam]
				ff.windowMs = slices.Max(ff.handovers.Windows(""))
				res.Figure(fmt.Sprintf("ipv%d.longestNoRouteWindowMs", fam), ff.windowMs, results.KindGap)
				res.Figure(fmt.Sprintf("ipv%d.longestProbeGapMs", fam), ff.gapMs, results.KindGap)
				res.Figure(fmt.Sprintf("ipv%d.lostProbes", fam), float64(ff.lost), results.KindLoss)
				fmt.Fprintf(&tab, "IPv%d   %-22.1f %-18.1f %-10d %s\n", fam, ff.windowMs, ff.gapMs, ff.lost, ff.orderingSummary())
			}
			res.Notes = append(res.Notes, fmt.Sprintf("Calico %s; %s writes IPv4 at metric %d and IPv6 at %d", tc.release, tc.to.owner,
				releaseMetric(tc.to.owner, 4), releaseMetric(tc.to.owner, 6)))
			scenariotest.Record(fmt.Sprintf("live change on %s, Calico %s, %s → %s, IPv4 and IPv6 (longest window without a route: IPv4 %.1f ms, IPv6 %.1f ms; %s)",
				t.Name, tc.release, tc.from.owner, tc.to.owner, byFam[4].windowMs, byFam[6].windowMs, c.Timing()),
				tab.String()+results.GapTable(rep)+lc.handovers.Table(), res)
		},
		Entry("3.32, BIRD → programmer", liveFamilyCase{config.R332, noEncapByBIRD332, noEncapByProgrammer332}),
		Entry("3.32, programmer → BIRD", liveFamilyCase{config.R332, noEncapByProgrammer332, noEncapByBIRD332}),
		Entry("3.33, BIRD → programmer", liveFamilyCase{config.R333, noEncapByBIRD, noEncapByProgrammer}),
		Entry("3.33, programmer → BIRD", liveFamilyCase{config.R333, noEncapByProgrammer, noEncapByBIRD}),
	)
})

// familyFigures are one address family's figures over a live change.
type familyFigures struct {
	handovers       judge.Handovers
	windowMs, gapMs float64 // the handovers' longest window; the flows' longest gap
	lost            int64
}

// orderingSummary is "n× ordering" per ordering of the family's handovers,
// sorted.
func (ff *familyFigures) orderingSummary() string {
	var out []string
	for o, k := range ff.handovers.Orderings() {
		out = append(out, fmt.Sprintf("%d× %s", k, o))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func familyOf(p netip.Prefix) int { return familyOfAddr(p.Addr()) }

func familyOfAddr(a netip.Addr) int {
	if a.Is6() {
		return 6
	}
	return 4
}
