package scenarios_test

// Claim (design §3): from 3.33, BIRD programming the cluster routes of IPIP
// pools is deprecated, and users on that path are told at runtime: confd
// logs a warning in every render in which BIRD is configured to program the
// cluster routes of at least one IPIP pool. The warning is per render, not
// once per node lifetime (users grep for it), and a render in which BIRD
// programs no IPIP pool logs none.
//
// So, on an IPIP cluster whose BIRD owns IPIP, every node's warning count
// equals its render count through renders of every kind — a configuration
// change that keeps BIRD the owner, a datastore write that leaves the BIRD
// config unchanged, a new IPIP pool — and the warning names the pools. Once
// the programmer owns IPIP, further renders add none.

import (
	"context"
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
	"github.com/birdcage/birdcage/topo"
)

// The ipip topology's pool, and one added by the scenario.
const (
	deprecationPool      = "ipip-pool"
	deprecationExtraPool = "ipip-pool-extra"
	deprecationExtraCIDR = "10.240.0.0/16"
)

var _ = Describe("Deprecation warning for BIRD-programmed IPIP cluster routes", Label("ipip", "deprecation"), func() {
	It("is logged once in every render in which BIRD programs an IPIP pool, and in none once the programmer owns IPIP", func(ctx SpecContext) {
		By("1. 3.33 with the deprecated pair: BIRD owns everything (guard: BIRD programs the IPIP routes)")
		c := scenariotest.StartCluster(ctx, "ipip", harness.Options{
			Felix: datastore.FelixConfiguration{ProgramClusterRoutes: string(config.Disabled)},
			BGP:   datastore.BGPConfiguration{ProgramClusterRoutes: string(config.Enabled)},
		})
		Eventually(c).WithPolling(50*time.Millisecond).
			Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByBIRD).Via(topo.TunnelDevice).Only(), "guard: BIRD owns the IPIP routes")

		By("2. the start render warned, naming the pool")
		pools := []string{deprecationPool}
		deprecationExpectStartWarned(c, pools)

		By("3. renders of every kind while BIRD keeps owning IPIP: each adds exactly one warning")
		while := deprecationStepsWhileBIRDOwns(ctx, c, &pools)
		deprecationRun(c, while, func(step deprecationStep, n *harness.Node) {
			renders, warnings := deprecationCounts(n)
			Expect(warnings).To(HaveLen(renders), "after %s: %s has rendered %d times with BIRD owning IPIP but logged %d deprecation warnings",
				step.name, n.Name, renders, len(warnings))
			deprecationExpectNames(n, warnings[len(warnings)-1], pools)
		})
		owned := deprecationCountsRenderedFor(c, len(while))

		By("4. the programmer takes IPIP over: the render that moves it carries no warning")
		switched := deprecationSwitchToProgrammer(ctx, c, owned)

		By("5. later renders, the programmer still owning IPIP, add none")
		deprecationRun(c, deprecationStepsProgrammerOwns(ctx, c), func(step deprecationStep, n *harness.Node) {
			_, warnings := deprecationCounts(n)
			Expect(warnings).To(HaveLen(switched[n.Name][1]), "after %s, with the programmer owning IPIP, %s logged %d new deprecation warnings: %q",
				step.name, n.Name, len(warnings)-switched[n.Name][1], warnings[switched[n.Name][1]:])
		})

		By("6. figures")
		recordDeprecationFigures(c, owned, switched)
	})
})

// deprecationExpectStartWarned: every node's start render warned, naming
// the pools.
func deprecationExpectStartWarned(c *harness.Cluster, pools []string) {
	GinkgoHelper()
	for _, n := range c.Nodes() {
		renders, warnings := deprecationCounts(n)
		Expect(renders).To(BeNumerically(">=", 1), "guard: %s rendered at start", n.Name)
		Expect(warnings).To(HaveLen(renders), "%s: %d renders with BIRD owning IPIP but %d deprecation warnings: %q", n.Name, renders, len(warnings), warnings)
		deprecationExpectNames(n, warnings[len(warnings)-1], pools)
	}
}

