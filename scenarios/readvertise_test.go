package scenarios_test

// Claim (design §2, "confd + BIRD", and §5, the first known gap): BIRD's
// kernel protocol runs with `learn`, so the cluster routes the route
// programmer writes enter BIRD's table as alien kernel routes, and a
// kernel-learned route is not covered by the iBGP rule that stops a node
// passing on what it heard from another iBGP peer. The export filter
// calico_export_to_bgp_peers therefore rejects, towards iBGP peers, routes
// that leave through a tunnel device — tunl0 exactly when the programmer owns
// the IPIP cluster routes — so:
//
//   - with the programmer owning IPIP, no node exports another node's block
//     to its iBGP peers (each still exports its own);
//   - with the programmer owning no-encap, whose routes leave through an
//     ordinary NIC, nothing catches them: a node can advertise other nodes'
//     blocks to its iBGP peers (the known gap, measured here);
//   - towards eBGP peers the reject is not applied, by decision: a node goes
//     on advertising other nodes' blocks to its external peers (here the
//     ToRs of the dual-ToR topology).
//
// When does the programmer's route actually reach an export? BIRD prefers a
// BGP route (preference 100) to a kernel-learned one (10), so while the
// block's owner advertises its block every other node's best route to it is
// the owner's, which iBGP does not pass on. The kernel-learned route becomes
// the best — and the reject becomes load-bearing — when the owner's own
// advertisement is gone while the programmers keep their routes: the owner's
// BIRD stopped (SIGTERM sends a Cease, so peers drop its routes at once) or
// its session is down. Every spec here therefore checks both the steady
// state and the state after the owner of one block withdraws it, and guards
// the second state by showing the programmer's route is in BIRD's table and
// the owner's advertisement is not.

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
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

// The kernel protocol names of the rendered node config, and the
// programmer's route protocol as BIRD shows it (Kernel.source).
const (
	readvertKernelProto     = "kernel4"
	readvertProgrammerProto = "80"
)

var _ = Describe("iBGP re-advertisement with the programmer owning IPIP", Label("ipip", "readvertise"), func() {
	It("no node exports another node's block to an iBGP peer, even once the block's owner has withdrawn it", func(ctx SpecContext) {
		// 1. 3.33 defaults: the programmer owns the IPIP cluster routes.
		c := scenariotest.StartCluster(ctx, "ipip", harness.Options{})
		readvertGuardOwnership(c, judge.ByProgrammer, topo.TunnelDevice)

		// 2. Steady state: every session Established, each node exports
		// its own block to every peer (so birdc answers and the filter
		// lets blocks through) and nobody else's.
		Expect(c.WaitConverged(ctx)).To(Succeed(), "guard: every BGP session Established")
		readvertGuardSettled(ctx, c, true)
		steady := readvertMatrix(ctx, c, c.Nodes(), true)
		for _, r := range steady.readvertised {
			Fail(fmt.Sprintf("steady state: %s exports %s's block %s to its iBGP peer %s (route from %s); with the programmer owning IPIP no node may",
				r.node, r.owner, r.block, r.peer, r.source))
		}
		// Guard: the tunnel under these routes encapsulates. Routes and
		// exports alone pass on one that does not (issue 28): its bare
		// packets still reach the node beside on lan-a.
		encap := expectIPIPEncapsulated(ctx, c, nil, "steady state, every node pair")

		// 3. The owner of node-4's block withdraws it: its BIRD stops
		// with a Cease, its peers drop its routes, and every other node
		// is left with the programmer's tunl0 route as its best route to
		// that block.
		owner := "node-4"
		remaining := readvertWithout(c, owner)
		scenariotest.Act(c.KillBIRD(ctx, owner, syscall.SIGTERM))
		withdrawn := readvertWithdrawnBlocks(c, owner)
		readvertGuardWithdrawn(ctx, c, owner, remaining, withdrawn)
		for _, n := range remaining {
			for _, b := range withdrawn {
				routes := readvertBIRDRoutes(ctx, n, b)
				Expect(routes).To(ContainElement(SatisfyAll(
					HaveField("Protocol", readvertKernelProto), HaveField("Primary", true),
					HaveField("Nexthops", ContainElement(HaveField("Iface", topo.TunnelDevice))))),
					"guard: %s's best route to %s should be the programmer's tunl0 route learned from the kernel, so the tunl0 reject is what keeps it from being exported; BIRD holds %v", n.Name, b, routes)
			}
		}

		// 4. The claim: still nobody exports another node's block.
		after := readvertMatrix(ctx, c, remaining, true)
		for _, r := range after.readvertised {
			Fail(fmt.Sprintf("after %s withdrew its block: %s exports %s's block %s to its iBGP peer %s (route from %s, via %s); the tunl0 arm of the iBGP reject should stop it",
				owner, r.node, r.owner, r.block, r.peer, r.source, r.via))
		}

		res := c.Result("re-advertisement, programmer owns IPIP", nil)
		res.Figure("iBGPExportsChecked", float64(steady.checked+after.checked), results.KindSize)
		res.Figure("readvertisementsSteady", float64(len(steady.readvertised)), results.KindCount)
		res.Figure("readvertisementsAfterWithdrawal", float64(len(after.readvertised)), results.KindCount)
		encapFigures(&res, encap)
		res.Notes = append(res.Notes, fmt.Sprintf("%s's block withdrawn by stopping its BIRD with SIGTERM; the programmer's tunl0 routes to it stayed the best in every other BIRD and were not exported", owner))
		scenariotest.Record("re-advertisement to iBGP peers, programmer owns IPIP (exports of other nodes' blocks)",
			readvertTable(steady, after), res)
	})
})

