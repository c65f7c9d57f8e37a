package scenarios_test

// Real Calico (issue 45): the same claims held on Calico's own Felix,
// confd and BIRD — the `calico` node flavour (dataplane/caliconode) — run
// from a directory laid out like the calico/node image
// ($BIRDCAGE_CALICO), reading Calico's etcdv3 datastore that birdcage's
// writer keeps following the cluster model. Without a build these specs
// skip, naming the feature `calico` (ci/expected-skips); with
// BIRDCAGE_REQUIRE=calico they fail instead.

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/calico/datastore"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
	"github.com/birdcage/birdcage/topo"
)

// calicoSource is $BIRDCAGE_CALICO, or the spec skips naming the feature.
func calicoSource() string {
	GinkgoHelper()
	dir := scenariotest.Config.Calico
	if dir == "" {
		testenv.Missing(GinkgoT(), testenv.Calico, "set "+env.Calico+"=DIR, a directory laid out like the calico/node image's root filesystem (README: Run it on your Calico)")
	}
	return dir
}

// calicoSide is what a real-Calico spec runs a node on: a Calico image
// directory (the calico flavour), or — the model's side of the
// conformance table (docs/conformance.md) — "model:REL", the model
// flavour at release REL, so that the same spec measures both.
type calicoSide struct {
	dir   string
	model config.Release
}

// sideOf reads a $BIRDCAGE_CALICO / $BIRDCAGE_CALICO_FROM value.
func sideOf(v, knob string) calicoSide {
	GinkgoHelper()
	rel, ok := strings.CutPrefix(v, "model:")
	if !ok {
		return calicoSide{dir: v}
	}
	r, err := config.ParseRelease(rel)
	Expect(err).NotTo(HaveOccurred(), "%s=%q: model:REL names a release (model:3.33)", knob, v)
	return calicoSide{model: r}
}

// options starts every node on this side.
func (s calicoSide) options() harness.Options {
	if s.dir != "" {
		return harness.Options{Calico: s.dir}
	}
	return harness.Options{Release: s.model}
}

// flavour is the flavour this side runs.
func (s calicoSide) flavour() string {
	if s.dir != "" {
		return harness.FlavourCalico
	}
	return harness.FlavourModel
}

// expectSide guards that every node runs this side's flavour and, on
// Calico, Calico's binaries and BIRD fork; it returns each node's versions.
func expectSide(c *harness.Cluster, s calicoSide) []string {
	GinkgoHelper()
	var versions []string
	for _, n := range c.Nodes() {
		Expect(n.Flavour()).To(Equal(s.flavour()), "%s's flavour", n.Name)
		if s.dir == "" {
			versions = append(versions, fmt.Sprintf("%s: the model at %s", n.Name, n.Release()))
			continue
		}
		v := n.CalicoVersions()
		Expect(v.Calico).NotTo(BeEmpty(), "%s: Calico's version", n.Name)
		Expect(v.BIRD).To(ContainSubstring("1.6"), "%s: Calico's BIRD is the 1.6.8 fork", n.Name)
		versions = append(versions, fmt.Sprintf("%s: calico %s, bird %s (release %s)", n.Name, v.Calico, v.BIRD, n.Release()))
	}
	return versions
}

// startCalicoSide starts t with every node on $BIRDCAGE_CALICO's side
// (Calico's image, or the model at model:REL), programClusterRoutes as
// start writes it (empty: the release's default), and guards that every
// node runs that side; it returns the nodes' versions for the row. A
// release other than 3.33 skips: the specs' owners are 3.33's values.
func startCalicoSide(ctx SpecContext, t *topo.Topology, start calicoStep) (*harness.Cluster, []string) {
	GinkgoHelper()
	side := sideOf(calicoSource(), env.Calico)
	opts := side.options()
	opts.Felix = datastore.FelixConfiguration{ProgramClusterRoutes: string(start.felix)}
	opts.BGP = datastore.BGPConfiguration{ProgramClusterRoutes: string(start.bgp)}
	c := scenariotest.StartClusterOn(ctx, t, opts)
	versions := expectSide(c, side)
	if rel := c.Nodes()[0].Release(); rel != config.R333 {
		Skip(fmt.Sprintf("the image is Calico %s: these specs' owners are 3.33's values", rel))
	}
	return c, versions
}