// deprecationCountsRenderedFor is each node's renders and warnings, guarded:
// every node rendered for each of the changes.
func deprecationCountsRenderedFor(c *harness.Cluster, changes int) map[string][2]int {
	GinkgoHelper()
	owned := map[string][2]int{}
	for _, n := range c.Nodes() {
		r, w := deprecationCounts(n)
		owned[n.Name] = [2]int{r, len(w)}
		Expect(r).To(BeNumerically(">=", 1+changes), "guard: %s rendered for every change", n.Name)
	}
	return owned
}

// deprecationStepsWhileBIRDOwns are renders of every kind that leave BIRD
// owning IPIP; the one that adds a pool appends it to pools.
func deprecationStepsWhileBIRDOwns(ctx SpecContext, c *harness.Cluster, pools *[]string) []deprecationStep {
	return []deprecationStep{
		{"BGPConfiguration Enabled → EnabledIPIPOnly (BIRD still owns IPIP)", func() error {
			_, err := c.Datastore().UpdateBGPConfig(ctx, "BGPConfiguration.programClusterRoutes=EnabledIPIPOnly", func(b *datastore.BGPConfiguration) {
				b.ProgramClusterRoutes = string(config.EnabledIPIPOnly)
			})
			return err
		}},
		{"a workload document rewritten unchanged (the BIRD config text does not change)", func() error {
			return deprecationRewriteWorkload(ctx, c)
		}},
		{"a second IPIP pool added", func() error {
			*pools = append(*pools, deprecationExtraPool)
			_, err := c.Datastore().PutIPPool(ctx, deprecationExtraPool, datastore.IPPool{
				Name: deprecationExtraPool, CIDR: deprecationExtraCIDR, IPIPMode: datastore.EncapAlways, VXLANMode: datastore.EncapNever,
			})
			return err
		}},
	}
}

// deprecationStepsProgrammerOwns are renders after the programmer took
// IPIP over.
func deprecationStepsProgrammerOwns(ctx SpecContext, c *harness.Cluster) []deprecationStep {
	return []deprecationStep{
		{"a workload document rewritten unchanged", func() error { return deprecationRewriteWorkload(ctx, c) }},
		{"BGPConfiguration rewritten unchanged", func() error {
			_, err := c.Datastore().UpdateBGPConfig(ctx, "BGPConfiguration rewritten unchanged", func(*datastore.BGPConfiguration) {})
			return err
		}},
		{"the second IPIP pool deleted", func() error { _, err := c.Datastore().DeletePool(ctx, deprecationExtraPool); return err }},
	}
}

// deprecationRun makes each change, waits for every node to render it and
// checks every node.
func deprecationRun(c *harness.Cluster, steps []deprecationStep, check func(deprecationStep, *harness.Node)) {
	GinkgoHelper()
	for _, step := range steps {
		before := deprecationRendersOf(c)
		Expect(step.change()).To(Succeed(), step.name)
		deprecationWaitRendered(c, before, step.name)
		for _, n := range c.Nodes() {
			check(step, n)
		}
	}
}

// deprecationSwitchToProgrammer is step 4: the programmer takes IPIP over.
// The render that moves it carries no warning: BIRD's running config,
// written from that render, has none. It returns each node's renders and
// warnings after the switch.
func deprecationSwitchToProgrammer(ctx SpecContext, c *harness.Cluster, owned map[string][2]int) map[string][2]int {
	GinkgoHelper()
	_, err := c.SetProgramClusterRoutes(ctx, config.EnabledIPIPOnly, config.EnabledNoEncapOnly)
	Expect(err).NotTo(HaveOccurred())
	policy := fmt.Sprintf("programClusterRoutes %q -> %s", config.EnabledNoEncapOnly, config.EnabledNoEncapOnly)
	for _, n := range c.Nodes() {
		Eventually(func() (string, error) {
			b, err := os.ReadFile(n.BIRD.ConfigPath())
			return string(b), err
		}).WithPolling(50*time.Millisecond).Should(ContainSubstring(policy),
			"guard: %s's BIRD runs a config rendered after the switch", n.Name)
		conf, err := os.ReadFile(n.BIRD.ConfigPath())
		Expect(err).NotTo(HaveOccurred())
		Expect(string(conf)).NotTo(ContainSubstring("# warning: DEPRECATED"), "%s: the render in which the programmer took IPIP over carries a deprecation warning", n.Name)
	}
	Eventually(c).WithPolling(50*time.Millisecond).
		Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByProgrammer).Via(topo.TunnelDevice).Only(), "guard: the programmer owns the IPIP routes after the switch")
	switched := map[string][2]int{}
	for _, n := range c.Nodes() {
		r, w := deprecationCounts(n)
		switched[n.Name] = [2]int{r, len(w)}
		Expect(len(w)).To(Equal(owned[n.Name][1]), "%s logged %d deprecation warnings in the renders of the switch to the programmer: %q",
			n.Name, len(w)-owned[n.Name][1], w[owned[n.Name][1]:])
	}
	return switched
}

