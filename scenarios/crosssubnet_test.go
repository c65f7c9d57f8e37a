package scenarios_test

// Claim (design §1, the ownership matrix's second row, and §2): a pool with
// `ipipMode: CrossSubnet` is an IPIP pool for ownership, in both components
// — the programmer's calculation and confd's per-pool filter key off
// ipipMode, so CrossSubnet is counted with Always, never with no-encap. Its
// routes have two shapes: to a node in another subnet through tunl0
// (onlink, to the node's address), to a node in the same subnet straight
// out of eth0 (no tunnel). Both shapes belong to whoever owns IPIP.
//
// Scenario (label ipip: the VM stage, or wherever tunl0 can be built): the
// ipip topology (node-1, node-2 on lan-a; node-3, node-4 on lan-b) with its
// pool switched to CrossSubnet, at 3.33. Two supported pairs, each the
// other's control, because the two classes have opposite owners in both:
//   - the defaults (EnabledIPIPOnly / EnabledNoEncapOnly): the programmer
//     programs every remote block of the pool, BIRD exports none of them to
//     its kernel;
//   - EnabledNoEncapOnly / EnabledIPIPOnly (deprecated, still supported):
//     BIRD programs them all, the programmer none.
// Were either component to count CrossSubnet as no-encap, the owner in both
// entries would flip (or both or neither would program): the route's
// protocol, and BIRD's kernel export, say which.
//
// The export side: the tunl0 arm of the iBGP reject is present exactly when
// the programmer owns IPIP; same-subnet routes leave by eth0, past that arm.
// In both entries, steady state, every node exports its own block to every
// iBGP peer (the arm does not swallow them) and no node another's. With the
// programmer owning IPIP, after node-2's BIRD stops with a Cease: node-1,
// whose route to node-2's block leaves by eth0, exports that kernel route to
// its iBGP peers (the reject matches on the device name, §5's proxy, so the
// same-subnet half of an IPIP pool has the no-encap gap — which §5 records
// for no-encap pools only; seen in the VM: node-3 then held node-2's block
// from node-1). Then, with node-1's BIRD stopped too, node-3 and node-4,
// whose best route to node-2's block is now the programmer's via tunl0,
// export it to no iBGP peer (the tunl0 arm holds). Fails when the tunl0
// arm is lost, or when it grows to swallow eth0 routes (then node-1 exports
// nothing: a behaviour change that must be a design change too).
//
// Guards: the datastore's pool is CrossSubnet; both shapes occur (a
// same-subnet and a cross-subnet destination on every node).

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

var _ = Describe("ipipMode CrossSubnet counted as IPIP", Label("ipip", "crosssubnet"), func() {
	DescribeTable("both components own a CrossSubnet pool as IPIP: tunl0 to another subnet, eth0 within one, the IPIP owner's either way",
		func(ctx SpecContext, felix, bgp string, owner judge.Owner) {
			By("a CrossSubnet IPIP pool; guard: the datastore holds it as CrossSubnet")
			cs := startCrossSubnet(ctx, felix, bgp, owner)
			By("1. every remote block: the owner's route alone, shaped by subnet, and still so after two resyncs")
			cs.expectShapedRoutes(ctx)
			By("2. export, steady state: own blocks to every iBGP peer, only a same-subnet eth0 route past the tunl0 arm")
			cs.expectSteadyExports(ctx)
			if owner == judge.ByProgrammer {
				By("3. node-2's advertisement withdrawn: node-1 re-advertises its eth0 route; with node-1 stopped too, the tunl0 arm holds")
				cs.expectWithdrawalExports(ctx)
			}
			scenariotest.Record(fmt.Sprintf("CrossSubnet pool, Felix=%s BGP=%s: every route %s's", rawName(felix), rawName(bgp), owner), cs.table.String()+readvertTable(cs.steady, readvertResult{}), cs.res)
		},
		Entry("3.33 defaults: the programmer owns IPIP, so CrossSubnet too", "", "", judge.ByProgrammer),
		Entry("Felix EnabledNoEncapOnly, BGP EnabledIPIPOnly: BIRD owns IPIP, so CrossSubnet too", string(config.EnabledNoEncapOnly), string(config.EnabledIPIPOnly), judge.ByBIRD),
	)
})

// crossSubnet is one entry of the CrossSubnet spec.
type crossSubnet struct {
	c          *harness.Cluster
	felix, bgp string
	owner      judge.Owner
	table      strings.Builder
	shapes     map[string]int
	steady     readvertResult
	res        results.ScenarioResult
}