// builtin is a built-in topology by name.
func builtin(name string) *topo.Topology {
	GinkgoHelper()
	t, err := topo.Builtin(name)
	Expect(err).NotTo(HaveOccurred())
	return t
}

// traceConformance starts the netlink route trace of a conformance case's
// node; a kernel that cannot run it skips, naming the feature.
func traceConformance(c *harness.Cluster, node string) *harness.RouteTrace {
	GinkgoHelper()
	t, err := c.Measure().TraceRoutes(node)
	testenv.SkipIfMissing(GinkgoT(), err, "the netlink route trace of a conformance case")
	Expect(err).NotTo(HaveOccurred())
	return t
}

// recordConformance names the row's conformance case and records the
// node's route requests to cluster routes between from and to.
func recordConformance(c *harness.Cluster, res *results.ScenarioResult, t *harness.RouteTrace, name string, from, to int64) {
	GinkgoHelper()
	res.Conformance = &results.Conformance{Case: name, Node: t.Node, From: from, To: to}
	var pools []netip.Prefix
	for _, p := range c.Net.Topology.Pools {
		pf, err := netip.ParsePrefix(p.CIDR)
		Expect(err).NotTo(HaveOccurred(), "pool %s's CIDR", p.Name)
		pools = append(pools, pf.Masked())
	}
	Expect(t.Record(res, from, to, func(p netip.Prefix) bool {
		for _, pool := range pools {
			if kroute.Within(pool, p) {
				return true
			}
		}
		return false
	})).To(Succeed(), "the route trace of %s", t.Node)
}

// calicoStep is one ownership: the two fields written together (empty:
// the release's default), the owner every remote block has with them,
// and, for a change, its name.
type calicoStep struct {
	felix, bgp config.ProgramClusterRoutes
	owner      judge.Owner
	name       string
}

