package scenarios_test

// Claim (design §4, "Where BIRD does not come back"): in the ordinary
// upgrade it is the new BIRD, reconciling after its graceful-restart
// recovery, that removes the `proto bird` routes its predecessor left in the
// kernel (persist) to destinations nobody wants any more. When BIRD does not
// come back — BGP switched off in the same migration, or a BIRD that never
// finishes recovery — nothing else would: those routes are not the
// programmer's by protocol. So a programmer that is the configured owner of
// the IPIP cluster routes also claims `proto bird` routes via tunl0, and its
// reconciliation deletes the ones it does not want: a block released while
// the node was down, the blocks of a node that left, the blocks of a deleted
// pool. The rule has no time bound, so the scenario waits without one and
// reports how long the removal took, against the programmer's
// routeRefreshInterval.
//
// What the rule must not touch, also checked here across two full resyncs:
// the same strays when the programmer does not own IPIP (FelixConfiguration
// programClusterRoutes Disabled on 3.33), the same strays under a pre-3.33
// programmer (which has no such rule even when it owns IPIP), a route of
// another protocol via tunl0, and a `proto bird` route on another device.
//
// One cluster carries all three kinds of stray at once (they are distinct
// prefixes), so each table entry crosses one way of BIRD not coming back
// with every kind of stray.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/birdcage/birdcage/dataplane/supervisor"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/instrument/timeline"
	"github.com/birdcage/birdcage/instrument/timeline/event"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// birdAbsence is how BIRD fails to come back on the migrated node.
type birdAbsence int

const (
	// BGP switched off in the same migration: UpgradeNode starts no BIRD.
	absentBGPDisabled birdAbsence = iota
	// The new BIRD starts with -R while every peer's BIRD is down, so it
	// waits in graceful-restart recovery and never reconciles.
	absentRecoveryNeverCompletes
	// BIRD killed and not restarted; the programmer restarts for a live
	// configuration change instead of an upgrade (release unchanged).
	absentKilledNotRestarted
)

func (a birdAbsence) String() string {
	switch a {
	case absentBGPDisabled:
		return "BGP disabled in the migration"
	case absentRecoveryNeverCompletes:
		return "new BIRD never completes recovery"
	}
	return "BIRD killed and not restarted"
}

type cleanupCase struct {
	absence birdAbsence
	// start is the FelixConfiguration/BGPConfiguration pair written
	// before the cluster starts (empty: unset, the releases' defaults).
	start ownership
	// release of node-2's programmer after the migration.
	release config.Release
	// owns: node-2's programmer owns IPIP cluster routes afterwards;
	// claims: it also claims BIRD's tunnel routes (and so removes strays).
	owns, claims bool
}

// The second IPIP pool exists so that one can be deleted without leaving
// the cluster with no IPIP pool, which would change the programmer's
// restart-relevant fields and so make the scenario about something else.
const strayPoolName = "ipip-pool-2"

var strayPool = topo.Pool{Name: strayPoolName, CIDR: "10.246.0.0/16", IPIPMode: "Always"}

// Fixture destinations inside the IPIP pool but in no block: only their
// protocol and device tell them from a stray.
var (
	fixtureStaticViaTunnel = netip.MustParsePrefix("10.245.255.0/26") // proto static via tunl0
	fixtureBIRDViaUplink   = netip.MustParsePrefix("10.245.254.0/26") // proto bird via eth0
)

type stray struct {
	kind string
	dst  netip.Prefix
}

