package scenarios_test

// The design's IPIP claims per BIRD release (needs a kernel with ipip: the
// VM stage). Two claims, each a spec per release:
//
//   - the programmer owns IPIP (the 3.33 defaults; design §2, "confd +
//     BIRD"): BIRD learns the programmer's tunl0 routes from the kernel
//     (`learn`), and the tunl0 arm of the export filter towards iBGP peers
//     keeps it from passing them on — no node exports another node's block
//     to an iBGP peer, neither in the steady state nor once the block's
//     owner has withdrawn it (its BIRD SIGTERMed), when the kernel-learned
//     tunl0 route is the best route BIRD has; and BIRD does not fight the
//     programmer for the class — it exports no IPIP cluster route to the
//     kernel, writes none (no BIRD route to a remote block on the route
//     timeline, no route going from one component to the other), and has
//     no write refused;
//   - BIRD owns IPIP (FelixConfiguration Disabled, BGPConfiguration
//     Enabled): upstream BIRD programs each remote block as an onlink
//     route via tunl0 (the export filter's `onlink = true; ifname =
//     "tunl0"`), the programmer writes none, and every flow delivers
//     through the tunnel. BIRD 1.6 and 3.1 cannot express it (no onlink
//     route attribute in their filters; confd refuses the render with
//     ErrNotExpressible): those rows skip with the reason and the table
//     says "not expressible".
//
// Topology: the ipip built-in cut to three nodes (node-1 and node-2 on one
// subnet, node-3 behind the router), so every IPIP pair of subnets is still
// there and a VM run stays short.
//
// CI runs the reduced form: the programmer-owned claim on BIRD 1.6 (the
// fork's base, what the node software ships) and 3.1 (the newest), and the
// not-expressible rows (they skip at once). BIRDCAGE_DEPTH=releases adds
// the programmer-owned claim on 2.0 and 2.17 and the BIRD-owned claim on
// 2.0 and 2.17.

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/bird/release"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/encap"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

// The IPIP claims' names in the cross-release table.
const (
	claimIPIPProgrammer = "IPIP, programmer owns: no iBGP re-advertisement, no fight (§2)"
	claimIPIPBIRD       = "IPIP, BIRD owns: onlink tunl0 routes (§2)"
)

// ipipReduced: the releases whose programmer-owned IPIP claim CI runs.
var ipipReduced = map[release.Name]bool{release.BIRD16: true, release.BIRD31: true}

// ipipReleaseTopology is the ipip built-in with its first three nodes.
func ipipReleaseTopology() *topo.Topology {
	GinkgoHelper()
	t := builtinTopology("ipip")
	Expect(len(t.Nodes)).To(BeNumerically(">=", 3))
	t.Nodes = t.Nodes[:3]
	t.Name = "ipip-3"
	return t
}

// kernelProtocols names n's BIRD's kernel protocols (kernel4/kernel6 as
// confd names them on 2.x and 3.x, kernel1 on 1.6's unnamed one).
func kernelProtocols(ctx context.Context, n *harness.Node) []string {
	GinkgoHelper()
	ps, err := n.BIRD.Client().Protocols(ctx)
	Expect(err).NotTo(HaveOccurred(), "%s: birdc show protocols", n.Name)
	var out []string
	for _, p := range ps {
		if p.Proto == "Kernel" {
			out = append(out, p.Name)
		}
	}
	Expect(out).NotTo(BeEmpty(), "guard: %s's BIRD has a kernel protocol", n.Name)
	return out
}

// ipipFight is what the route timelines and BIRD's logs say about the two
// components on the IPIP class over the whole run (the routes are first
// written while the cluster starts).
type ipipFight struct {
	switches   int      // a route going straight from one component's to the other's
	birdRoutes []string // BIRD-protocol routes written to a remote block
	progEvents int      // the programmer's route events (the positive control)
	refusals   int      // BIRD's "File exists" lines
}

