package scenarios_test

// Claim (design §4, step 2 of "Upgrading the code", and §5's note on
// krt_source): the route programmer writes its cluster routes with its own
// route protocol, FelixConfiguration.deviceRouteProtocol — 80 only by
// default — and everything that tells its routes from others' goes by that
// configured number: the programmer's ownership of kernel routes ("Felix's
// own routes are claimed by protocol"), what BIRD learns from the kernel
// (an alien route whose krt_source is that protocol), the candidate import
// filter that matches krt_source against it, and birdcage's own matchers.
//
// The spec sets deviceRouteProtocol to 99 and judges every route by the
// literal 99 it set (customProgrammerProtocol), never by what the code
// reads back: on no-encap with the programmer owning everything, every
// remote block's one route is proto 99; an undesired proto 99 route on the
// uplink is removed by the programmer's reconciliation (its own by
// protocol) while an undesired proto 80 route beside it is left alone (no
// longer the programmer's); BIRD holds the programmer's routes as kernel
// routes with Kernel.source 99 — or, with the candidate kernel import
// filter rendered, does not hold them at all while still learning the
// proto 99 routes without a next hop.
//
// Guards: the datastore holds 99; BIRD's sessions are up and it learns the
// planted routes. Positive controls: the matcher judging by the design's
// default literal 80 does not match these routes (so the protocol really
// moved and the matcher is not protocol-blind); the proto 80 fixture
// surviving two full resyncs shows the removal of the proto 99 one is by
// protocol, not a flush of the device.

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// customProgrammerProtocol is the deviceRouteProtocol this spec sets.
const customProgrammerProtocol kroute.Protocol = 99

var (
	// Undesired destinations inside the no-encap pool and in no block.
	fixtureOwnProtocol = netip.MustParsePrefix("10.244.254.0/26") // proto 99 via eth0: the programmer's, to remove
	fixtureOldProtocol = netip.MustParsePrefix("10.244.253.0/26") // proto 80 via eth0: no longer the programmer's
)

var _ = Describe("A non-default deviceRouteProtocol end to end", Label("noencap", "deviceprotocol", "claim10"), func() {
	DescribeTable("the programmer, its ownership of kernel routes, BIRD's view and the matchers all go by the configured protocol",
		func(ctx SpecContext, importFilter bool) {
			// 1. The programmer owns every class, with protocol 99.
			c := scenariotest.StartCluster(ctx, "noencap", harness.Options{
				Felix:                datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Enabled), DeviceRouteProtocol: int(customProgrammerProtocol)},
				BGP:                  datastore.BGPConfiguration{ProgramClusterRoutes: string(config.Disabled)},
				RouteRefreshInterval: 2 * time.Second,
				KernelImportFilter:   importFilter,
			})
			cl, err := c.Datastore().Read(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(cl.Felix.DeviceRouteProtocol).To(Equal(int(customProgrammerProtocol)), "guard: the datastore holds deviceRouteProtocol %d", customProgrammerProtocol)
			Expect(c.WaitConverged(ctx)).To(Succeed(), "guard: every BGP session Established")

			// 2. Every remote block: one route, proto 99 by the kernel's
			// own number, via the uplink; the matcher agrees when told 99,
			// and does not match when judging by the design's default 80.
			for _, n := range c.Nodes() {
				for _, b := range c.RemoteBlocks(n.Name) {
					Eventually(n).WithPolling(50*time.Millisecond).
						Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(customProgrammerProtocol).Via("eth0").Only(),
							"%s's route to %s is the programmer's at proto %d", n.Name, b, customProgrammerProtocol)
					rs, err := n.Routes(b)
					Expect(err).NotTo(HaveOccurred())
					Expect(rs).To(ConsistOf(HaveField("Protocol", customProgrammerProtocol)), "%s: the kernel's protocol number of every route to %s", n.Name, b)
					Expect(n).NotTo(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(designProgrammerProtocol),
						"control: judged by the default %d, %s's route to %s must not pass as the programmer's", designProgrammerProtocol, n.Name, b)
				}
			}

			// 3. Traffic: every pair of nodes delivers over those routes.
			probes, err := c.Probes(ctx, harness.ProbeOptions{})
			Expect(err).NotTo(HaveOccurred(), "probes flow between every pair over the proto %d routes", customProgrammerProtocol)

			By("4. the programmer's ownership goes by 99: an undesired proto 99 route goes, a proto 80 one stays")
			removedAfter, resyncs := expectOwnershipByProtocol(c)

			By("5. BIRD's view of the programmer's routes (learned with Kernel.source 99, or kept out by the import filter)")
			b2, held := expectBIRDViewOfProtocol(ctx, c, importFilter)

			rep, err := probes.Stop()
			Expect(err).NotTo(HaveOccurred())
			for _, f := range rep.Flows {
				Expect(f.Received).To(BeNumerically(">", 0), "flow %s delivered over the proto %d routes", f.Flow, customProgrammerProtocol)
			}
			res := c.Result(fmt.Sprintf("deviceRouteProtocol %d end to end (import filter %v)", customProgrammerProtocol, importFilter), rep)
			res.Figure("deviceRouteProtocol", float64(customProgrammerProtocol), results.KindSize)
			res.Figure("ownProtocolFixtureRemovedAfterMs", removedAfter, results.KindDuration)
			res.Figure("fullResyncsObserved", float64(resyncs), results.KindSize)
			res.Notes = append(res.Notes, fmt.Sprintf("node-1's BIRD holds for %s: %v", b2, held))
			scenariotest.Record(fmt.Sprintf("deviceRouteProtocol %d: routes, ownership, BIRD's view (import filter %v); own-protocol stray removed after %.0f ms", customProgrammerProtocol, importFilter, removedAfter),
				results.GapTable(rep), res)
		},
		Entry("BIRD learns the programmer's routes with Kernel.source 99", false),
		Entry("the candidate kernel import filter keeps out krt_source 99 with a next hop", true),
	)
})