var _ = Describe("Persisted-route cleanup where BIRD does not come back", Label("ipip", "cleanup"), func() {
	DescribeTable("the programmer that owns IPIP removes BIRD's stray tunnel routes, and touches nothing else",
		func(ctx SpecContext, tc cleanupCase) {
			// 1. Every node on pre-3.33, with a second IPIP pool, so BIRD
			// programs a route via tunl0 to every remote block of both.
			t, err := topo.Builtin("ipip")
			Expect(err).NotTo(HaveOccurred())
			t.Pools = append(t.Pools, strayPool)
			c := startClusterOn(ctx, t, harness.Options{
				Release: config.Pre333,
				Felix:   datastore.FelixConfiguration{ProgramClusterRoutes: string(tc.start.felix)},
				BGP:     datastore.BGPConfiguration{ProgramClusterRoutes: string(tc.start.bgp)},
			})
			node2 := c.Node("node-2")
			remote := c.RemoteBlocks(node2.Name)
			Expect(remote).To(HaveLen(6), "guard: 3 remote nodes × 2 pools")

			// 2. Guard: BIRD really programs them, or a removal proves nothing.
			for _, b := range remote {
				Eventually(node2).WithPolling(50*time.Millisecond).
					Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice), "guard before node-2 goes down")
			}

			// 3. node-2 goes down the way a deleted pod does: BIRD SIGKILLed,
			// its routes persisting in the kernel.
			act(c.KillBIRD(ctx, node2.Name, syscall.SIGKILL))

			// 4. While it is down, three destinations stop being wanted.
			node3, node4 := c.Net.Nodes[2], c.Net.Nodes[3]
			strays := []stray{
				{"block released", blockOf(node3, "ipip-pool")},
				{"node gone", blockOf(node4, "ipip-pool")},
				{"node gone", blockOf(node4, strayPoolName)},
				{"pool deleted", blockOf(c.Net.Nodes[0], strayPoolName)},
				{"pool deleted", blockOf(node3, strayPoolName)},
			}
			act(c.Datastore().ReleaseBlock(ctx, strays[0].dst))
			act(c.RemoveNode(ctx, node4.Name))
			act(c.Datastore().DeletePool(ctx, strayPoolName))
			// Still wanted afterwards: node-1's block, and node-3's
			// workload, now in no block, by a /32 of its own.
			node1Block := blockOf(c.Net.Nodes[0], "ipip-pool")
			node3Workload := netip.PrefixFrom(node3.Workloads[0].IPv4, 32)

			// 5. Guard: every stray is still BIRD's route via tunl0 on node-2.
			for _, s := range strays {
				Expect(node2).To(judge.HaveClusterRoute(s.dst).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice),
					"guard: the %s stray must be in node-2's kernel before the migration", s.kind)
			}

			// 6. Fixtures the rule must never take: another protocol via
			// tunl0, and BIRD's protocol on another device. Both sit inside
			// the IPIP pool, undesired, like the strays.
			Expect(addFixtureRoute(node2, fixtureStaticViaTunnel, node3.Address.Addr(), topo.TunnelDevice, kroute.ProtoStatic)).To(Succeed())
			Expect(addFixtureRoute(node2, fixtureBIRDViaUplink, netip.MustParseAddr("10.10.1.1"), "eth0", kroute.ProtoBIRD)).To(Succeed())
			fixturesAt := c.Mark("fixtures installed")

			// 7. The migration, in a way that BIRD does not come back.
			var migrated results.Event
			switch tc.absence {
			case absentBGPDisabled:
				act(c.Datastore().DisableBGP(ctx))
				migrated = act(c.UpgradeNode(ctx, node2.Name, tc.release, harness.UpgradeOptions{}))
			case absentRecoveryNeverCompletes:
				for _, peer := range []string{"node-1", "node-3"} { // node-4 is gone
					act(c.KillBIRD(ctx, peer, syscall.SIGKILL))
				}
				migrated = act(c.UpgradeNode(ctx, node2.Name, tc.release, harness.UpgradeOptions{}))
				Expect(node2.BIRD.Running()).To(BeTrue(), "guard: the new BIRD must run (in recovery)")
			case absentKilledNotRestarted:
				// The value that makes node-2's programmer own IPIP on its
				// release: 3.33's EnabledIPIPOnly; 3.31's and 3.32's Felix
				// has only Enabled|Disabled (felix/config/config_params.go
				// @ 3cdeae8f7ace, de60d98e97a7) and reads an unknown
				// value as its default, Disabled, with a warning — so
				// there it is Enabled (IPIP and no-encap; this topology
				// has no no-encap pool). BGPConfiguration likewise: 3.32's
				// confd has Enabled|Disabled (anything but Disabled is
				// Enabled); node-2's BIRD is dead either way.
				felix, bgp := config.EnabledIPIPOnly, config.EnabledNoEncapOnly
				if tc.release != config.R333 {
					felix, bgp = config.Enabled, config.Enabled
				}
				migrated, err = c.SetProgramClusterRoutes(ctx, felix, bgp)
				Expect(err).NotTo(HaveOccurred())
				Eventually(func() []supervisor.Restart { return syncedRestarts(node2) }).
					WithPolling(50*time.Millisecond).ShouldNot(BeEmpty(), "node-2's programmer restarts for the ownership change")
			}
			Expect(node2.Programmer.Release()).To(Equal(tc.release))
			st, err := node2.Programmer.Status()
			Expect(err).NotTo(HaveOccurred())
			Expect(st.ProgramIPIPClusterRoutes).To(Equal(tc.owns), "node-2's programmer owns IPIP cluster routes (status %+v)", st)
			Expect(st.ClaimsBIRDTunnelRoutes).To(Equal(tc.claims), "node-2's programmer claims BIRD's tunnel routes (status %+v)", st)

			// 8. The claim: strays removed (no time bound; the timeout is
			// only the spec's safety net), or left alone.
			if tc.claims {
				for _, s := range strays {
					Eventually(func() []kroute.Route { return birdRoutesTo(node2, []netip.Prefix{s.dst}) }).
						WithTimeout(machine.Wait(3*time.Minute)).WithPolling(50*time.Millisecond).Should(BeEmpty(),
						"the %s stray %s: node-2's programmer owns IPIP and should have removed BIRD's route", s.kind, s.dst)
				}
			}
			// Wanted destinations: the programmer's if it owns IPIP, else
			// still BIRD's persisted routes (nobody took them).
			wantOwner := judge.ByBIRD
			if tc.owns {
				wantOwner = judge.ByProgrammer
			}
			Eventually(node2).WithPolling(50*time.Millisecond).
				Should(judge.HaveClusterRoute(node1Block).ProgrammedBy(wantOwner).Via(topo.TunnelDevice), "node-1's block is still wanted")
			if tc.owns {
				Eventually(node2).WithPolling(50*time.Millisecond).
					Should(judge.HaveClusterRoute(node3Workload).ProgrammedBy(judge.ByProgrammer).Via(topo.TunnelDevice),
						"node-3's workload lost its block; the programmer routes it by a /32")
			}
			// Guard: what node-2 now routes via tunl0 carries its traffic
			// inside IPIP, to node-1 beside it on lan-a (where bare packets
			// would arrive as well) and to node-3's workload across the
			// router. Routes alone pass on a tunl0 that does not
			// encapsulate (issue 28).
			encap := expectIPIPEncapsulated(ctx, c, flowsFrom(c, node2.Name, "node-1", "node-3"), "node-2 after the migration")

			// 9. Two full resyncs of node-2's programmer, read from its
			// status file, so "left alone" means left alone by reconciliation.
			resyncs := waitFullResyncs(node2, 2)
			end := c.Mark("two full resyncs observed")

			// 10. What the rule must never take, over the whole window.
			tl := c.Timeline(node2.Name)
			Expect(node2.Routes(fixtureStaticViaTunnel)).To(ContainElement(SatisfyAll(
				HaveField("Dst", fixtureStaticViaTunnel), HaveField("Protocol", kroute.ProtoStatic), HaveField("Devices()", ConsistOf(topo.TunnelDevice)))),
				"the proto static route via tunl0 is not the programmer's and must stay")
			Expect(node2.Routes(fixtureBIRDViaUplink)).To(ContainElement(SatisfyAll(
				HaveField("Dst", fixtureBIRDViaUplink), HaveField("Protocol", kroute.ProtoBIRD), HaveField("Devices()", ConsistOf("eth0")))),
				"the proto bird route on eth0 is outside the rule (tunl0 only) and must stay")
			for _, p := range []netip.Prefix{fixtureStaticViaTunnel, fixtureBIRDViaUplink} {
				Expect(deletesOf(tl, p, fixturesAt.Mono, end.Mono)).To(BeEmpty(), "fixture %s was deleted at some point", p)
			}
			if !tc.claims {
				for _, s := range strays {
					Expect(node2).To(judge.HaveClusterRoute(s.dst).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice),
						"the %s stray must be untouched: this programmer does not claim BIRD's routes", s.kind)
					Expect(deletesOf(tl, s.dst, migrated.Mono, end.Mono)).To(BeEmpty(), "the %s stray %s was deleted", s.kind, s.dst)
				}
			}

			// 11. Guards on the way BIRD stayed away: had it reconciled,
			// the removals above would not be the programmer's.
			switch tc.absence {
			case absentBGPDisabled, absentKilledNotRestarted:
				Expect(node2.BIRD.Running()).To(BeFalse(), "node-2's BIRD must not have come back")
			case absentRecoveryNeverCompletes:
				ps, err := node2.BIRD.Client().Protocols(ctx)
				Expect(err).NotTo(HaveOccurred())
				for _, p := range ps {
					Expect(p.Established()).To(BeFalse(), "node-2's BIRD session %s is up: its peers were meant to be down, keeping it in recovery", p.Name)
				}
			}

			// 12. Figures: per stray, when and by whom it went.
			refresh := 5 * time.Second // harness.Options default, written to FelixConfiguration
			if d, err := time.ParseDuration(st.RouteRefreshInterval); err == nil && d > 0 {
				refresh = d
			}
			deleted := programmerDeletes(node2.Programmer.LogPath())
			firstSync := firstSyncAfter(c, node2, migrated.Mono)
			tab := results.NewTable("stray", "prefix", "proto bird route", "removed after migration began", "in refresh intervals", "by the first sync", "deleted by")
			res := c.Result(fmt.Sprintf("persisted-route cleanup: %s, node-2 on %s", tc.absence, tc.release), nil)
			res.Figures["routeRefreshIntervalMs"] = float64(refresh.Milliseconds())
			res.Figures["fullResyncsObserved"] = float64(resyncs)
			encapFigures(res, encap)
			var slowest float64
			for _, s := range strays {
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
				}
			}
			tab.Add("fixture proto static via tunl0", fixtureStaticViaTunnel, "stayed", "-", "-", "-", "-")
			tab.Add("fixture proto bird via eth0", fixtureBIRDViaUplink, "stayed", "-", "-", "-", "-")
			if firstSync != 0 {
				res.Figures["firstSyncAfterMigrationMs"] = float64(firstSync-migrated.Mono) / 1e6
			}
			if tc.claims {
				res.Figures["slowestStrayRemovalMs"] = slowest
				res.Figures["slowestStrayRemovalRefreshIntervals"] = slowest / float64(refresh.Milliseconds())
			}
			res.Figures["straysLeft"] = float64(len(birdRoutesTo(node2, strayDsts(strays))))
			res.Notes = append(res.Notes, fmt.Sprintf("node-2 programmer %s: programIPIPClusterRoutes=%v claimsBIRDTunnelRoutes=%v; routeRefreshInterval %s; %d full resyncs observed after the migration",
				tc.release, st.ProgramIPIPClusterRoutes, st.ClaimsBIRDTunnelRoutes, refresh, resyncs))
			report(fmt.Sprintf("cleanup, %s, node-2 programmer %s (owns IPIP %v, claims BIRD's tunl0 routes %v)", tc.absence, tc.release, tc.owns, tc.claims), tab.String(), res)
		},
		// The two entries labelled conformance run again on the kernel's
		// ipip in CI's VM: the claim rule taking BIRD's routes via a real
		// tunl0, and a programmer without the rule leaving them. The other
		// entries vary why BIRD stays away and which release runs, which
		// the tunnel's kind does not touch; they run natively.
		Entry("3.33, BGP disabled as part of the migration: strays removed", Label("conformance"),
			cleanupCase{absence: absentBGPDisabled, release: config.R333, owns: true, claims: true}),
		Entry("3.33, the new BIRD never completes recovery: strays removed",
			cleanupCase{absence: absentRecoveryNeverCompletes, release: config.R333, owns: true, claims: true}),
		Entry("negative: 3.33 with FelixConfiguration Disabled (the pre-3.33 pair pinned): strays untouched",
			cleanupCase{absence: absentBGPDisabled, start: ownership{config.Disabled, config.Enabled, judge.ByBIRD}, release: config.R333}),
		Entry("negative: a pre-3.33 programmer that owns IPIP has no claim rule: strays untouched", Label("conformance"),
			cleanupCase{absence: absentKilledNotRestarted, release: config.Pre333, owns: true}),
	)
})

