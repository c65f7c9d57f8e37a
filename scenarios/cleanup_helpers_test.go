package scenarios_test

// The steps of the persisted-route cleanup spec (cleanup_test.go), one
// method per numbered step.

import (
	"fmt"
	"net/netip"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/dataplane/supervisor"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/encap"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

// cleanupRun is one entry of the cleanup spec: node-2, its strays, the
// still-wanted destinations and what each step saw.
type cleanupRun struct {
	tc                   cleanupCase
	c                    *harness.Cluster
	node2                *harness.Node
	node3, node4         *topo.NodeNS
	strays               []stray
	node1Block           netip.Prefix
	node3Workload        netip.Prefix
	fixturesAt, migrated results.Event
	end                  results.Event
	st                   programmer.Status
	encap                encap.Evidence
	resyncs              int
}

// startCleanupRun is steps 1-2: every node on pre-3.33, with a second IPIP
// pool, so BIRD programs a route via tunl0 to every remote block of both;
// guard: BIRD really programs them, or a removal proves nothing.
func startCleanupRun(ctx SpecContext, tc cleanupCase) *cleanupRun {
	GinkgoHelper()
	t, err := topo.Builtin("ipip")
	Expect(err).NotTo(HaveOccurred())
	t.Pools = append(t.Pools, strayPool)
	r := &cleanupRun{tc: tc}
	r.c = scenariotest.StartClusterOn(ctx, t, harness.Options{
		Release: config.Pre333,
		Felix:   datastore.FelixConfiguration{ProgramClusterRoutes: string(tc.start.felix)},
		BGP:     datastore.BGPConfiguration{ProgramClusterRoutes: string(tc.start.bgp)},
	})
	r.node2 = r.c.Node("node-2")
	remote := r.c.RemoteBlocks(r.node2.Name)
	Expect(remote).To(HaveLen(6), "guard: 3 remote nodes × 2 pools")
	for _, b := range remote {
		Eventually(r.node2).WithPolling(50*time.Millisecond).
			Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice), "guard before node-2 goes down")
	}
	return r
}

// unwantStrays is steps 4-5: while node-2 is down, a block is released,
// node-4 leaves and the second pool is deleted; every stray is still
// BIRD's route via tunl0 on node-2.
func (r *cleanupRun) unwantStrays(ctx SpecContext) {
	GinkgoHelper()
	c := r.c
	r.node3, r.node4 = c.Net.Nodes[2], c.Net.Nodes[3]
	node3, node4 := r.node3, r.node4
	r.strays = []stray{
		{"block released", blockOf(node3, "ipip-pool")},
		{"node gone", blockOf(node4, "ipip-pool")},
		{"node gone", blockOf(node4, strayPoolName)},
		{"pool deleted", blockOf(c.Net.Nodes[0], strayPoolName)},
		{"pool deleted", blockOf(node3, strayPoolName)},
	}
	scenariotest.Act(c.Datastore().ReleaseBlock(ctx, r.strays[0].dst))
	scenariotest.Act(c.RemoveNode(ctx, node4.Name))
	scenariotest.Act(c.Datastore().DeletePool(ctx, strayPoolName))
	// Still wanted afterwards: node-1's block, and node-3's workload, now
	// in no block, by a /32 of its own.
	r.node1Block = blockOf(c.Net.Nodes[0], "ipip-pool")
	r.node3Workload = netip.PrefixFrom(node3.Workloads[0].IPv4, 32)
	for _, s := range r.strays {
		Expect(r.node2).To(judge.HaveClusterRoute(s.dst).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice),
			"guard: the %s stray must be in node-2's kernel before the migration", s.kind)
	}
}