var _ = Describe("Real Calico", Label("calico"), func() {
	DescribeTable("converges on Calico's own Felix, confd and BIRD, and a live programClusterRoutes change moves the routes",
		func(ctx SpecContext, topology string, start calicoStep, st calicoStep) {
			// 1. Guard: every node runs Calico's binaries, BIRD the 1.6
			// fork, not the model's programmer and upstream BIRD (or, on
			// the model's side of the conformance table, the model).
			c, versions := startCalicoSide(ctx, builtin(topology), start)

			// 2. The starting owner, every flow delivering through the
			// dataplane.
			Eventually(c).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).
				Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(start.owner).Only(), "every remote block by %s, and no other route", start.owner)
			const watched = "node-2"
			scenariotest.NameConformance(fmt.Sprintf("live change %s, %s", topology, st.name), watched)
			trace := traceConformance(c, watched)
			probes, err := c.Probes(ctx, harness.ProbeOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(flowsDelivering(probes)).WithPolling(50*time.Millisecond).Should(Succeed(), "every flow delivers through the dataplane")

			// 3. The live change, through the datastore (etcd on Calico).
			e, err := c.SetProgramClusterRoutes(ctx, st.felix, st.bgp)
			Expect(err).NotTo(HaveOccurred())
			Eventually(c).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
				Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(st.owner).Only(), "after Felix=%s, BGP=%s: %s's routes only", st.felix, st.bgp, st.owner)
			Eventually(flowsDelivering(probes)).WithPolling(50 * time.Millisecond).Should(Succeed())
			end := c.Mark("converged after the change")

			rep, err := probes.Stop()
			Expect(err).NotTo(HaveOccurred())
			name := fmt.Sprintf("%s: live change on %s, %s", c.Nodes()[0].Flavour(), topology, st.name)
			res := c.Result(name, rep)
			res.AddProbeFigures(rep)
			recordConformance(c, &res, trace, fmt.Sprintf("live change %s, %s", topology, st.name), e.Mono, end.Mono)
			var longest float64
			windows := 0
			for _, n := range c.Nodes() {
				tl := c.Timeline(n.Name)
				Expect(tl.Judgeable(e.Mono, end.Mono)).To(Succeed(), "%s's route timeline over the change", n.Name)
				for _, b := range c.RemoteBlocks(n.Name) {
					for _, w := range tl.NoRouteWindows(b, e.Mono, end.Mono) {
						windows++
						longest = max(longest, w.Ms())
					}
				}
			}
			res.Figure("noRouteWindows", float64(windows), results.KindCount)
			res.Figure("longestNoRouteWindowMs", longest, results.KindGap)
			line := fmt.Sprintf("%s: %.0f lost, %d no-route windows on every node, longest %.0f ms", st.name, res.Figures["lostProbes"], windows, longest)
			scenariotest.Record(name, strings.Join(versions, "\n")+"\n"+results.GapTable(rep)+line+"\n", res)
		},
		Entry("no-encap: BIRD's routes to Felix (Felix=Enabled, BGP=Disabled)", Label("noencap"), "noencap",
			calicoStep{owner: judge.ByBIRD}, calicoStep{config.Enabled, config.Disabled, judge.ByProgrammer, "BIRD → Felix"}),
		Entry("no-encap: Felix's routes to BIRD (Felix=Disabled, BGP=Enabled)", Label("noencap"), "noencap",
			calicoStep{config.Enabled, config.Disabled, judge.ByProgrammer, ""}, calicoStep{config.Disabled, config.Enabled, judge.ByBIRD, "Felix → BIRD"}),
		Entry("IPIP: Felix's tunnel routes to BIRD (Felix=Disabled, BGP=Enabled)", Label("ipip"), "ipip",
			calicoStep{owner: judge.ByProgrammer}, calicoStep{config.Disabled, config.Enabled, judge.ByBIRD, "Felix → BIRD"}),
		Entry("IPIP: BIRD's tunnel routes to Felix (Felix=Enabled, BGP=Disabled)", Label("ipip"), "ipip",
			calicoStep{config.Disabled, config.Enabled, judge.ByBIRD, ""}, calicoStep{config.Enabled, config.Disabled, judge.ByProgrammer, "BIRD → Felix"}),
	)
})

var _ = Describe("Real Calico beside the model", Label("calico", "noencap"), func() {
	It("a mixed cluster (node-2 Calico's own pod, the rest the model) converges and every flow delivers, every remote block by BIRD", func(ctx SpecContext) {
		src := calicoSource()
		if sideOf(src, env.Calico).dir == "" {
			Skip(env.Calico + "=" + src + ": a mixed cluster has no model side of its own (the conformance table leaves it out)")
		}
		c := scenariotest.StartCluster(ctx, "noencap", harness.Options{NodeCalico: map[string]string{"node-2": src}})
		// Guard: exactly node-2 runs Calico's pod.
		for _, n := range c.Nodes() {
			want := harness.FlavourModel
			if n.Name == "node-2" {
				want = harness.FlavourCalico
			}
			Expect(n.Flavour()).To(Equal(want), "%s's flavour", n.Name)
		}
		Expect(c.Node("node-2").CalicoVersions().BIRD).To(ContainSubstring("1.6"), "node-2's BIRD is Calico's fork")
		// The model's BIRD 2 and Calico's BIRD 1.6 fork mesh with each
		// other; with 3.33's defaults BIRD owns every no-encap block.
		Eventually(c).WithTimeout(scenariotest.Machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).
			Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByBIRD).Only(), "every remote block by BIRD, on every node")
		probes, err := c.Probes(ctx, harness.ProbeOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(flowsDelivering(probes)).WithPolling(50*time.Millisecond).Should(Succeed(), "every flow delivers across the two flavours")
		rep, err := probes.Stop()
		Expect(err).NotTo(HaveOccurred())
		res := c.Result("real Calico beside the model on noencap", rep)
		res.AddProbeFigures(rep)
		Expect(res.Flavours).To(Equal(map[string]string{"node-1": "model", "node-2": "calico", "node-3": "model"}), "the row records each node's flavour")
		scenariotest.Record("mixed cluster: node-2 real Calico", results.GapTable(rep), res)
	})
})