func ipipFightOfRun(c *harness.Cluster) ipipFight {
	var f ipipFight
	for _, n := range c.Nodes() {
		k, _ := countRefusals(n, 0)
		f.refusals += k
		m := c.Timeline(n.Name)
		for _, b := range c.RemoteBlocks(n.Name) {
			f.switches += componentSwitches(m.Flaps(b, 0, 0).Owners)
			for _, e := range m.EventsFor(b, 0, 0) {
				switch e.Route.Protocol {
				case kroute.ProtoBIRD:
					f.birdRoutes = append(f.birdRoutes, fmt.Sprintf("%s %s %s", n.Name, e.Kind, e.Route))
				case programmerProto:
					f.progEvents++
				}
			}
		}
	}
	return f
}

var _ = Describe("IPIP claims per BIRD release", Label("ipip", "releases"), func() {
	for _, rel := range release.All {
		It(fmt.Sprintf("BIRD %s, the programmer owning IPIP: no node exports another node's block to an iBGP peer, even once its owner withdrew it, and BIRD does not fight the programmer's tunl0 routes", rel),
			Label(releaseLabel(rel), "readvertise"), func(ctx SpecContext) {
				if !ipipReduced[rel] {
					needFull("IPIP, programmer owns, on BIRD " + string(rel))
				}
				recordFailedUnlessDone(claimIPIPProgrammer, rel)
				c := releaseCluster(ctx, rel, ipipReleaseTopology(), quickTimers(harness.Options{}))
				for _, n := range c.Nodes() {
					conf, err := birdConfig(n)
					Expect(err).NotTo(HaveOccurred())
					Expect(conf).To(ContainSubstring(`ifname ~ "`+topo.TunnelDevice+`"`), "guard: %s's BIRD %s config has the tunl0 arm of the iBGP reject", n.Name, rel)
				}

				// 1. Guards: the programmer's tunl0 route to every remote
				// block; BIRD exports none of them to the kernel (asked
				// until the kernel channel answers: 3.1 refuses `show route
				// export` while it is still feeding); sessions up and every
				// BIRD's best route the owner's advertisement.
				readvertGuardOwnership(c, judge.ByProgrammer, topo.TunnelDevice)
				for _, n := range c.Nodes() {
					Eventually(func() (map[netip.Prefix]bool, error) { return kernelExports(ctx, n) }).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).
						WithPolling(200*time.Millisecond).Should(
						Not(HaveKey(BeElementOf(c.RemoteBlocks(n.Name)))), "BIRD %s on %s exports a programmer-owned IPIP block to its kernel protocol", rel, n.Name)
				}
				Expect(c.WaitConverged(ctx)).To(Succeed(), "guard: every BGP session Established")
				readvertGuardSettled(ctx, c, true)

				// 2. Steady state: each node exports its own block to every
				// peer (the positive control) and nobody else's.
				steady := readvertMatrix(ctx, c, c.Nodes(), true)
				Expect(steady.readvertised).To(BeEmpty(), "BIRD %s, steady state: a node exports another node's block to an iBGP peer", rel)
				// Guard: the tunnel under these routes encapsulates (issue 28).
				ev := expectIPIPEncapsulated(ctx, c, nil, "steady state, every node pair")

				// 3. node-3 withdraws its block (SIGTERM: a Cease). Guard:
				// every other BIRD's best route to it is now the
				// programmer's tunl0 route, learned by its kernel protocol
				// — so the tunl0 arm is what keeps it from being exported.
				owner := "node-3"
				remaining := readvertWithout(c, owner)
				kill := scenariotest.Act(c.KillBIRD(ctx, owner, syscall.SIGTERM))
				withdrawn := readvertWithdrawnBlocks(c, owner)
				expectTunnelRouteBest(ctx, c, rel, owner, remaining, withdrawn)

				// 4. The claim: still nobody exports another node's block.
				after := readvertMatrix(ctx, c, remaining, true)
				Expect(after.readvertised).To(BeEmpty(), "BIRD %s, after %s withdrew its block: the tunl0 arm of the iBGP reject should stop every export of it", rel, owner)

				// 5. No fight, over the whole run, once BIRD has scanned
				// the kernel three more times and the programmer resynced
				// twice: BIRD wrote no route to a remote block and had no
				// write refused; no route switched component. Positive
				// control: the timeline holds the programmer's routes.
				var pool []netip.Prefix
				for _, nd := range c.Net.Nodes {
					for _, bl := range nd.Blocks {
						pool = append(pool, bl.CIDR)
					}
				}
				s := settle(ctx, c, pool, kill.Mono, "IPIP after the withdrawal")
				fight := ipipFightOfRun(c)
				Expect(fight.progEvents).To(BeNumerically(">=", len(remaining)), "positive control: the route timelines hold the programmer's tunl0 routes")

				recordIPIPProgrammerFigures(c, rel, steady, after, ev, fight, s.quiet)

				Expect(fight.birdRoutes).To(BeEmpty(), "BIRD %s wrote routes to remote IPIP blocks the programmer owns", rel)
				Expect(fight.switches).To(BeZero(), "BIRD %s and the programmer fought over the IPIP class", rel)
				Expect(fight.refusals).To(BeZero(), "BIRD %s tried to write routes the programmer holds (\"File exists\")", rel)
				recordVerdict(claimIPIPProgrammer, rel, verdictHolds, fmt.Sprintf("0 of %d exports, 0 BIRD writes", steady.checked+after.checked))
			})

		It(fmt.Sprintf("BIRD %s, BIRD owning IPIP: every remote block is BIRD's onlink route via tunl0, the programmer writes none, and every flow delivers", rel),
			Label(releaseLabel(rel), "onlink"), func(ctx SpecContext) {
				if ok, why := rel.TunnelRoutes(); !ok {
					recordVerdict(claimIPIPBIRD, rel, verdictNotExpressible, why)
					Skip(fmt.Sprintf("BIRD %s cannot express BIRD-owned IPIP: %s", rel, why))
				}
				needFull("IPIP, BIRD owns, on BIRD " + string(rel))
				recordFailedUnlessDone(claimIPIPBIRD, rel)
				c := releaseCluster(ctx, rel, ipipReleaseTopology(), quickTimers(harness.Options{
					Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(ipipByBIRD.felix)},
					BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(ipipByBIRD.bgp)},
				}))

				// 1. Every remote block: BIRD's route via tunl0, onlink,
				// and no programmer route.
				readvertGuardOwnership(c, judge.ByBIRD, topo.TunnelDevice)
				tab := results.NewTable("node", "remote block", "kernel route")
				for _, n := range c.Nodes() {
					for _, bl := range c.RemoteBlocks(n.Name) {
						rs, err := n.Routes(bl)
						Expect(err).NotTo(HaveOccurred())
						var birdR []kroute.Route
						for _, r := range rs {
							if r.Dst != bl || !r.Forwards() {
								continue
							}
							Expect(r.Protocol).To(Equal(kroute.ProtoBIRD), "BIRD %s owns IPIP, but %s's route to %s is %s", rel, n.Name, bl, r)
							birdR = append(birdR, r)
							tab.Add(n.Name, bl, r)
						}
						Expect(birdR).To(HaveLen(1), "%s: one route to %s", n.Name, bl)
						Expect(birdR[0].Onlink()).To(BeTrue(), "BIRD %s's tunl0 route to %s on %s is onlink (%s)", rel, bl, n.Name, birdR[0])
					}
				}

				// 2. Every flow delivers through the tunnel.
				probes, err := c.Probes(ctx, harness.ProbeOptions{})
				Expect(err).NotTo(HaveOccurred())
				Eventually(flowsDelivering(probes)).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(20*time.Second)).WithPolling(50*time.Millisecond).Should(Succeed(),
					"BIRD %s's onlink tunl0 routes carry every flow", rel)
				rep, err := probes.Stop()
				Expect(err).NotTo(HaveOccurred())
				// ...inside IPIP between the nodes, never bare (issue 28).
				ev, err := encap.CheckIPIP(c.Net, rep)
				Expect(err).NotTo(HaveOccurred(), "BIRD %s's tunl0 routes: IPIP flows must cross the underlay encapsulated", rel)

				// 3. The programmer never wrote the class BIRD owns.
				fight := ipipFightOfRun(c)
				res := c.Result(fmt.Sprintf("IPIP, BIRD owns, BIRD %s", rel), rep)
				encapFigures(&res, ev)
				res.Figure("programmerRouteEvents", float64(fight.progEvents), results.KindCount)
				res.Figure("componentSwitches", float64(fight.switches), results.KindCount)
				res.Figure("lostProbes", float64(rep.Total.Lost), results.KindLoss)
				scenariotest.Record(fmt.Sprintf("IPIP, BIRD owns, BIRD %s: onlink tunl0 routes", rel), tab.String()+"\n"+results.GapTable(rep), res)
				Expect(fight.progEvents).To(BeZero(), "the programmer wrote routes to remote IPIP blocks BIRD owns (BIRD %s)", rel)
				Expect(fight.switches).To(BeZero())
				Expect(len(fight.birdRoutes)).To(BeNumerically(">=", len(c.Nodes())), "positive control: the route timelines hold BIRD's tunl0 routes")
				recordVerdict(claimIPIPBIRD, rel, verdictHolds, "onlink via tunl0, every flow delivering")
			})
	}
})

