package scenarios_test

// Persisted-route cleanup on real Calico (issue 45; the model's claim is
// in cleanup_test.go, design §4 "Where BIRD does not come back"): a 3.33
// Felix that owns the IPIP cluster routes takes BIRD's routes via tunl0
// as its own (MainTableOwnershipPolicy.OwnBIRDIPIPRoutes,
// felix/routetable/ownershippol/main_route_table_policy.go @ 6609dea54713)
// and its reconciliation removes the ones it does not want. Here BIRD
// programs IPIP (Felix Disabled, BGP Enabled), node-2's BIRD is killed
// and stays down (its routes persist), destinations stop being wanted
// — a block released, a node gone (its pod killed, its Node, blocks and
// workloads deleted), a pool deleted — and then Felix is given IPIP
// (EnabledIPIPOnly): it restarts and must remove every stray, and
// nothing else.

import (
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

var _ = Describe("Real Calico persisted-route cleanup", Label("calico", "cleanup", "ipip"), func() {
	It("with node-2's BIRD killed and not restarted, Felix given IPIP removes BIRD's stray tunnel routes (block released, node gone, pool deleted) and nothing else", func(ctx SpecContext) {
		t := builtin("ipip")
		t.Pools = append(t.Pools, strayPool)
		c, versions := startCalicoSide(ctx, t, calicoStep{felix: config.Disabled, bgp: config.Enabled})
		node2 := c.Node("node-2")
		node1, node3, node4 := c.Net.Nodes[0], c.Net.Nodes[2], c.Net.Nodes[3]

		// 1. Guard: BIRD programs every remote block of both pools via
		// tunl0 on node-2, or a removal proves nothing.
		remote := c.RemoteBlocks(node2.Name)
		Expect(len(remote)).To(BeNumerically(">=", 4), "guard: remote blocks of both pools")
		for _, b := range remote {
			Eventually(node2).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
				Should(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice), "guard: BIRD's route to %s on node-2", b)
		}

		// 2. node-2's BIRD is killed and stays down; its routes persist.
		scenariotest.NameConformance("cleanup: BIRD killed, strays (block released, node gone, pool deleted), Felix given IPIP", node2.Name)
		trace := traceConformance(c, node2.Name)
		scenariotest.Act(c.KillBIRD(ctx, node2.Name, syscall.SIGKILL))

		// 3. While it is down, destinations stop being wanted, each of
		// the three ways.
		strays := []stray{
			{"block released", blockOf(node3, "ipip-pool")},
			{"node gone", blockOf(node4, "ipip-pool")},
			{"node gone", blockOf(node4, strayPoolName)},
			{"pool deleted", blockOf(node1, strayPoolName)},
			{"pool deleted", blockOf(node3, strayPoolName)},
		}
		scenariotest.Act(c.Datastore().ReleaseBlock(ctx, strays[0].dst))
		scenariotest.Act(c.RemoveNode(ctx, node4.Name))
		scenariotest.Act(c.Datastore().DeletePool(ctx, strayPoolName))
		node1Block := blockOf(node1, "ipip-pool")

		// 4. Guard: every stray is still BIRD's route via tunl0 (Felix,
		// Disabled, does not claim them); fixtures the rule must never
		// take: another protocol via tunl0, BIRD's protocol on eth0.
		for _, s := range strays {
			Expect(node2).To(judge.HaveClusterRoute(s.dst).ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice), "guard: the %s stray before Felix takes IPIP", s.kind)
		}
		Expect(addFixtureRoute(node2, fixtureStaticViaTunnel, node3.Address.Addr(), topo.TunnelDevice, kroute.ProtoStatic)).To(Succeed())
		Expect(addFixtureRoute(node2, fixtureBIRDViaUplink, netip.MustParseAddr("10.10.1.1"), "eth0", kroute.ProtoBIRD)).To(Succeed())
		fixturesAt := c.Mark("fixtures installed")

		// 5. Felix takes IPIP; it restarts for the change.
		changed, err := c.SetProgramClusterRoutes(ctx, config.EnabledIPIPOnly, config.EnabledNoEncapOnly)
		Expect(err).NotTo(HaveOccurred())

		// 6. The claim: the strays go (no time bound in the design; the
		// timeout is the spec's safety net), node-1's block is Felix's.
		for _, s := range strays {
			Eventually(func() []kroute.Route { return birdRoutesTo(node2, []netip.Prefix{s.dst}) }).
				WithTimeout(scenariotest.Machine.Wait(3*time.Minute)).WithPolling(50*time.Millisecond).Should(BeEmpty(),
				"the %s stray %s: Felix owns IPIP and should have removed BIRD's route", s.kind, s.dst)
		}
		Eventually(node2).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
			Should(judge.HaveClusterRoute(node1Block).ProgrammedBy(judge.ByProgrammer).Via(topo.TunnelDevice), "node-1's block is still wanted: Felix's now")
		end := c.Mark("strays gone")

		// 7. What the rule must never take.
		tl := c.Timeline(node2.Name)
		for _, p := range []netip.Prefix{fixtureStaticViaTunnel, fixtureBIRDViaUplink} {
			Expect(deletesOf(tl, p, fixturesAt.Mono, end.Mono)).To(BeEmpty(), "fixture %s was deleted", p)
		}
		Expect(node2.Routes(fixtureBIRDViaUplink)).To(ContainElement(HaveField("Protocol", kroute.ProtoBIRD)), "the proto bird route on eth0 is outside the rule and must stay")

		// 8. Figures: when each stray went, and who asked (the trace).
		res := c.Result(fmt.Sprintf("%s: persisted-route cleanup, BIRD killed and not restarted, Felix given IPIP", c.Nodes()[0].Flavour()), nil)
		recordConformance(c, &res, trace, "cleanup: BIRD killed, strays (block released, node gone, pool deleted), Felix given IPIP", changed.Mono, end.Mono)
		var lines []string
		var slowest float64
		for _, s := range strays {
			at, ok := firstBIRDDelete(tl, s.dst, changed.Mono)
			Expect(ok).To(BeTrue(), "the %s stray %s left without a delete on the timeline", s.kind, s.dst)
			ms := float64(at-changed.Mono) / 1e6
			slowest = max(slowest, ms)
			var by []string
			for _, r := range res.RouteRequests[node2.Name] {
				if r.Dst == s.dst && r.Op == "del" {
					by = append(by, r.Comm)
				}
			}
			lines = append(lines, fmt.Sprintf("%s %s: removed %.0f ms after the change, deleted by %v", s.kind, s.dst, ms, by))
		}
		res.Figure("slowestStrayRemovalMs", slowest, results.KindDuration)
		res.Figure("straysLeft", float64(len(birdRoutesTo(node2, strayDsts(strays)))), results.KindCount)
		res.Notes = append(res.Notes, lines...)
		scenariotest.Record(res.Name, strings.Join(versions, "\n")+"\n"+strings.Join(lines, "\n")+"\n", res)
	})
})