// birdKernelRoutes lists the routes n's BIRD learned for exactly p from its
// kernel protocols.
func birdKernelRoutes(ctx context.Context, n *harness.Node, p netip.Prefix) []bird.Route {
	rs, err := n.BIRD.Client().Routes(ctx, p.String())
	if err != nil {
		return []bird.Route{{Prefix: p, Dest: "error: " + err.Error()}}
	}
	var out []bird.Route
	for _, r := range rs {
		if r.Prefix == p && (r.Protocol == "kernel4" || r.Protocol == "kernel6") {
			out = append(out, r)
		}
	}
	return out
}

// expectOwnershipByProtocol is step 4 of the deviceRouteProtocol spec: the
// programmer's ownership of kernel routes goes by 99: an undesired proto 99
// route on the uplink is its own and goes; an undesired proto 80 route
// beside it is not and stays (over two full resyncs).
func expectOwnershipByProtocol(c *harness.Cluster) (removedAfter float64, resyncs int) {
	GinkgoHelper()
	n1 := c.Node("node-1")
	gw := c.Node("node-2").NS.Address.Addr()
	planted := c.Mark("fixtures planted")
	Expect(addFixtureRoute(n1, fixtureOwnProtocol, gw, "eth0", customProgrammerProtocol)).To(Succeed())
	Expect(addFixtureRoute(n1, fixtureOldProtocol, gw, "eth0", designProgrammerProtocol)).To(Succeed())
	Eventually(func() []kroute.Route { rs, _ := n1.Routes(fixtureOwnProtocol); return rs }).
		WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).Should(BeEmpty(),
		"node-1's programmer should remove the undesired proto %d route to %s: its own by protocol", customProgrammerProtocol, fixtureOwnProtocol)
	if dels := deletesOf(c.Timeline(n1.Name), fixtureOwnProtocol, planted.Mono, 0); len(dels) > 0 {
		removedAfter = float64(dels[0].At-planted.Mono) / 1e6
	}
	Expect(programmerDeletes(n1.Programmer.LogPath())).To(HaveKey(fixtureOwnProtocol.String()), "node-1's programmer log should say it deleted %s", fixtureOwnProtocol)
	resyncs = waitFullResyncs(n1, 2)
	end := c.Mark("two full resyncs after the fixtures")
	Expect(n1.Routes(fixtureOldProtocol)).To(ContainElement(SatisfyAll(HaveField("Dst", fixtureOldProtocol), HaveField("Protocol", designProgrammerProtocol))),
		"control: the proto %d route to %s is not the programmer's once it writes proto %d, and must stay", designProgrammerProtocol, fixtureOldProtocol, customProgrammerProtocol)
	Expect(deletesOf(c.Timeline(n1.Name), fixtureOldProtocol, planted.Mono, end.Mono)).To(BeEmpty(), "the proto %d fixture was deleted at some point", designProgrammerProtocol)
	return removedAfter, resyncs
}

// expectBIRDViewOfProtocol is step 5: BIRD's view of the programmer's
// routes; it returns node-2's block and what node-1's BIRD holds for it.
func expectBIRDViewOfProtocol(ctx SpecContext, c *harness.Cluster, importFilter bool) (b2 netip.Prefix, held []bird.Route) {
	GinkgoHelper()
	n1 := c.Node("node-1")
	source := strconv.Itoa(int(customProgrammerProtocol))
	b2 = blockOf(c.Node("node-2").NS, "noencap-pool")
	if !importFilter {
		// Learned as alien kernel routes carrying protocol 99.
		Eventually(func() []bird.Route { held = birdKernelRoutes(ctx, n1, b2); return held }).WithPolling(100*time.Millisecond).
			Should(ContainElement(HaveField("Attrs", HaveKeyWithValue("Kernel.source", source))),
				"node-1's BIRD should learn the programmer's route to %s with Kernel.source %s", b2, source)
	} else {
		// The candidate filter rejects krt_source = 99 with a next
		// hop: the remote routes stay out of BIRD's table...
		conf, err := birdConfig(n1)
		Expect(err).NotTo(HaveOccurred())
		Expect(conf).To(ContainSubstring(fmt.Sprintf("krt_source = %d", customProgrammerProtocol)), "node-1's import filter names protocol %d", customProgrammerProtocol)
		Consistently(func() []bird.Route { held = birdKernelRoutes(ctx, n1, b2); return held }).WithTimeout(3*time.Second).WithPolling(200*time.Millisecond).
			Should(BeEmpty(), "with the candidate import filter node-1's BIRD must not hold the programmer's proto %d route to %s", customProgrammerProtocol, b2)
		// ...while the programmer's local workload route (proto 99,
		// no next hop) is still learned: the filter matched the
		// protocol and the next hop, not everything.
		local := netip.PrefixFrom(c.Net.Nodes[0].Workloads[0].IPv4, 32)
		Eventually(n1).WithPolling(50*time.Millisecond).
			Should(judge.HaveClusterRoute(local).ProgrammedBy(judge.ByProgrammer).WithProgrammerProtocol(customProgrammerProtocol),
				"guard: node-1's programmer writes its local workload route %s at proto %d", local, customProgrammerProtocol)
		Eventually(func() []bird.Route { return birdKernelRoutes(ctx, n1, local) }).WithPolling(100*time.Millisecond).
			Should(ContainElement(HaveField("Attrs", HaveKeyWithValue("Kernel.source", source))),
				"control: node-1's BIRD still learns the proto %d local workload route %s (no next hop)", customProgrammerProtocol, local)
	}
	return b2, held
}
