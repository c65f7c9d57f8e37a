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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/calico/config"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
)

// calicoSource is $BIRDCAGE_CALICO, or the spec skips naming the feature.
func calicoSource() string {
	GinkgoHelper()
	dir := cfg.Calico
	if dir == "" {
		testenv.Missing(GinkgoT(), testenv.Calico, "set "+env.Calico+"=DIR, a directory laid out like the calico/node image's root filesystem (README: Run it on your Calico)")
	}
	return dir
}

// calicoStep is one live change: the two fields written together, the
// owner every remote block must end with, and the figures' name.
type calicoStep struct {
	felix, bgp config.ProgramClusterRoutes
	owner      judge.Owner
	name       string
}

var _ = Describe("Real Calico", Label("calico"), func() {
	DescribeTable("converges on Calico's own Felix, confd and BIRD, and a live programClusterRoutes change moves the routes and back",
		func(ctx SpecContext, topology string, initial judge.Owner, steps []calicoStep) {
			src := calicoSource()
			c := startCluster(ctx, topology, harness.Options{Calico: src})

			// 1. Guard: every node runs Calico's binaries, BIRD the 1.6
			// fork, not the model's programmer and upstream BIRD.
			var versions []string
			for _, n := range c.Nodes() {
				Expect(n.Flavour()).To(Equal(harness.FlavourCalico), "%s's flavour", n.Name)
				v := n.CalicoVersions()
				Expect(v.Calico).NotTo(BeEmpty(), "%s: Calico's version", n.Name)
				Expect(v.BIRD).To(ContainSubstring("1.6"), "%s: Calico's BIRD is the 1.6.8 fork", n.Name)
				versions = append(versions, fmt.Sprintf("%s: calico %s, bird %s (release %s)", n.Name, v.Calico, v.BIRD, n.Release()))
			}
			if rel := c.Nodes()[0].Release(); rel != config.R333 {
				Skip(fmt.Sprintf("the image is Calico %s: these owners are 3.33's defaults (BGP EnabledNoEncapOnly, Felix EnabledIPIPOnly)", rel))
			}

			// 2. The release's default owner (3.33: BIRD for no-encap,
			// Felix for IPIP), every flow delivering through real Felix's
			// dataplane.
			Eventually(c).WithTimeout(machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).
				Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(initial).Only(), "every remote block by %s, and no other route", initial)
			probes, err := c.Probes(ctx, harness.ProbeOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(flowsDelivering(probes)).WithPolling(50*time.Millisecond).Should(Succeed(), "every flow delivers through real Felix's dataplane")

			// 3. The live changes, through etcd; each one's lost probes and
			// no-route windows counted apart.
			lost := func() float64 {
				r, err := probes.Report()
				Expect(err).NotTo(HaveOccurred())
				return float64(r.Total.Lost)
			}
			type span struct {
				name     string
				from, to int64
				lost0    float64
			}
			var spans []span
			for _, st := range steps {
				l := lost()
				e, err := c.SetProgramClusterRoutes(ctx, st.felix, st.bgp)
				Expect(err).NotTo(HaveOccurred())
				Eventually(c).WithTimeout(machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
					Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(st.owner).Only(), "after Felix=%s, BGP=%s: %s's routes only", st.felix, st.bgp, st.owner)
				Eventually(flowsDelivering(probes)).WithPolling(50 * time.Millisecond).Should(Succeed())
				if len(spans) > 0 {
					spans[len(spans)-1].to = e.Mono
				}
				spans = append(spans, span{name: st.name, from: e.Mono, lost0: l})
			}
			spans[len(spans)-1].to = c.Mark("converged after the last change").Mono
			lostAt := []float64{}
			for i := 1; i < len(spans); i++ {
				lostAt = append(lostAt, spans[i].lost0)
			}

			rep, err := probes.Stop()
			Expect(err).NotTo(HaveOccurred())
			lostAt = append(lostAt, float64(rep.Total.Lost))
			res := c.Result("real Calico: converge and live change on "+topology, rep)
			res.AddProbeFigures(rep)
			var lines []string
			for i, sp := range spans {
				res.Figures["lost"+sp.name] = lostAt[i] - sp.lost0
				var longest float64
				windows := 0
				for _, n := range c.Nodes() {
					tl := c.Timeline(n.Name)
					Expect(tl.Judgeable(sp.from, sp.to)).To(Succeed(), "%s's route timeline over the change %s", n.Name, sp.name)
					for _, b := range c.RemoteBlocks(n.Name) {
						for _, w := range tl.NoRouteWindows(b, sp.from, sp.to) {
							windows++
							longest = max(longest, w.Ms())
						}
					}
				}
				res.Figures["noRouteWindows"+sp.name] = float64(windows)
				res.Figures["longestNoRouteWindowMs"+sp.name] = longest
				lines = append(lines, fmt.Sprintf("%s: %.0f lost, %d no-route windows, longest %.0f ms", sp.name, res.Figures["lost"+sp.name], windows, longest))
			}
			report("real Calico (calico flavour) on "+topology, strings.Join(versions, "\n")+"\n"+results.GapTable(rep)+strings.Join(lines, "\n")+"\n", res)
		},
		Entry("no-encap: BIRD's routes to Felix (Felix=Enabled, BGP=Disabled) and back", Label("noencap"), "noencap", judge.ByBIRD, []calicoStep{
			{config.Enabled, config.Disabled, judge.ByProgrammer, "BIRDToFelix"},
			{config.Disabled, config.Enabled, judge.ByBIRD, "FelixToBIRD"},
		}),
		Entry("IPIP: Felix's tunnel routes to BIRD (Felix=Disabled, BGP=Enabled) and back", Label("ipip"), "ipip", judge.ByProgrammer, []calicoStep{
			{config.Disabled, config.Enabled, judge.ByBIRD, "FelixToBIRD"},
			{config.Enabled, config.Disabled, judge.ByProgrammer, "BIRDToFelix"},
		}),
	)
})

var _ = Describe("Real Calico beside the model", Label("calico", "noencap"), func() {
	It("a mixed cluster (node-2 Calico's own pod, the rest the model) converges and every flow delivers, every remote block by BIRD", func(ctx SpecContext) {
		src := calicoSource()
		c := startCluster(ctx, "noencap", harness.Options{NodeCalico: map[string]string{"node-2": src}})
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
		Eventually(c).WithTimeout(machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).
			Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByBIRD).Only(), "every remote block by BIRD, on every node")
		probes, err := c.Probes(ctx, harness.ProbeOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(flowsDelivering(probes)).WithPolling(50*time.Millisecond).Should(Succeed(), "every flow delivers across the two flavours")
		rep, err := probes.Stop()
		Expect(err).NotTo(HaveOccurred())
		res := c.Result("real Calico beside the model on noencap", rep)
		res.AddProbeFigures(rep)
		Expect(res.Flavours).To(Equal(map[string]string{"node-1": "model", "node-2": "calico", "node-3": "model"}), "the row records each node's flavour")
		report("mixed cluster: node-2 real Calico", results.GapTable(rep), res)
	})
})