var _ = Describe("iBGP re-advertisement with the programmer owning no-encap (known gap, design §5)", Label("noencap", "readvertise", "knowngap"), func() {
	It("a node exports another node's block to its iBGP peers once the block's owner has withdrawn it", func(ctx SpecContext) {
		// 1. The programmer owns no-encap (the pair in which it owns
		// everything).
		c := scenariotest.StartCluster(ctx, "noencap", harness.Options{
			Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Enabled)},
			BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(config.Disabled)},
		})
		readvertGuardOwnership(c, judge.ByProgrammer, "")

		// 2. Steady state: sessions Established; each node exports its
		// own block to every peer. Other nodes' blocks are counted, not
		// asserted.
		//
		// Guard (not vacuous): every node's best route to every other
		// node's block is a route learned over BGP, not the programmer's
		// kernel route, so BGP has settled before the steady state is
		// read. It need not be the owner's own advertisement: from 3.32
		// every export carries the route's priority in bgp_local_pref
		// (2147483647 − krt_metric; confd buildExportFilter, P32/P33 @
		// de60d98e97a7 / 6609dea54713, docs/conformance.md row 18), and a
		// kernel-learned route has the programmer's kernel metric, 0, so a
		// node that exports its proto 80 route (before it learned the
		// owner's, say) sends local_pref 2147483647, above the owner's
		// 2147482623 (metric 1024 unset → normal priority); the importer
		// gives it preference 200 (buildImportFilter, same commits) and
		// prefers it to the owner's own route (preference 100). That is
		// the §5 gap reached in the steady state, not only after a
		// withdrawal: it is reported as a figure (bestRouteIsPeersReadvertisementSteady),
		// not asserted, because which node re-advertises first depends on
		// start order. (3.31, whose exports carry no priority, had none of it.)
		Expect(c.WaitConverged(ctx)).To(Succeed(), "guard: every BGP session Established")
		readvertGuardSettled(ctx, c, false)
		preferred := readvertBestNotOwners(ctx, c)
		steady := readvertMatrix(ctx, c, c.Nodes(), false)

		// 3. node-3 withdraws its block (its BIRD stops with a Cease)
		// while every programmer keeps its route to it.
		owner := "node-3"
		remaining := readvertWithout(c, owner)
		scenariotest.Act(c.KillBIRD(ctx, owner, syscall.SIGTERM))
		withdrawn := readvertWithdrawnBlocks(c, owner)
		readvertGuardWithdrawn(ctx, c, owner, remaining, withdrawn)

		// 4. The gap: some node now exports node-3's block to an iBGP
		// peer, from the programmer's kernel route.
		after := readvertMatrix(ctx, c, remaining, false)
		Eventually(func() ([]readvertisement, error) {
			var err error
			after, err = readvertCount(ctx, c, remaining)
			return after.readvertised, err
		}).WithPolling(100*time.Millisecond).ShouldNot(BeEmpty(),
			"known gap closed: with the programmer owning no-encap, no node exported another node's block to an iBGP peer after %s withdrew it. "+
				"Update the design's §5 (\"Felix-programmed no-encap cluster routes and BGP re-advertisement\") and turn this spec into a claim", owner)
		for _, r := range after.readvertised {
			Expect(r.source).To(Equal(readvertKernelProto), "%s exports %s to %s from %s; the gap is about the programmer's kernel route", r.node, r.block, r.peer, r.source)
		}
		// The peer took it: its BIRD holds the block from the node that
		// re-advertised it.
		learned := readvertLearned(ctx, c, after.readvertised)

		res := c.Result("re-advertisement known gap, programmer owns no-encap", nil)
		res.Figure("iBGPExportsChecked", float64(steady.checked+after.checked), results.KindSize)
		res.Figure("readvertisementsSteady", float64(len(steady.readvertised)), results.KindCount)
		res.Figure("readvertisementsAfterWithdrawal", float64(len(after.readvertised)), results.KindCount)
		res.Figure("bestRouteIsPeersReadvertisementSteady", float64(len(preferred)), results.KindCount)
		res.Notes = append(res.Notes, preferred...)
		res.Notes = append(res.Notes,
			"known gap (design §5): the programmer's no-encap routes leave through eth0, which the iBGP reject does not match",
			"from 3.32 a re-advertised kernel route carries bgp_local_pref 2147483647 (the programmer's metric 0) and wins over the owner's own advertisement (2147482623) at the receiving peer",
			fmt.Sprintf("steady state: %d re-advertisements (the owner's own BGP route is preferred to the kernel-learned one); after %s's BIRD stopped: %d", len(steady.readvertised), owner, len(after.readvertised)))
		res.Notes = append(res.Notes, learned...)
		scenariotest.Record(fmt.Sprintf("re-advertisement to iBGP peers, programmer owns no-encap (known gap): %d (node, block, peer) after %s withdrew its block; in the steady state %d best routes were a peer's re-advertisement, not the owner's own",
			len(after.readvertised), owner, len(preferred)),
			readvertTable(steady, after)+strings.Join(learned, "\n")+"\n", res)
	})
})

