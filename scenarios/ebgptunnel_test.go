package scenarios_test

// Claim (design §5, "External peers are out of scope by decision"): the
// tunnel-route reject in calico_export_to_bgp_peers applies to internal
// peers only, so a node goes on advertising to its eBGP peers the routes
// the reject keeps from its iBGP peers — among them, with the programmer
// owning IPIP, its tunl0 routes to other nodes' blocks. The existing eBGP
// spec (readvertise_test.go) uses no-encap routes, which no arm of the
// reject matches either way; this one uses the IPIP routes that the tunl0
// arm does reject.
//
// The ipip cluster on the 3.33 defaults, its router given an AS so that
// every node also has an eBGP session to it (the mesh kept on). node-4's
// BIRD stops with a Cease, so every other node's best route to node-4's
// block is the programmer's tunl0 route, learned from the kernel. Judged:
// no iBGP peer is sent it (the tunl0 arm holds), the router is (by
// decision), and the router's BIRD holds it. Guards: the tunl0 arm is in
// every node's config; the route exported is the kernel-learned tunl0 one
// (Kernel.source 80); every node still exports its own block to every live
// peer, iBGP and eBGP (positive control: the sessions carry routes and the
// filter reaches its accepts).

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

const ebgpRouterAS = 65100

var _ = Describe("eBGP peers receive the tunl0 routes the iBGP reject keeps back", Label("ipip", "readvertise", "claim8"), func() {
	It("exports the programmer's tunl0 route to another node's block to the eBGP router and to no iBGP peer", func(ctx SpecContext) {
		t, err := topo.Builtin("ipip")
		Expect(err).NotTo(HaveOccurred())
		t.Routers[0].ASNumber = ebgpRouterAS
		mesh := true
		c := scenariotest.StartClusterOn(ctx, t, harness.Options{BGP: datastore.BGPConfiguration{NodeToNodeMeshEnabled: &mesh}})
		router := c.Fabric().Router(t.Routers[0].Name)
		readvertGuardOwnership(c, judge.ByProgrammer, topo.TunnelDevice)
		Expect(c.WaitConverged(ctx)).To(Succeed(), "guard: every BGP session Established")
		for _, n := range c.Nodes() {
			var ibgp, ebgp int
			for _, p := range n.Peers() {
				if p.Internal {
					ibgp++
				} else {
					ebgp++
				}
			}
			Expect([]int{ibgp, ebgp}).To(Equal([]int{3, 1}), "guard: %s has 3 iBGP mesh sessions and one eBGP session to the router; its peers: %v", n.Name, n.Peers())
			conf, err := birdConfig(n)
			Expect(err).NotTo(HaveOccurred())
			Expect(conf).To(ContainSubstring(`if ( ifname ~ "tunl0" ) then reject;`), "guard: %s's export filter has the tunl0 arm", n.Name)
		}
		readvertGuardSettled(ctx, c, true)
		// Guard: the tunnel under these routes encapsulates (routes and
		// exports alone pass on one that does not; here the router even
		// learns the blocks, so bare packets would cross it too).
		encap := expectIPIPEncapsulated(ctx, c, nil, "steady state, every node pair")

		// node-4 withdraws its block.
		owner := "node-4"
		remaining := readvertWithout(c, owner)
		scenariotest.Act(c.KillBIRD(ctx, owner, syscall.SIGTERM))
		withdrawn := readvertWithdrawnBlocks(c, owner)
		readvertGuardWithdrawn(ctx, c, owner, remaining, withdrawn)
		positive := readvertMatrix(ctx, c, remaining, false)

		var table strings.Builder
		toRouter := 0
		for _, n := range remaining {
			for _, b := range withdrawn {
				routes := readvertBIRDRoutes(ctx, n, b)
				Expect(routes).To(ContainElement(SatisfyAll(
					HaveField("Protocol", readvertKernelProto), HaveField("Primary", true),
					HaveField("Nexthops", ContainElement(HaveField("Iface", topo.TunnelDevice))))),
					"guard: %s's best route to %s is the programmer's tunl0 route from the kernel; BIRD holds %v", n.Name, b, routes)
				for _, p := range readvertLivePeers(c, remaining, n) {
					if p.Internal {
						Expect(n).NotTo(judge.BeExportedTo(b, p.Address), "%s exports its tunl0 route to %s to the iBGP peer %s", n.Name, b, p.Address)
						continue
					}
					Eventually(n).WithPolling(100*time.Millisecond).
						Should(judge.BeExportedTo(b, p.Address), "%s should go on exporting its tunl0 route to %s to its eBGP peer %s (by decision)", n.Name, b, p.Address)
					toRouter++
					fmt.Fprintf(&table, "%s -> %s (eBGP): exported; to its 2 live iBGP peers: not\n", n.Name, b)
				}
			}
		}
		// The router took it from the nodes.
		for _, b := range withdrawn {
			Eventually(func() ([]bird.Route, error) { return router.BIRD.Client().Routes(ctx, b.String()) }).WithPolling(100*time.Millisecond).
				ShouldNot(BeEmpty(), "the eBGP router should hold %s learned from the nodes", b)
		}
		rs, _ := router.BIRD.Client().Routes(ctx, withdrawn[0].String())

		res := c.Result("eBGP peers receive the IPIP routes the tunl0 arm rejects towards iBGP peers", nil)
		res.Figure("exportsToEBGP", float64(toRouter), results.KindSize)
		res.Figure("iBGPExportsChecked", float64(positive.checked), results.KindSize)
		encapFigures(&res, encap)
		res.Notes = append(res.Notes, fmt.Sprintf("the router holds %d routes to %s after %s withdrew it", len(rs), withdrawn[0], owner))
		scenariotest.Record(fmt.Sprintf("eBGP re-advertisement of tunl0 routes: %d (node, block) exported to the router, none to iBGP peers", toRouter), table.String(), res)
		Expect(toRouter).To(Equal(len(remaining)*len(withdrawn)), "every remaining node exports every withdrawn block to the router")
	})
})