// expectTunnelRouteBest is the guard of step 3 of the programmer-owns-IPIP
// spec: once owner withdrew its blocks, every other BIRD's best route to
// them is the programmer's tunl0 route, learned by its kernel protocol, and
// no longer owner's advertisement — so the tunl0 arm is what keeps it from
// being exported.
func expectTunnelRouteBest(ctx SpecContext, c *harness.Cluster, rel release.Name, owner string, remaining []*harness.Node, withdrawn []netip.Prefix) {
	GinkgoHelper()
	ownerAddr := c.Node(owner).NS.Address.Addr()
	for _, n := range remaining {
		kps := kernelProtocols(ctx, n)
		var fromOwner string
		for _, p := range n.Peers() {
			if p.Address == ownerAddr {
				fromOwner = p.Protocol
			}
		}
		for _, b := range withdrawn {
			Expect(n).To(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer).Via(topo.TunnelDevice), "guard: the programmer keeps its route to %s on %s", b, n.Name)
			Eventually(func() []bird.Route { return readvertBIRDRoutes(ctx, n, b) }).WithContext(ctx).WithTimeout(scenariotest.Machine.Wait(30*time.Second)).
				WithPolling(100*time.Millisecond).Should(SatisfyAll(
				ContainElement(SatisfyAll(HaveField("Protocol", BeElementOf(kps)), HaveField("Primary", true),
					HaveField("Nexthops", ContainElement(HaveField("Iface", topo.TunnelDevice))))),
				Not(ContainElement(HaveField("Protocol", fromOwner))),
			), "guard: %s's BIRD %s has the programmer's tunl0 route to %s from its kernel protocol %v as best, and no longer %s's advertisement",
				n.Name, rel, b, kps, owner)
		}
	}
}