var _ = Describe("eBGP re-advertisement with the programmer owning no-encap", Label("dualtor", "readvertise"), func() {
	It("nodes go on exporting other nodes' blocks to their ToRs (eBGP peers are out of the reject by decision)", func(ctx SpecContext) {
		// 1. Dual ToR, the programmer owning no-encap. Every session is
		// eBGP (each node its own AS), so internal_peer is never true and
		// the iBGP reject never applies.
		c := scenariotest.StartCluster(ctx, "dualtor", harness.Options{
			Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Enabled)},
			BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(config.Disabled)},
		})
		readvertGuardOwnership(c, judge.ByProgrammer, "")
		Expect(c.WaitConverged(ctx)).To(Succeed(), "guard: every BGP session Established")
		for _, n := range c.Nodes() {
			for _, p := range n.Peers() {
				Expect(p.Internal).To(BeFalse(), "dualtor: %s's session %s should be eBGP", n.Name, p.Protocol)
			}
		}

		// Guard (not vacuous): BGP has settled before the steady state is
		// read — every node's best route to every other node's block is a
		// BGP route, or else both its ToRs hold that block with this
		// node's own export as their best, so they send it nothing back.
		// The second arm is Calico's real behaviour here, not a transient:
		// a BGPPeer session is `multihop` (docs/conformance.md row 12; T31
		// peers, P32/P33 buildPeer @ 3cdeae8f7ace / de60d98e97a7 /
		// 6609dea54713), so BIRD sends the programmer's kernel route with
		// next hop self, and the ToR accepts it (over a direct session the
		// next hop stayed the ToR's own address, which the ToR refused).
		// Every node exports every block from its proto 80 route at AS-path
		// length 1, as the owner does; the ToR (best path only) breaks the
		// tie on router id and then neither re-sends the block to that node
		// nor would the node accept its own AS back. Counted as
		// ownKernelRouteBestSteady, with the ToRs' choice behind each.
		ownBest := readvertGuardSettledEBGP(ctx, c)

		// 2. Steady state: each node exports its own block to both ToRs.
		// Other nodes' blocks go out too: eBGP transit of what the ToRs
		// sent and, by the decision, the programmer's route (already now,
		// see the guard); both are counted.
		steady := readvertMatrix(ctx, c, c.Nodes(), false)
		steadyKernel := readvertFrom(steady.readvertised, readvertKernelProto)

		// 3. node-3 withdraws its block; the programmers keep their routes.
		owner := "node-3"
		remaining := readvertWithout(c, owner)
		scenariotest.Act(c.KillBIRD(ctx, owner, syscall.SIGTERM))
		withdrawn := readvertWithdrawnBlocks(c, owner)
		for _, n := range remaining {
			Expect(n.BIRD.WaitEstablished(ctx)).To(Succeed(), "guard: %s's ToR sessions stay Established", n.Name)
			for _, b := range withdrawn {
				Expect(n).To(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer), "guard: the programmer keeps its route to %s", b)
			}
		}

		// 4. By decision, some node now exports the programmer's route to
		// node-3's block to its ToRs.
		after := readvertMatrix(ctx, c, remaining, false)
		var fromKernel []readvertisement
		Eventually(func() ([]readvertisement, error) {
			var err error
			after, err = readvertCount(ctx, c, remaining)
			fromKernel = nil
			for _, r := range readvertFrom(after.readvertised, readvertKernelProto) {
				if r.owner == owner {
					fromKernel = append(fromKernel, r)
				}
			}
			return fromKernel, err
		}).WithPolling(100*time.Millisecond).ShouldNot(BeEmpty(),
			"after %s withdrew its block, expected some node to export the programmer's route to it to its ToRs (eBGP peers are outside the iBGP reject by decision); exports seen: %v", owner, after.readvertised)

		res := c.Result("re-advertisement to eBGP peers, programmer owns no-encap (dualtor)", nil)
		res.Figure("eBGPExportsChecked", float64(steady.checked+after.checked), results.KindSize)
		res.Figure("otherBlocksExportedSteady", float64(len(steady.readvertised)), results.KindSize)
		res.Figure("programmerRoutesExportedSteady", float64(len(steadyKernel)), results.KindSize)
		res.Figure("programmerRoutesExportedAfterWithdrawal", float64(len(fromKernel)), results.KindSize)
		res.Figure("ownKernelRouteBestSteady", float64(len(ownBest)), results.KindSize)
		res.Notes = append(res.Notes,
			fmt.Sprintf("steady state: %d (node, block, ToR) exports came from the programmer's route, %d from BGP transit; Calico's multihop BGPPeer sessions send the kernel route with next hop self and the ToRs take it", len(steadyKernel), len(steady.readvertised)-len(steadyKernel)),
			fmt.Sprintf("after %s's advertisement was gone: %d (node, block, ToR) exports of its block from the programmer's route", owner, len(fromKernel)))
		res.Notes = append(res.Notes, ownBest...)
		scenariotest.Record(fmt.Sprintf("re-advertisement to eBGP peers (ToRs), programmer owns no-encap: %d (node, block, ToR) from the programmer's route after %s withdrew its block", len(fromKernel), owner),
			readvertTable(steady, after), res)
	})
})