func strayDsts(ss []stray) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, s.dst)
	}
	return out
}

// addFixtureRoute installs a route in a node's main table the way another
// component would: dst via gw out of dev with protocol proto, metric 0.
func addFixtureRoute(n *harness.Node, dst netip.Prefix, gw netip.Addr, dev string, proto kroute.Protocol) error {
	h, err := n.NS.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("node %s: fixture route %s: %w", n.Name, dst, err)
	}
	r := &netlink.Route{
		LinkIndex: l.Attrs().Index,
		Dst:       &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())},
		Gw:        gw.AsSlice(),
		Protocol:  netlink.RouteProtocol(proto),
		Table:     syscall.RT_TABLE_MAIN,
	}
	if dev == topo.TunnelDevice {
		r.Flags = int(netlink.FLAG_ONLINK)
	}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("node %s: fixture route %s via %s dev %s proto %d: %w", n.Name, dst, gw, dev, proto, err)
	}
	return nil
}

// firstBIRDDelete finds when BIRD's route to p left the main table after
// from (a delete of a proto bird route, or its replacement by another).
func firstBIRDDelete(m *timeline.Monitor, p netip.Prefix, from int64) (int64, bool) {
	for _, e := range m.EventsFor(p, from, 0) {
		if e.Kind == event.Delete && e.Route.Protocol == kroute.ProtoBIRD {
			return e.At, true
		}
	}
	return 0, false
}

// programmerDeletes reads a programmer log (JSON lines, every process the
// supervisor ran) and returns the destinations it logged as deleted.
func programmerDeletes(path string) map[string]bool {
	out := map[string]bool{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
			Dst string `json:"dst"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "route deleted" {
			out[line.Dst] = true
		}
	}
	return out
}

// firstSyncAfter is when node's programmer (the process started by the
// migration) completed its first sync after from, as the harness saw it:
// UpgradeNode's "programmer synced" mark, or a config-change restart's sync.
func firstSyncAfter(c *harness.Cluster, node *harness.Node, from int64) int64 {
	for _, e := range c.Events() {
		if e.Mono >= from && e.Name == "UpgradeNode("+node.Name+") programmer synced" {
			return e.Mono
		}
	}
	for _, r := range node.Programmer.Restarts() {
		if r.ExitMono >= from && r.SyncedMono != 0 {
			return r.SyncedMono
		}
	}
	return 0
}