// recordDeprecationFigures is step 6.
func recordDeprecationFigures(c *harness.Cluster, owned, switched map[string][2]int) {
	GinkgoHelper()
	res := c.Result("deprecation warning per render (IPIP)", nil)
	t := results.NewTable("node", "renders, BIRD owns IPIP", "warnings", "renders of the switch", "warnings", "renders, programmer owns IPIP", "warnings").AlignRight()
	for _, n := range c.Nodes() {
		r, ws := deprecationCounts(n)
		o, s := owned[n.Name], switched[n.Name]
		t.Add(n.Name, o[0], o[1], s[0]-o[0], s[1]-o[1], r-s[0], len(ws)-s[1])
		res.Figure("rendersBIRDOwns_"+n.Name, float64(o[0]), results.KindSize)
		res.Figure("warningsBIRDOwns_"+n.Name, float64(o[1]), results.KindSize)
		res.Figure("rendersFromSwitchOn_"+n.Name, float64(r-o[0]), results.KindSize)
		res.Figure("warningsFromSwitchOn_"+n.Name, float64(len(ws)-o[1]), results.KindCount)
	}
	last := c.Nodes()[0].Warnings()
	res.Notes = append(res.Notes, "last warning text: "+last[len(last)-1])
	scenariotest.Record("deprecation warnings per render (IPIP, 3.33)", t.String()+"last warning: "+last[len(last)-1]+"\n", res)
}

type deprecationStep struct {
	name   string
	change func() error
}

// deprecationCounts reads a node's render count and warnings as one
// snapshot: a render that lands between the two reads is retried.
func deprecationCounts(n *harness.Node) (int, []string) {
	for {
		r := n.Renders()
		w := n.Warnings()
		if n.Renders() == r {
			return r, w
		}
	}
}

func deprecationRendersOf(c *harness.Cluster) map[string]int {
	out := map[string]int{}
	for _, n := range c.Nodes() {
		out[n.Name] = n.Renders()
	}
	return out
}

// deprecationWaitRendered waits until confd has rendered every node again
// since before.
func deprecationWaitRendered(c *harness.Cluster, before map[string]int, what string) {
	GinkgoHelper()
	for _, n := range c.Nodes() {
		Eventually(n.Renders).WithPolling(20*time.Millisecond).
			Should(BeNumerically(">", before[n.Name]), "confd should re-render %s after %s", n.Name, what)
	}
}

// deprecationExpectNames checks the warning says it is a deprecation and
// names every pool BIRD programs, and no other.
func deprecationExpectNames(n *harness.Node, warning string, pools []string) {
	GinkgoHelper()
	Expect(warning).To(ContainSubstring("DEPRECATED"), "%s's warning should say it is a deprecation", n.Name)
	rest := warning
	for _, p := range deprecationLongestFirst(pools) {
		Expect(rest).To(ContainSubstring(p), "%s's deprecation warning should name IPIP pool %s", n.Name, p)
		rest = strings.ReplaceAll(rest, p, "")
	}
	if len(pools) == 1 {
		Expect(warning).NotTo(ContainSubstring(deprecationExtraPool), "%s's warning names a pool that does not exist yet", n.Name)
	}
}

func deprecationLongestFirst(ss []string) []string {
	out := append([]string(nil), ss...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if len(out[j]) > len(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// deprecationRewriteWorkload writes a workload document back unchanged: a
// datastore change confd renders on whose BIRD config is the same text.
func deprecationRewriteWorkload(ctx context.Context, c *harness.Cluster) error {
	cl, err := c.Datastore().Read(ctx)
	if err != nil {
		return err
	}
	if len(cl.Workloads) == 0 {
		return fmt.Errorf("the datastore has no workload to rewrite")
	}
	_, err = c.Datastore().PutWorkload(ctx, cl.Workloads[0])
	return err
}