var _ = Describe("Candidate fix for re-advertisement: a kernel import filter on protocol and next hop", Label("noencap", "readvertise"), func() {
	It("keeps other nodes' blocks out of iBGP exports while local workload routes stay learned", func(ctx SpecContext) {
		// 1. The known-gap setup (the programmer owns no-encap), with the
		// candidate filter rendered into every node's kernel import:
		// the programmer's routes with a next hop never enter BIRD.
		c := scenariotest.StartCluster(ctx, "noencap", harness.Options{
			Felix:              datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Enabled)},
			BGP:                datastore.BGPConfiguration{ProgramClusterRoutes: string(config.Disabled)},
			KernelImportFilter: true,
		})
		readvertGuardOwnership(c, judge.ByProgrammer, "")
		Expect(c.WaitConverged(ctx)).To(Succeed(), "guard: every BGP session Established")
		readvertGuardSettled(ctx, c, true)

		// 2. What the filter must keep: each node's BIRD still learns its
		// local workload routes (no next hop), which calico_aggr reads.
		for _, nd := range c.Net.Nodes {
			n := c.Node(nd.Name)
			for _, wl := range nd.Workloads {
				host := netip.PrefixFrom(wl.IPv4, 32)
				Eventually(func() []bird.Route { return readvertBIRDRoutes(ctx, n, host) }).
					WithPolling(100*time.Millisecond).
					Should(ContainElement(HaveField("Protocol", readvertKernelProto)),
						"%s's BIRD should still learn its local workload route %s from the kernel", n.Name, host)
			}
		}

		// 3. The withdrawal that exposes the gap without the filter.
		owner := "node-3"
		remaining := readvertWithout(c, owner)
		scenariotest.Act(c.KillBIRD(ctx, owner, syscall.SIGTERM))
		withdrawn := readvertWithdrawnBlocks(c, owner)
		for _, n := range remaining {
			for _, b := range withdrawn {
				Expect(n).To(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer), "guard: the programmer keeps its route to %s", b)
				// The owner's advertisement is gone and, with the
				// filter, nothing took its place in BIRD's table.
				Eventually(func() []bird.Route { return readvertBIRDRoutes(ctx, n, b) }).
					WithPolling(100*time.Millisecond).Should(BeEmpty(),
					"%s's BIRD should hold no route to %s once its owner withdrew it and the filter keeps the programmer's out", n.Name, b)
			}
		}

		// 4. The verdict: no node exports another node's block, over a
		// window of several BIRD kernel scans (2 s each).
		var after readvertResult
		Consistently(func() ([]readvertisement, error) {
			var err error
			after, err = readvertCount(ctx, c, remaining)
			return after.readvertised, err
		}).WithTimeout(time.Duration(3*confd.DefaultTimers.ScanTime)*time.Second).WithPolling(200*time.Millisecond).Should(BeEmpty(),
			"with the candidate import filter a node still re-advertised another node's block")

		res := c.Result("re-advertisement candidate fix (kernel import filter), programmer owns no-encap", nil)
		res.Figure("readvertisementsAfterWithdrawal", float64(len(after.readvertised)), results.KindCount)
		res.Notes = append(res.Notes, "candidate fix evaluated: `if (krt_source = <deviceRouteProtocol> && gw != ::) then reject;` in the kernel import filter closes the no-encap gap here, and local workload routes are still learned")
		scenariotest.Record("re-advertisement with the candidate kernel import filter (programmer owns no-encap)", readvertTable(readvertResult{}, after), res)
	})
})

