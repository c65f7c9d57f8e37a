package scenarios_test

// Real Calico (issue 45): the same claims held on Calico's own Felix,
// confd and BIRD — the `calico` node flavour (harness/caliconode) — run
// from a directory laid out like the calico/node image
// ($BIRDCAGE_CALICO), reading Calico's etcdv3 datastore that birdcage's
// writer keeps following the cluster model. Without a build these specs
// skip, naming the feature `calico` (ci/expected-skips); with
// BIRDCAGE_REQUIRE=calico they fail instead.

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
	"github.com/birdcage/birdcage/internal/testenv"
)

// calicoSource is $BIRDCAGE_CALICO, or the spec skips naming the feature.
func calicoSource() string {
	GinkgoHelper()
	dir := os.Getenv(harness.CalicoEnv)
	if dir == "" {
		testenv.Missing(GinkgoT(), testenv.Calico, "set "+harness.CalicoEnv+"=DIR, a directory laid out like the calico/node image's root filesystem (README: Run it on your Calico)")
	}
	return dir
}

var _ = Describe("Real Calico", Label("calico"), func() {
	It("converges on Calico's own Felix, confd and BIRD, and a live programClusterRoutes change moves the no-encap routes to Felix and back", func(ctx SpecContext) {
		src := calicoSource()
		c := startCluster(ctx, "noencap", harness.Options{Calico: src})

		// 1. Guard: every node runs Calico's binaries, BIRD the 1.6 fork,
		// not the model's programmer and upstream BIRD.
		var versions []string
		for _, n := range c.Nodes() {
			Expect(n.Flavour()).To(Equal(harness.FlavourCalico), "%s's flavour", n.Name)
			v := n.CalicoVersions()
			Expect(v.Calico).NotTo(BeEmpty(), "%s: Calico's version", n.Name)
			Expect(v.BIRD).To(ContainSubstring("1.6"), "%s: Calico's BIRD is the 1.6.8 fork", n.Name)
			versions = append(versions, fmt.Sprintf("%s: calico %s, bird %s (release %s)", n.Name, v.Calico, v.BIRD, n.Release()))
		}
		rel := c.Nodes()[0].Release()

		// 2. The release's default owner: BIRD programs no-encap cluster
		// routes at 3.31–3.33 (BGPConfiguration.programClusterRoutes
		// defaults to EnabledNoEncapOnly at 3.33, Enabled at 3.32).
		Eventually(c).WithTimeout(machine.Wait(60*time.Second)).WithPolling(100*time.Millisecond).
			Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByBIRD).Only(), "every remote block by Calico's BIRD, and no other route")
		probes, err := c.Probes(ctx, harness.ProbeOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(flowsDelivering(probes)).WithPolling(50*time.Millisecond).Should(Succeed(), "every flow delivers through real Felix's dataplane")

		if rel == config.R331 {
			Skip("Calico 3.31 has no BGPConfiguration.programClusterRoutes: the live change needs 3.32 or later")
		}
		// 3. The live change to Felix (proto 80) and back, through etcd;
		// each direction's lost probes and no-route windows counted apart.
		lost := func() float64 {
			r, err := probes.Report()
			Expect(err).NotTo(HaveOccurred())
			return float64(r.Total.Lost)
		}
		lost0 := lost()
		toFelix, err := c.SetProgramClusterRoutes(ctx, config.Enabled, config.Disabled)
		Expect(err).NotTo(HaveOccurred())
		Eventually(c).WithTimeout(machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
			Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByProgrammer).Only(), "after Felix=Enabled, BGP=Disabled: Felix's routes only")
		Eventually(flowsDelivering(probes)).WithPolling(50 * time.Millisecond).Should(Succeed())
		lost1 := lost()
		toBIRD, err := c.SetProgramClusterRoutes(ctx, config.Disabled, config.Enabled)
		Expect(err).NotTo(HaveOccurred())
		Eventually(c).WithTimeout(machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
			Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByBIRD).Only(), "after Felix=Disabled, BGP=Enabled: BIRD's routes only")
		Eventually(flowsDelivering(probes)).WithPolling(50 * time.Millisecond).Should(Succeed())
		end := c.Mark("converged after the change back")

		rep, err := probes.Stop()
		Expect(err).NotTo(HaveOccurred())
		res := c.Result("real Calico: converge and live change on noencap", rep)
		res.AddProbeFigures(rep)
		res.Figures["lostBIRDToFelix"] = lost1 - lost0
		res.Figures["lostFelixToBIRD"] = float64(rep.Total.Lost) - lost1
		for _, span := range []struct {
			name     string
			from, to int64
		}{{"BIRDToFelix", toFelix.Mono, toBIRD.Mono}, {"FelixToBIRD", toBIRD.Mono, end.Mono}} {
			var longest float64
			windows := 0
			for _, n := range c.Nodes() {
				tl := c.Timeline(n.Name)
				Expect(tl.Judgeable(span.from, span.to)).To(Succeed(), "%s's route timeline over the change %s", n.Name, span.name)
				for _, b := range c.RemoteBlocks(n.Name) {
					for _, w := range tl.NoRouteWindows(b, span.from, span.to) {
						windows++
						longest = max(longest, w.Ms())
					}
				}
			}
			res.Figures["noRouteWindows"+span.name] = float64(windows)
			res.Figures["longestNoRouteWindowMs"+span.name] = longest
		}
		report("real Calico (calico flavour)", strings.Join(versions, "\n")+"\n"+harness.GapTable(rep)+
			fmt.Sprintf("BIRD → Felix: %.0f lost, longest no-route window %.0f ms; Felix → BIRD: %.0f lost, longest no-route window %.0f ms\n",
				res.Figures["lostBIRDToFelix"], res.Figures["longestNoRouteWindowMsBIRDToFelix"], res.Figures["lostFelixToBIRD"], res.Figures["longestNoRouteWindowMsFelixToBIRD"]), res)
	})
})
