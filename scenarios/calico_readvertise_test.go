package scenarios_test

// Re-advertisement on real Calico (issue 45; the model's claim is in
// readvertise_test.go, design §2 and §5): with Felix owning a pool's
// cluster routes, BIRD's kernel protocol (`learn`) takes Felix's routes
// into its table; once a block's owner withdraws its own advertisement
// (its BIRD stops with a Cease, `sv down bird`), Felix's route is every
// other BIRD's best route to the block. The export filter's tunl0 arm
// (3.33: IBGPExportFilterForTunnelRoutes, confd/pkg/backends/calico/
// bgp_processor.go @ 6609dea54713) keeps IPIP's out of iBGP exports; a
// no-encap route leaves through the uplink and nothing stops it (the
// known gap). Read at the receiving end, so one reading serves BIRD 2 and
// Calico's 1.6 fork alike: after the withdrawal, does any remaining
// node's BIRD hold a BGP route to the withdrawn block — which only
// another node's re-advertisement can have put there?

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/dataplane/bird"
	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// birdClient is the node's BIRD's client: the calico pod's (the 1.6 fork
// on /var/run/calico/bird.ctl) or the model's.
func birdClient(n *harness.Node) *bird.Client {
	if n.Calico != nil {
		return n.Calico.BIRD()
	}
	return n.BIRD.Client()
}

// bgpRoutesTo is every BGP route n's BIRD holds to p, as "protocol (next
// hop)" strings.
func bgpRoutesTo(ctx context.Context, n *harness.Node, p netip.Prefix) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rs, err := birdClient(n).Routes(cctx, p.String())
	if err != nil {
		return nil, fmt.Errorf("%s's BIRD, show route %s: %w", n.Name, p, err)
	}
	var out []string
	for _, r := range rs {
		if strings.HasPrefix(r.Type, "BGP") || r.Attrs["BGP.next_hop"] != "" {
			out = append(out, fmt.Sprintf("%s (next hop %s)", r.Protocol, r.Attrs["BGP.next_hop"]))
		}
	}
	return out, nil
}

// meshProtocol is the name confd gives the mesh session to addr (Calico's
// and the model's render alike).
func meshProtocol(addr netip.Addr) string {
	return "Mesh_" + strings.ReplaceAll(addr.String(), ".", "_")
}

var _ = Describe("Real Calico re-advertisement", Label("calico", "readvertise"), func() {
	DescribeTable("once a block's owner withdraws its block, whether another node passes Felix's route to it on to its iBGP peers",
		func(ctx SpecContext, topology string, start calicoStep, knownGap bool) {
			c, versions := startCalicoSide(ctx, builtin(topology), start)

			// 1. Felix owns every remote block's route.
			Eventually(c).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).
				Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByProgrammer).Only(), "every remote block by Felix, and no other route")

			// 2. Guard (not vacuous): every other node's BIRD holds the
			// owner's own advertisement of its block, so BGP is up and
			// would carry a re-advertisement.
			const owner = "node-3"
			ownerSession := meshProtocol(c.Node(owner).NS.Address.Addr())
			blocks := readvertWithdrawnBlocks(c, owner)
			remaining := readvertWithout(c, owner)
			for _, n := range remaining {
				for _, b := range blocks {
					Eventually(func() ([]string, error) { return bgpRoutesTo(ctx, n, b) }).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).
						Should(ContainElement(HavePrefix(ownerSession+" ")), "guard: %s's BIRD learns %s from %s over BGP", n.Name, b, owner)
				}
			}

			// 3. The owner withdraws: its BIRD stops with a Cease and stays
			// down, while every Felix keeps its route.
			const watched = "node-1"
			scenariotest.NameConformance("re-advertisement "+topology+" (Felix owns it), owner withdraws", watched)
			trace := traceConformance(c, watched)
			withdrew := scenariotest.Act(c.KillBIRD(ctx, owner, syscall.SIGTERM))
			for _, n := range remaining {
				for _, b := range blocks {
					Eventually(func() ([]string, error) { return bgpRoutesTo(ctx, n, b) }).WithTimeout(scenariotest.Machine.Wait(30*time.Second)).WithPolling(50*time.Millisecond).
						ShouldNot(ContainElement(HavePrefix(ownerSession+" ")), "guard: %s's BIRD drops %s's own advertisement of %s", n.Name, owner, b)
					Expect(n).To(judge.HaveClusterRoute(b).ProgrammedBy(judge.ByProgrammer), "guard: %s's Felix keeps its route to %s", n.Name, b)
				}
			}

			// 4. Read every remaining BIRD: a BGP route to a withdrawn
			// block is another node's re-advertisement.
			readvertised := func() ([]string, error) {
				var out []string
				for _, n := range remaining {
					for _, b := range blocks {
						rs, err := bgpRoutesTo(ctx, n, b)
						if err != nil {
							return nil, err
						}
						for _, r := range rs {
							out = append(out, fmt.Sprintf("%s holds %s from %s", n.Name, b, r))
						}
					}
				}
				return out, nil
			}
			var found []string
			hold := scenariotest.Machine.Wait(5 * time.Second)
			if knownGap {
				Eventually(func() ([]string, error) {
					var err error
					found, err = readvertised()
					return found, err
				}).WithTimeout(hold).WithPolling(100*time.Millisecond).ShouldNot(BeEmpty(),
					"known gap closed on %s: no node re-advertised %s's withdrawn block %v with Felix owning no-encap; update the design's §5 and readvertise_test.go", c.Nodes()[0].Flavour(), owner, blocks)
			} else {
				Consistently(func() ([]string, error) {
					var err error
					found, err = readvertised()
					return found, err
				}).WithTimeout(hold).WithPolling(100*time.Millisecond).Should(BeEmpty(),
					"with Felix owning IPIP, a node re-advertised %s's withdrawn block to its iBGP peers: the tunl0 arm should stop it", owner)
			}
			end := c.Mark("re-advertisement read")

			name := fmt.Sprintf("%s: re-advertisement on %s after %s withdrew its block", c.Nodes()[0].Flavour(), topology, owner)
			res := c.Result(name, nil)
			recordConformance(c, &res, trace, "re-advertisement "+topology+" (Felix owns it), owner withdraws", withdrew.Mono, end.Mono)
			res.Figure("readvertisementsAfterWithdrawal", float64(len(found)), results.KindCount)
			res.Notes = append(res.Notes, found...)
			if knownGap {
				res.Notes = append(res.Notes, "known gap (design §5): Felix's no-encap routes leave through the uplink, which the iBGP reject does not match")
			}
			scenariotest.Record(name, strings.Join(versions, "\n")+"\n"+strings.Join(found, "\n")+"\n", res)
		},
		Entry("IPIP, Felix owns it (3.33's defaults): the tunl0 arm keeps every withdrawn block out of iBGP exports", Label("ipip"), "ipip",
			calicoStep{owner: judge.ByProgrammer}, false),
		Entry("no-encap, Felix owns it (Felix=Enabled, BGP=Disabled): a node re-advertises the withdrawn block (known gap)", Label("noencap", "knowngap"), "noencap",
			calicoStep{config.Enabled, config.Disabled, judge.ByProgrammer, ""}, true),
	)
})