// readvertisement is one export of another node's block to a peer.
type readvertisement struct {
	node, peer string       // exporting node, peer (node name or address)
	owner      string       // the node the block belongs to
	block      netip.Prefix // the block
	source     string       // BIRD protocol the exported route came from
	via        string       // its next hops in the exporter's table
}

type readvertResult struct {
	checked      int // (node, block, peer) triples looked at
	readvertised []readvertisement
}

// readvertMatrix checks, for every node and every one of its BGP peers
// that is still up, the positive control (the node exports its own blocks
// to the peer, which also proves birdc answers) and returns every export of
// another node's block. With negate, each other node's block is also
// asserted not exported, with judge.BeExportedTo.
func readvertMatrix(ctx context.Context, c *harness.Cluster, nodes []*harness.Node, negate bool) readvertResult {
	GinkgoHelper()
	for _, n := range nodes {
		for _, p := range readvertLivePeers(c, nodes, n) {
			for _, b := range readvertOwnBlocks(c, n.Name) {
				Eventually(n).WithPolling(100*time.Millisecond).
					Should(judge.BeExportedTo(b, p.Address), "positive control: %s exports its own block %s to %s", n.Name, b, p.Address)
			}
			if !negate {
				continue
			}
			for _, b := range c.RemoteBlocks(n.Name) {
				Expect(n).NotTo(judge.BeExportedTo(b, p.Address), "%s must not export another node's block to its peer %s", n.Name, p.Address)
			}
		}
	}
	res, err := readvertCount(ctx, c, nodes)
	Expect(err).NotTo(HaveOccurred())
	return res
}

// readvertCount reads what each node's BIRD exports to each of its live
// peers and returns every export of another node's block. An answer
// without the node's own blocks is an error: the positive control failed.
func readvertCount(ctx context.Context, c *harness.Cluster, nodes []*harness.Node) (readvertResult, error) {
	var res readvertResult
	for _, n := range nodes {
		for _, p := range readvertLivePeers(c, nodes, n) {
			exported, err := readvertExports(ctx, n, p)
			if err != nil {
				return res, fmt.Errorf("read %s's exports to %s: %w", n.Name, p.Address, err)
			}
			for _, b := range readvertOwnBlocks(c, n.Name) {
				if _, ok := exported[b]; !ok {
					return res, fmt.Errorf("positive control: %s does not export its own block %s to %s", n.Name, b, p.Address)
				}
			}
			for _, other := range c.Net.Nodes {
				if other.Name == n.Name {
					continue
				}
				for _, blk := range other.Blocks {
					res.checked++
					if r, ok := exported[blk.CIDR]; ok {
						res.readvertised = append(res.readvertised, readvertisement{
							node: n.Name, peer: readvertPeerName(c, p.Address), owner: other.Name, block: blk.CIDR,
							source: r.Protocol, via: readvertVia(r),
						})
					}
				}
			}
		}
	}
	return res, nil
}

