package scenarios_test

// Claim (design §3): the deprecation warning is about BIRD programming the
// cluster routes of IPIP pools; when BIRD programs only no-encap pools it
// logs none — BIRD owning everything on a cluster with no IPIP pool, or
// BIRD owning no-encap (the 3.33 default) beside an IPIP pool it does not
// program.
//
// Natively, on no-encap: an IPIP pool can be added to the datastore without
// any block (so nothing needs tunl0), which is all confd needs to decide
// about it. Positive control: with that pool present and BIRD set to
// program IPIP too, the very next render warns and names the pool — the
// warning is live and the pool was seen. Guards: confd really rendered after
// each change (render counts), and BIRD really programs the no-encap routes.

import (
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

const noDeprecationIPIPPool = "ipip-pool-no-blocks"

var _ = Describe("No deprecation warning while BIRD programs only no-encap pools", Label("noencap", "deprecation", "claim7"), func() {
	It("logs no warning in any render in which BIRD programs no IPIP pool, and one as soon as it does", func(ctx SpecContext) {
		// 1. 3.33, BIRD owns everything, the cluster has only a no-encap pool.
		c := scenariotest.StartCluster(ctx, "noencap", harness.Options{
			Release: config.R333,
			Felix:   datastore.FelixConfiguration{ProgramClusterRoutes: "Disabled"},
			BGP:     datastore.BGPConfiguration{ProgramClusterRoutes: "Enabled"},
		})
		Eventually(c).WithPolling(50*time.Millisecond).
			Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByBIRD).Only(), "guard: BIRD programs the no-encap routes")
		var table strings.Builder
		expectNoWarnings := func(step string) {
			GinkgoHelper()
			for _, n := range c.Nodes() {
				renders, warnings := deprecationCounts(n)
				Expect(renders).To(BeNumerically(">=", 1), "guard: %s rendered", n.Name)
				Expect(warnings).To(BeEmpty(), "%s: %s logged a deprecation warning while BIRD programs no IPIP pool: %q", step, n.Name, warnings)
			}
			r, _ := deprecationCounts(c.Nodes()[0])
			fmt.Fprintf(&table, "%-90s renders(node-1) %d, warnings 0\n", step, r)
		}
		step := func(name string, change func() error) {
			GinkgoHelper()
			before := deprecationRendersOf(c)
			Expect(change()).To(Succeed(), name)
			deprecationWaitRendered(c, before, name)
		}
		expectNoWarnings("start: BGP Enabled, only a no-encap pool")

		// 2. A render whose BIRD text does not change, still BIRD owning all.
		step("a workload document rewritten", func() error { return deprecationRewriteWorkload(ctx, c) })
		expectNoWarnings("a workload document rewritten (BGP Enabled, only no-encap)")

		// 3. The 3.33 default pair, then an IPIP pool (no blocks) appears:
		// BIRD programs only no-encap beside it.
		step("the 3.33 default pair", func() error {
			_, err := c.SetProgramClusterRoutes(ctx, "EnabledIPIPOnly", "EnabledNoEncapOnly")
			return err
		})
		expectNoWarnings("BGP EnabledNoEncapOnly, only a no-encap pool")
		step("an IPIP pool added", func() error {
			_, err := c.Datastore().PutIPPool(ctx, noDeprecationIPIPPool, datastore.IPPool{
				Name: noDeprecationIPIPPool, CIDR: deprecationExtraCIDR, IPIPMode: datastore.EncapAlways, VXLANMode: datastore.EncapNever,
			})
			return err
		})
		expectNoWarnings("BGP EnabledNoEncapOnly beside an IPIP pool")
		// Guard: the pool reached BIRD's config (its kernel filter rejects it).
		for _, n := range c.Nodes() {
			Eventually(func() (string, error) { return birdConfig(n) }).WithPolling(50*time.Millisecond).
				Should(ContainSubstring(deprecationExtraCIDR), "guard: %s's BIRD config knows the IPIP pool", n.Name)
		}

		// 4. Positive control: BIRD set to program IPIP too, with the pool
		// present: the next render warns and names the pool.
		step("BGP Enabled beside the IPIP pool", func() error {
			_, err := c.SetProgramClusterRoutes(ctx, "Disabled", "Enabled")
			return err
		})
		for _, n := range c.Nodes() {
			_, warnings := deprecationCounts(n)
			Expect(warnings).NotTo(BeEmpty(), "control: %s should warn once BIRD programs the IPIP pool", n.Name)
			Expect(warnings[len(warnings)-1]).To(And(ContainSubstring("DEPRECATED"), ContainSubstring(noDeprecationIPIPPool)),
				"control: %s's warning names the IPIP pool", n.Name)
		}
		r, w := deprecationCounts(c.Nodes()[0])
		fmt.Fprintf(&table, "%-90s renders(node-1) %d, warnings %d\n", "control: BGP Enabled beside the IPIP pool", r, len(w))

		res := c.Result("no deprecation warning while BIRD programs only no-encap pools", nil)
		res.Figure("controlWarningsNode1", float64(len(w)), results.KindSize)
		res.Figure("rendersNode1", float64(r), results.KindSize)
		scenariotest.Record("deprecation warnings while BIRD programs only no-encap pools (then the control)", table.String(), res)
	})
})

func birdConfig(n *harness.Node) (string, error) {
	b, err := os.ReadFile(n.BIRD.ConfigPath())
	return string(b), err
}