func startCrossSubnet(ctx SpecContext, felix, bgp string, owner judge.Owner) *crossSubnet {
	GinkgoHelper()
	t, err := topo.Builtin("ipip")
	Expect(err).NotTo(HaveOccurred())
	Expect(t.Pools).To(HaveLen(1))
	t.Pools[0].IPIPMode = topo.IPIPCrossSubnet
	c := scenariotest.StartClusterOn(ctx, t, harness.Options{Release: config.R333, RouteRefreshInterval: time.Second,
		Felix: datastore.FelixConfiguration{ProgramClusterRoutes: felix}, BGP: datastore.BGPConfiguration{ProgramClusterRoutes: bgp},
		Timers: confd.Timers{ScanTime: 1}})
	cl, err := c.Datastore().Read(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(cl.Pools).To(ConsistOf(HaveField("IPIPMode", datastore.EncapCrossSubnet)), "guard: the datastore's pool is CrossSubnet")
	return &crossSubnet{c: c, felix: felix, bgp: bgp, owner: owner}
}

// expectShapedRoutes is step 1.
func (cs *crossSubnet) expectShapedRoutes(ctx SpecContext) {
	GinkgoHelper()
	cs.shapes = map[string]int{}
	type held struct {
		n *harness.Node
		m *judge.ClusterRouteMatcher
	}
	var routes []held
	for _, n := range cs.c.Nodes() {
		subnet := n.NS.Address.Masked()
		sameSeen, crossSeen := false, false
		for _, b := range cs.c.RemoteBlocks(n.Name) {
			gw := nodeAddrOf(cs.c, b)
			m := judge.HaveClusterRoute(b).ProgrammedBy(cs.owner).WithProgrammerProtocol(designProgrammerProtocol).Gateway(gw)
			shape := "same subnet, eth0"
			if subnet.Contains(gw) {
				m, sameSeen = m.Via("eth0"), true
			} else {
				m, crossSeen, shape = m.Via(topo.TunnelDevice).Onlink(), true, "other subnet, tunl0 onlink"
			}
			Eventually(n).WithPolling(100*time.Millisecond).Should(m.Only(),
				"%s's route to %s (%s) should be %s's alone", n.Name, b, shape, cs.owner)
			Expect(exportedToKernel(ctx, n, b)).To(Equal(cs.owner == judge.ByBIRD),
				"%s's BIRD exports %s to its kernel exactly when BIRD owns IPIP (%v)", n.Name, b, cs.owner == judge.ByBIRD)
			cs.shapes[shape]++
			routes = append(routes, held{n, m})
			fmt.Fprintf(&cs.table, "%s -> %s: %s, %s's\n", n.Name, b, shape, cs.owner)
		}
		Expect(sameSeen && crossSeen).To(BeTrue(), "guard: %s has a same-subnet and a cross-subnet destination", n.Name)
	}
	// It holds across resyncs: neither side takes a shape later.
	waitFullResyncs(cs.c.Node("node-1"), 2)
	for _, h := range routes {
		Expect(h.n).To(h.m, "after two resyncs %s's route is still %s's alone, of the same shape", h.n.Name, cs.owner)
	}
}

// expectSteadyExports is step 2, and registers the steady state's figures.
func (cs *crossSubnet) expectSteadyExports(ctx SpecContext) {
	GinkgoHelper()
	// 2. Export, steady state: own blocks to every iBGP peer, no
	// one else's.
	//
	// Guard (not vacuous): every node's best route to every other
	// node's block is a BGP route before the steady state is read.
	// With BIRD owning IPIP it is the owner's own advertisement.
	// With the programmer owning it, it need not be: a node in the
	// owner's subnet routes to the owner's block out of eth0, past
	// the tunl0 arm, so its BIRD exports that kernel route to its
	// iBGP peers (the same-subnet half of the pool has §5's gap),
	// and from 3.32 the export carries bgp_local_pref 2147483647
	// (krt_metric 0, the programmer's; confd buildExportFilter,
	// P32/P33 @ de60d98e97a7 / 6609dea54713, docs/conformance.md
	// row 18), which the receiver's import gives preference 200,
	// above the owner's own route (100): measured, node-1's best
	// route to node-3's block was node-4's. Reported as
	// bestRouteIsPeersReadvertisementSteady, not asserted.
	Expect(cs.c.WaitConverged(ctx)).To(Succeed(), "guard: every BGP session Established")
	readvertGuardSettled(ctx, cs.c, cs.owner == judge.ByBIRD)
	var preferred []string
	if cs.owner == judge.ByProgrammer {
		preferred = readvertBestNotOwners(ctx, cs.c)
	}
	// With BIRD owning IPIP no node exports another's block. With
	// the programmer owning it the tunl0 arm must keep every
	// cross-subnet (tunl0) route out; a same-subnet eth0 route goes
	// out (ADD-PATH, `add paths on`, exports it beside the owner's
	// own route) — measured, counted, not the arm failing.
	cs.steady = readvertMatrix(ctx, cs.c, cs.c.Nodes(), cs.owner == judge.ByBIRD)
	var sameSteady int
	for _, r := range cs.steady.readvertised {
		ex, ow := cs.c.Node(r.node), cs.c.Node(r.owner)
		Expect(r.source == readvertKernelProto && strings.Contains(r.via, "dev eth0") &&
			ex.NS.Address.Masked().Contains(ow.NS.Address.Addr())).To(BeTrue(),
			"steady state: %s exports %s's block %s to %s (from %s, via %s); only a same-subnet eth0 kernel route may pass the tunl0 arm", r.node, r.owner, r.block, r.peer, r.source, r.via)
		sameSteady++
	}

	cs.res = cs.c.Result(fmt.Sprintf("CrossSubnet counted as IPIP (Felix=%s, BGP=%s)", rawName(cs.felix), rawName(cs.bgp)), nil)
	cs.res.Figure("sameSubnetRoutes", float64(cs.shapes["same subnet, eth0"]), results.KindSize)
	cs.res.Figure("crossSubnetRoutes", float64(cs.shapes["other subnet, tunl0 onlink"]), results.KindSize)
	cs.res.Figure("iBGPExportsChecked", float64(cs.steady.checked), results.KindSize)
	cs.res.Figure("bestRouteIsPeersReadvertisementSteady", float64(len(preferred)), results.KindCount)
	cs.res.Figure("sameSubnetReadvertisementsSteady", float64(sameSteady), results.KindCount)
	cs.res.Notes = append(cs.res.Notes, preferred...)
}

// expectWithdrawalExports is step 3. With the programmer owning IPIP, node-2's advertisement
// withdrawn (its BIRD stops with a Cease). (a) node-1, in
// node-2's subnet, routes to node-2's block out of eth0, which
// the tunl0 arm does not match: BIRD's best route to the block
// is now that kernel route, and node-1 exports it to its iBGP
// peers — the interface-name proxy of §5 at work, for an IPIP
// pool. (b) With node-1's BIRD stopped as well, nobody in lan-a
// advertises the block: node-3's and node-4's best route to it
// is the programmer's via tunl0, and the tunl0 arm keeps it out
// of their exports.
func (cs *crossSubnet) expectWithdrawalExports(ctx SpecContext) {
	GinkgoHelper()
	const gone, same = "node-2", "node-1"
	remaining := readvertWithout(cs.c, gone)
	scenariotest.Act(cs.c.KillBIRD(ctx, gone, syscall.SIGTERM))
	withdrawn := readvertWithdrawnBlocks(cs.c, gone)
	var sameSubnet []readvertisement
	Eventually(func() (int, error) {
		after, err := readvertCount(ctx, cs.c, remaining)
		sameSubnet = sameSubnet[:0]
		for _, r := range after.readvertised {
			if r.node == same && r.owner == gone {
				sameSubnet = append(sameSubnet, r)
			}
		}
		return len(sameSubnet), err
	}).WithPolling(200*time.Millisecond).Should(BeNumerically(">", 0),
		"%s routes to %s's block out of eth0, past the tunl0 arm: once %s withdrew it, %s's BIRD should export its kernel route to its iBGP peers", same, gone, gone, same)
	for _, r := range sameSubnet {
		Expect(r.source).To(Equal(readvertKernelProto), "%s exports %s from %s; the eth0 route learned from the kernel is what passes the arm", same, r.block, r.source)
		fmt.Fprintf(&cs.table, "after %s withdrew: %s exports %s (via %s, from %s) to %s — its same-subnet eth0 route, past the tunl0 arm\n", gone, same, r.block, r.via, r.source, r.peer)
	}
	cs.res.Figure("sameSubnetReadvertisementsAfterWithdrawal", float64(len(sameSubnet)), results.KindCount)

	scenariotest.Act(cs.c.KillBIRD(ctx, same, syscall.SIGTERM))
	others := []*harness.Node{cs.c.Node("node-3"), cs.c.Node("node-4")}
	for _, n := range others {
		for _, b := range withdrawn {
			Eventually(func() []bird.Route { return readvertBIRDRoutes(ctx, n, b) }).WithPolling(100*time.Millisecond).
				Should(ContainElement(SatisfyAll(
					HaveField("Protocol", readvertKernelProto), HaveField("Primary", true),
					HaveField("Nexthops", ContainElement(HaveField("Iface", topo.TunnelDevice))))),
					"guard: with %s and %s stopped, %s's best route to %s is the programmer's tunl0 route, so the tunl0 arm is what keeps it out of the exports", gone, same, n.Name, b)
			for _, p := range readvertLivePeers(cs.c, others, n) {
				Consistently(n).WithTimeout(scenariotest.Machine.Wait(3*time.Second)).WithPolling(200*time.Millisecond).
					ShouldNot(judge.BeExportedTo(b, p.Address), "%s exports %s's block %s (its tunl0 route) to %s: the tunl0 arm should reject it", n.Name, gone, b, p.Address)
			}
			fmt.Fprintf(&cs.table, "with %s and %s stopped: %s does not export %s (its tunl0 route)\n", gone, same, n.Name, b)
		}
	}
	cs.res.Notes = append(cs.res.Notes, fmt.Sprintf("after %s's BIRD stopped (Cease): %s re-advertised its same-subnet eth0 route to %s's block to %d iBGP peers; design §5 records this interface-name gap for no-encap only", gone, same, gone, len(sameSubnet)))
}