// readvertLivePeers lists n's sessions that should be up: to the nodes
// given, and to any router.
func readvertLivePeers(c *harness.Cluster, nodes []*harness.Node, n *harness.Node) []confd.Peer {
	up := map[netip.Addr]bool{}
	for _, o := range nodes {
		up[o.NS.Address.Addr()] = true
	}
	isNode := map[netip.Addr]bool{}
	for _, o := range c.Net.Nodes {
		isNode[o.Address.Addr()] = true
	}
	var out []confd.Peer
	for _, p := range n.Peers() {
		if !isNode[p.Address] || up[p.Address] {
			out = append(out, p)
		}
	}
	return out
}

// readvertExports reads what n's BIRD exports to peer p, by prefix.
func readvertExports(ctx context.Context, n *harness.Node, p confd.Peer) (map[netip.Prefix]bird.Route, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rs, err := n.BIRD.Client().Routes(cctx, "export "+p.Protocol)
	if err != nil {
		return nil, err
	}
	out := map[netip.Prefix]bird.Route{}
	for _, r := range rs {
		out[r.Prefix] = r
	}
	return out, nil
}

// readvertBIRDRoutes reads every route n's BIRD holds for exactly prefix.
func readvertBIRDRoutes(ctx context.Context, n *harness.Node, prefix netip.Prefix) []bird.Route {
	GinkgoHelper()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rs, err := n.BIRD.Client().Routes(cctx, prefix.String())
	Expect(err).NotTo(HaveOccurred(), "birdc show route %s on %s", prefix, n.Name)
	return rs
}

// readvertGuardOwnership waits until every node has its remote blocks
// programmed by owner (via device, when given).
func readvertGuardOwnership(c *harness.Cluster, owner judge.Owner, device string) {
	GinkgoHelper()
	for _, n := range c.Nodes() {
		for _, b := range c.RemoteBlocks(n.Name) {
			m := judge.HaveClusterRoute(b).ProgrammedBy(owner)
			if device != "" {
				m = m.Via(device)
			}
			Eventually(n).WithPolling(50*time.Millisecond).Should(m, "guard: %s owns the cluster routes", owner)
		}
	}
}

// readvertGuardSettled waits until every node's BIRD has a BGP route as its
// best route to every remote block — with mesh, the owner's own
// advertisement. Until then a node may briefly export the programmer's
// kernel route (a session came up before the owner's advertisement
// arrived), which is not the steady state.
func readvertGuardSettled(ctx context.Context, c *harness.Cluster, mesh bool) {
	GinkgoHelper()
	for _, n := range c.Nodes() {
		for _, other := range c.Net.Nodes {
			if other.Name == n.Name {
				continue
			}
			want := Not(Equal(readvertKernelProto))
			what := "a BGP route"
			if mesh {
				for _, p := range n.Peers() {
					if p.Address == other.Address.Addr() {
						want, what = Equal(p.Protocol), other.Name+"'s own advertisement ("+p.Protocol+")"
					}
				}
			}
			for _, b := range other.Blocks {
				Eventually(func() []bird.Route { return readvertBIRDRoutes(ctx, n, b.CIDR) }).
					WithPolling(100*time.Millisecond).
					Should(ContainElement(SatisfyAll(HaveField("Primary", true), HaveField("Protocol", want))),
						"guard: %s's best route to %s should be %s before the steady state is read", n.Name, b.CIDR, what)
			}
		}
	}
}

