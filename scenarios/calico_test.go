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
		// 3. The live change to Felix (proto 80) and back, through etcd.
		_, err = c.SetProgramClusterRoutes(ctx, config.Enabled, config.Disabled)
		Expect(err).NotTo(HaveOccurred())
		Eventually(c).WithTimeout(machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
			Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByProgrammer).Only(), "after Felix=Enabled, BGP=Disabled: Felix's routes only")
		Eventually(flowsDelivering(probes)).WithPolling(50 * time.Millisecond).Should(Succeed())
		_, err = c.SetProgramClusterRoutes(ctx, config.Disabled, config.Enabled)
		Expect(err).NotTo(HaveOccurred())
		Eventually(c).WithTimeout(machine.Wait(60*time.Second)).WithPolling(50*time.Millisecond).
			Should(judge.HaveRemoteBlockRoutes().ProgrammedBy(judge.ByBIRD).Only(), "after Felix=Disabled, BGP=Enabled: BIRD's routes only")
		Eventually(flowsDelivering(probes)).WithPolling(50 * time.Millisecond).Should(Succeed())

		rep, err := probes.Stop()
		Expect(err).NotTo(HaveOccurred())
		res := c.Result("real Calico: converge and live change on noencap", rep)
		res.AddProbeFigures(rep)
		report("real Calico (calico flavour)", strings.Join(versions, "\n")+"\n"+harness.GapTable(rep), res)
	})
})