// installFixtures is step 6: both fixtures sit inside the IPIP pool,
// undesired, like the strays.
func (r *cleanupRun) installFixtures() {
	GinkgoHelper()
	Expect(addFixtureRoute(r.node2, fixtureStaticViaTunnel, r.node3.Address.Addr(), topo.TunnelDevice, kroute.ProtoStatic)).To(Succeed())
	Expect(addFixtureRoute(r.node2, fixtureBIRDViaUplink, netip.MustParseAddr("10.10.1.1"), "eth0", kroute.ProtoBIRD)).To(Succeed())
	r.fixturesAt = r.c.Mark("fixtures installed")
}

// migrate is step 7, then node-2's programmer's release, ownership and
// claim as the entry expects.
func (r *cleanupRun) migrate(ctx SpecContext) {
	GinkgoHelper()
	c, node2, tc := r.c, r.node2, r.tc
	switch tc.absence {
	case absentBGPDisabled:
		scenariotest.Act(c.Datastore().DisableBGP(ctx))
		r.migrated = scenariotest.Act(c.UpgradeNode(ctx, node2.Name, tc.release, harness.UpgradeOptions{}))
	case absentRecoveryNeverCompletes:
		for _, peer := range []string{"node-1", "node-3"} { // node-4 is gone
			scenariotest.Act(c.KillBIRD(ctx, peer, syscall.SIGKILL))
		}
		r.migrated = scenariotest.Act(c.UpgradeNode(ctx, node2.Name, tc.release, harness.UpgradeOptions{}))
		Expect(node2.BIRD.Running()).To(BeTrue(), "guard: the new BIRD must run (in recovery)")
	case absentKilledNotRestarted:
		// The value that makes node-2's programmer own IPIP on its
		// release: 3.33's EnabledIPIPOnly; 3.31's and 3.32's Felix has
		// only Enabled|Disabled (felix/config/config_params.go @
		// 3cdeae8f7ace, de60d98e97a7) and reads an unknown value as its
		// default, Disabled, with a warning — so there it is Enabled (IPIP
		// and no-encap; this topology has no no-encap pool).
		// BGPConfiguration likewise: 3.32's confd has Enabled|Disabled
		// (anything but Disabled is Enabled); node-2's BIRD is dead either
		// way.
		felix, bgp := config.EnabledIPIPOnly, config.EnabledNoEncapOnly
		if tc.release != config.R333 {
			felix, bgp = config.Enabled, config.Enabled
		}
		var err error
		r.migrated, err = c.SetProgramClusterRoutes(ctx, felix, bgp)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() []supervisor.Restart { return syncedRestarts(node2) }).
			WithPolling(50*time.Millisecond).ShouldNot(BeEmpty(), "node-2's programmer restarts for the ownership change")
	}
	Expect(node2.Programmer.Release()).To(Equal(tc.release))
	var err error
	r.st, err = node2.Programmer.Status()
	Expect(err).NotTo(HaveOccurred())
	Expect(r.st.ProgramIPIPClusterRoutes).To(Equal(tc.owns), "node-2's programmer owns IPIP cluster routes (status %+v)", r.st)
	Expect(r.st.ClaimsBIRDTunnelRoutes).To(Equal(tc.claims), "node-2's programmer claims BIRD's tunnel routes (status %+v)", r.st)
}