// readvertGuardSettledEBGP waits until, for every node and every other
// node's block, the node's best BIRD route is a BGP route or every router
// it peers with holds the block with the node's own export as its best (so
// the router sends the block nothing back). It returns the latter cases, as
// notes.
func readvertGuardSettledEBGP(ctx context.Context, c *harness.Cluster) []string {
	GinkgoHelper()
	var out []string
	for _, n := range c.Nodes() {
		var tors []*harness.Router
		for _, p := range n.Peers() {
			for _, r := range c.Fabric().Routers() {
				if readvertPeerName(c, p.Address) == r.Name {
					tors = append(tors, r)
				}
			}
		}
		fromN := "Peer_" + strings.ReplaceAll(n.Name, "-", "_")
		for _, other := range c.Net.Nodes {
			if other.Name == n.Name {
				continue
			}
			for _, b := range other.Blocks {
				var why string
				Eventually(func() error {
					for _, r := range readvertBIRDRoutes(ctx, n, b.CIDR) {
						if r.Primary && r.Protocol != readvertKernelProto {
							why = ""
							return nil
						}
					}
					if len(tors) == 0 {
						return fmt.Errorf("%s has no BGP best route to %s and no router peer", n.Name, b.CIDR)
					}
					var chosen []string
					for _, t := range tors {
						cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
						rs, err := t.BIRD.Client().Routes(cctx, b.CIDR.String())
						cancel()
						if err != nil {
							return err
						}
						best := ""
						for _, r := range rs {
							if r.Primary {
								best = r.Protocol
							}
						}
						if best != fromN {
							return fmt.Errorf("%s has no BGP best route to %s, and %s's best route to it is %q, not %s's export", n.Name, b.CIDR, t.Name, best, n.Name)
						}
						chosen = append(chosen, t.Name)
					}
					why = fmt.Sprintf("steady state: %s's only route to %s's block %s is the programmer's (kernel-learned); %s each prefer %s's own export of it (%s) and send it nothing back",
						n.Name, other.Name, b.CIDR, strings.Join(chosen, " and "), n.Name, fromN)
					return nil
				}).WithPolling(100*time.Millisecond).Should(Succeed(),
					"guard: %s's best route to %s should be a BGP route, or its ToRs' best should be its own export, before the steady state is read", n.Name, b.CIDR)
				if why != "" {
					out = append(out, why)
				}
			}
		}
	}
	return out
}

// readvertBestNotOwners lists, for every node and every other node's
// block, the best BIRD routes that are not the owner's own advertisement
// (a third node's re-advertisement of its kernel route).
func readvertBestNotOwners(ctx context.Context, c *harness.Cluster) []string {
	GinkgoHelper()
	var out []string
	for _, n := range c.Nodes() {
		for _, other := range c.Net.Nodes {
			if other.Name == n.Name {
				continue
			}
			var own string
			for _, p := range n.Peers() {
				if p.Address == other.Address.Addr() {
					own = p.Protocol
				}
			}
			for _, b := range other.Blocks {
				for _, r := range readvertBIRDRoutes(ctx, n, b.CIDR) {
					if r.Primary && r.Protocol != own {
						out = append(out, fmt.Sprintf("steady state: %s's best route to %s's block %s is %s (from %s, preference %d), not %s's own advertisement (%s)",
							n.Name, other.Name, b.CIDR, r.Protocol, r.From, r.Preference, other.Name, own))
					}
				}
			}
		}
	}
	return out
}

// readvertGuardWithdrawn waits until owner's advertisement of its blocks is
// gone from every remaining node's BIRD while the programmer's route to
// each is still there, in the kernel and in BIRD's table, and the remaining
// nodes' sessions among themselves are Established.
func readvertGuardWithdrawn(ctx context.Context, c *harness.Cluster, owner string, remaining []*harness.Node, blocks []netip.Prefix) {
	GinkgoHelper()
	ownerAddr := c.Node(owner).NS.Address.Addr()
	for _, n := range remaining {
		var live []string
		for _, p := range readvertLivePeers(c, remaining, n) {
			live = append(live, p.Protocol)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		Expect(n.BIRD.WaitEstablished(wctx, live...)).To(Succeed(), "guard: %s's sessions to the remaining nodes stay Established", n.Name)
		cancel()
		var fromOwner string
		for _, p := range n.Peers() {
			if p.Address == ownerAddr {
				fromOwner = p.Protocol
			}
		}
		for _, b := range blocks {
			Expect(n).To(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer), "guard: the programmer keeps its route to %s", b)
			Eventually(func() []bird.Route { return readvertBIRDRoutes(ctx, n, b) }).
				WithPolling(100*time.Millisecond).Should(SatisfyAll(
				ContainElement(SatisfyAll(HaveField("Protocol", readvertKernelProto), HaveField("Attrs", HaveKeyWithValue("Kernel.source", readvertProgrammerProto)))),
				Not(ContainElement(HaveField("Protocol", fromOwner))),
			), "guard: %s's BIRD should hold the programmer's route to %s and no longer %s's own advertisement (%s)", n.Name, b, owner, fromOwner)
		}
	}
}