// recordIPIPProgrammerFigures registers the programmer-owns-IPIP spec's
// figures: the exports checked and found, the encapsulation, the fight.
func recordIPIPProgrammerFigures(c *harness.Cluster, rel release.Name, steady, after readvertResult, ev encap.Evidence, fight ipipFight, quiet bool) {
	GinkgoHelper()
	res := c.Result(fmt.Sprintf("IPIP, programmer owns, BIRD %s", rel), nil)
	res.Figure("iBGPExportsChecked", float64(steady.checked+after.checked), results.KindSize)
	res.Figure("readvertisementsSteady", float64(len(steady.readvertised)), results.KindCount)
	res.Figure("readvertisementsAfterWithdrawal", float64(len(after.readvertised)), results.KindCount)
	encapFigures(&res, ev)
	res.Figure("componentSwitches", float64(fight.switches), results.KindCount)
	res.Figure("birdRouteEvents", float64(len(fight.birdRoutes)), results.KindCount)
	res.Figure("birdWritesRefused", float64(fight.refusals), results.KindCount)
	res.Figure("programmerRouteEvents", float64(fight.progEvents), results.KindCount)
	res.Notes = append(res.Notes, fmt.Sprintf("quiet after the withdrawal: %v", quiet))
	tab := results.NewTable("iBGP exports checked", "other nodes' blocks exported (steady / after withdrawal)", "component switches", "BIRD route events", "BIRD writes refused", "programmer route events")
	tab.Add(steady.checked+after.checked, results.Cellf("%d / %d", len(steady.readvertised), len(after.readvertised)), fight.switches, len(fight.birdRoutes), fight.refusals, fight.progEvents)
	scenariotest.Record(fmt.Sprintf("IPIP, programmer owns, BIRD %s: re-advertisement and the components", rel), tab.String(), res)
}