// expectStraysRemovedAndWantedRouted is step 8: strays removed (no time
// bound; the timeout is only the spec's safety net), or left alone; the
// wanted destinations the programmer's if it owns IPIP, else still BIRD's
// persisted routes (nobody took them).
func (r *cleanupRun) expectStraysRemovedAndWantedRouted(ctx SpecContext) {
	GinkgoHelper()
	node2 := r.node2
	if r.tc.claims {
		for _, s := range r.strays {
			Eventually(func() []kroute.Route { return birdRoutesTo(node2, []netip.Prefix{s.dst}) }).
				WithTimeout(scenariotest.Machine.Wait(3*time.Minute)).WithPolling(50*time.Millisecond).Should(BeEmpty(),
				"the %s stray %s: node-2's programmer owns IPIP and should have removed BIRD's route", s.kind, s.dst)
		}
	}
	wantOwner := judge.ByBIRD
	if r.tc.owns {
		wantOwner = judge.ByProgrammer
	}
	Eventually(node2).WithPolling(50*time.Millisecond).
		Should(judge.HaveClusterRoute(r.node1Block).ProgrammedBy(wantOwner).Via(topo.TunnelDevice), "node-1's block is still wanted")
	if r.tc.owns {
		Eventually(node2).WithPolling(50*time.Millisecond).
			Should(judge.HaveClusterRoute(r.node3Workload).ProgrammedBy(judge.ByProgrammer).Via(topo.TunnelDevice),
				"node-3's workload lost its block; the programmer routes it by a /32")
	}
	// Guard: what node-2 now routes via tunl0 carries its traffic inside
	// IPIP, to node-1 beside it on lan-a (where bare packets would arrive
	// as well) and to node-3's workload across the router. Routes alone
	// pass on a tunl0 that does not encapsulate (issue 28).
	r.encap = expectIPIPEncapsulated(ctx, r.c, flowsFrom(r.c, node2.Name, "node-1", "node-3"), "node-2 after the migration")
}

// expectUntouchedAcrossResyncs is steps 9-10: two full resyncs of node-2's
// programmer, read from its status file, so "left alone" means left alone
// by reconciliation; what the rule must never take, over the whole window.
func (r *cleanupRun) expectUntouchedAcrossResyncs() {
	GinkgoHelper()
	node2 := r.node2
	r.resyncs = waitFullResyncs(node2, 2)
	r.end = r.c.Mark("two full resyncs observed")
	tl := r.c.Timeline(node2.Name)
	Expect(node2.Routes(fixtureStaticViaTunnel)).To(ContainElement(SatisfyAll(
		HaveField("Dst", fixtureStaticViaTunnel), HaveField("Protocol", kroute.ProtoStatic), HaveField("Devices()", ConsistOf(topo.TunnelDevice)))),
		"the proto static route via tunl0 is not the programmer's and must stay")
	Expect(node2.Routes(fixtureBIRDViaUplink)).To(ContainElement(SatisfyAll(
		HaveField("Dst", fixtureBIRDViaUplink), HaveField("Protocol", kroute.ProtoBIRD), HaveField("Devices()", ConsistOf("eth0")))),
		"the proto bird route on eth0 is outside the rule (tunl0 only) and must stay")
	for _, p := range []netip.Prefix{fixtureStaticViaTunnel, fixtureBIRDViaUplink} {
		Expect(deletesOf(tl, p, r.fixturesAt.Mono, r.end.Mono)).To(BeEmpty(), "fixture %s was deleted at some point", p)
	}
	if !r.tc.claims {
		for _, s := range r.strays {
			Expect(node2).To(judge.HaveClusterRoute(s.dst).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice),
				"the %s stray must be untouched: this programmer does not claim BIRD's routes", s.kind)
			Expect(deletesOf(tl, s.dst, r.migrated.Mono, r.end.Mono)).To(BeEmpty(), "the %s stray %s was deleted", s.kind, s.dst)
		}
	}
}

// expectBIRDStayedAway is step 11.
func (r *cleanupRun) expectBIRDStayedAway(ctx SpecContext) {
	GinkgoHelper()
	switch r.tc.absence {
	case absentBGPDisabled, absentKilledNotRestarted:
		Expect(r.node2.BIRD.Running()).To(BeFalse(), "node-2's BIRD must not have come back")
	case absentRecoveryNeverCompletes:
		ps, err := r.node2.BIRD.Client().Protocols(ctx)
		Expect(err).NotTo(HaveOccurred())
		for _, p := range ps {
			Expect(p.Established()).To(BeFalse(), "node-2's BIRD session %s is up: its peers were meant to be down, keeping it in recovery", p.Name)
		}
	}
}