// readvertLearned waits until at least one peer a node re-advertised a
// block to holds it from that node's session, and lists what the receivers
// hold. (Two nodes can start exporting the same block at once and then stop
// again, once each prefers the other's BGP route, so not every export seen
// need be held.)
func readvertLearned(ctx context.Context, c *harness.Cluster, rs []readvertisement) []string {
	GinkgoHelper()
	var out []string
	Eventually(func() []string {
		out = nil
		for _, r := range rs {
			recv := readvertNode(c, r.peer)
			if recv == nil {
				continue
			}
			for _, p := range recv.Peers() {
				if p.Address != c.Node(r.node).NS.Address.Addr() {
					continue
				}
				for _, br := range readvertBIRDRoutes(ctx, recv, r.block) {
					if br.Protocol == p.Protocol {
						out = append(out, fmt.Sprintf("%s learned %s from %s: BGP next hop %s, best route: %v", recv.Name, r.block, r.node, br.Attrs["BGP.next_hop"], br.Primary))
					}
				}
			}
		}
		sort.Strings(out)
		return out
	}).WithPolling(100*time.Millisecond).ShouldNot(BeEmpty(),
		"no peer holds a block re-advertised to it from the node that exported it (exports: %v)", rs)
	return out
}

// readvertFrom keeps the re-advertisements whose route came from protocol.
func readvertFrom(rs []readvertisement, protocol string) []readvertisement {
	var out []readvertisement
	for _, r := range rs {
		if r.source == protocol {
			out = append(out, r)
		}
	}
	return out
}

// readvertWithout lists the cluster's nodes other than name.
func readvertWithout(c *harness.Cluster, name string) []*harness.Node {
	var out []*harness.Node
	for _, n := range c.Nodes() {
		if n.Name != name {
			out = append(out, n)
		}
	}
	return out
}

func readvertOwnBlocks(c *harness.Cluster, node string) []netip.Prefix {
	var out []netip.Prefix
	for _, nd := range c.Net.Nodes {
		if nd.Name == node {
			for _, b := range nd.Blocks {
				out = append(out, b.CIDR)
			}
		}
	}
	return out
}

func readvertWithdrawnBlocks(c *harness.Cluster, owner string) []netip.Prefix {
	GinkgoHelper()
	bs := readvertOwnBlocks(c, owner)
	Expect(bs).NotTo(BeEmpty(), "%s should own a block", owner)
	return bs
}

// readvertPeerName names a peer address: the node's name, else the router
// whose interface has it, else the address.
func readvertPeerName(c *harness.Cluster, a netip.Addr) string {
	for _, nd := range c.Net.Nodes {
		if nd.Address.Addr() == a {
			return nd.Name
		}
	}
	for _, rt := range c.Net.Topology.Routers {
		for _, ifc := range rt.Interfaces {
			if p, err := netip.ParsePrefix(ifc.Address); err == nil && p.Addr() == a {
				return rt.Name
			}
		}
	}
	return a.String()
}

func readvertNode(c *harness.Cluster, name string) *harness.Node {
	for _, n := range c.Nodes() {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func readvertVia(r bird.Route) string {
	var s []string
	for _, nh := range r.Nexthops {
		if nh.Gateway.IsValid() {
			s = append(s, nh.Gateway.String()+" dev "+nh.Iface)
		} else {
			s = append(s, "dev "+nh.Iface)
		}
	}
	if len(s) == 0 {
		return r.Dest
	}
	return strings.Join(s, ", ")
}

// readvertTable lists every export of another node's block, before and
// after the withdrawal.
func readvertTable(steady, after readvertResult) string {
	t := results.NewTable("state", "exporter", "peer", "block (owner)", "route from", "via")
	for _, s := range []struct {
		name string
		r    readvertResult
	}{{"steady", steady}, {"after withdrawal", after}} {
		rs := append([]readvertisement(nil), s.r.readvertised...)
		sort.Slice(rs, func(i, j int) bool {
			return fmt.Sprint(rs[i].node, rs[i].peer, rs[i].block) < fmt.Sprint(rs[j].node, rs[j].peer, rs[j].block)
		})
		if len(rs) == 0 {
			t.Add(s.name, "-", "-", results.Cellf("none of %d checked", s.r.checked), "-", "-")
		}
		for _, r := range rs {
			t.Add(s.name, r.node, r.peer, results.Cellf("%s (%s)", r.block, r.owner), r.source, r.via)
		}
	}
	return t.String()
}