// recordFigures is step 12: per stray, when and by whom it went (with the
// claim, by the programmer's own log).
func (r *cleanupRun) recordFigures() {
	GinkgoHelper()
	c, node2, tc, st, migrated := r.c, r.node2, r.tc, r.st, r.migrated
	tl := c.Timeline(node2.Name)
	refresh := 5 * time.Second // harness.Options default, written to FelixConfiguration
	if d, err := time.ParseDuration(st.RouteRefreshInterval); err == nil && d > 0 {
		refresh = d
	}
	deleted := programmerDeletes(node2.Programmer.LogPath())
	firstSync := firstSyncAfter(c, node2, migrated.Mono)
	tab := results.NewTable("stray", "prefix", "proto bird route", "removed after migration began", "in refresh intervals", "by the first sync", "deleted by")
	res := c.Result(fmt.Sprintf("persisted-route cleanup: %s, node-2 on %s", tc.absence, tc.release), nil)
	res.Figure("routeRefreshIntervalMs", float64(refresh.Milliseconds()), results.KindSize)
	res.Figure("fullResyncsObserved", float64(r.resyncs), results.KindSize)
	encapFigures(&res, r.encap)
	var slowest float64
	for _, s := range r.strays {
		gone, by := "stayed", "-"
		at, removed := firstBIRDDelete(tl, s.dst, migrated.Mono)
		after, intervals, first := "-", "-", "-"
		if removed {
			ms := float64(at-migrated.Mono) / 1e6
			slowest = max(slowest, ms)
			gone = "removed"
			after = fmt.Sprintf("%.0f ms", ms)
			intervals = fmt.Sprintf("%.2f", ms/float64(refresh.Milliseconds()))
			first = fmt.Sprint(firstSync != 0 && at <= firstSync)
			if deleted[s.dst.String()] {
				by = "programmer (its log)"
			} else {
				by = "not the programmer's log"
			}
		}
		tab.Add(s.kind, s.dst, gone, after, intervals, first, by)
		if tc.claims {
			Expect(deleted).To(HaveKey(s.dst.String()), "the %s stray %s went, but node-2's programmer log has no \"route deleted\" for it", s.kind, s.dst)
			Expect(firstSync != 0 && at <= firstSync).To(BeTrue(),
				"the %s stray %s should go in the first sync of node-2's new programmer (it reads the kernel at start), not at a later refresh: removed %s after the migration began, first sync %.0f ms after",
				s.kind, s.dst, after, float64(firstSync-migrated.Mono)/1e6)
		}
	}
	tab.Add("fixture proto static via tunl0", fixtureStaticViaTunnel, "stayed", "-", "-", "-", "-")
	tab.Add("fixture proto bird via eth0", fixtureBIRDViaUplink, "stayed", "-", "-", "-", "-")
	if firstSync != 0 {
		res.Figure("firstSyncAfterMigrationMs", float64(firstSync-migrated.Mono)/1e6, results.KindDuration)
	}
	if tc.claims {
		res.Figure("slowestStrayRemovalMs", slowest, results.KindDuration)
		res.Figure("slowestStrayRemovalRefreshIntervals", slowest/float64(refresh.Milliseconds()), results.KindDuration)
	}
	res.Figure("straysLeft", float64(len(birdRoutesTo(node2, strayDsts(r.strays)))), results.KindCount)
	res.Notes = append(res.Notes, fmt.Sprintf("node-2 programmer %s: programIPIPClusterRoutes=%v claimsBIRDTunnelRoutes=%v; routeRefreshInterval %s; %d full resyncs observed after the migration",
		tc.release, st.ProgramIPIPClusterRoutes, st.ClaimsBIRDTunnelRoutes, refresh, r.resyncs))
	scenariotest.Record(fmt.Sprintf("cleanup, %s, node-2 programmer %s (owns IPIP %v, claims BIRD's tunl0 routes %v)", tc.absence, tc.release, tc.owns, tc.claims), tab.String(), res)
}
