package scenarios_test

// Claim (design §4, "Upgrading the code"), held against a lab birdcage did
// not build: the headline upgrade (headlineUpgrade, upgrade_test.go), the
// same spec body the built-in target runs, on a lab as a harness.Target.
// The lab's own commands do the upgrade; birdcage only watches. At the end
// the node is moved back (old BIRD TERMed) and the lab must be exactly as
// found.
//
// Needs an IPIP lab: the hand-made labs build one (tunl0 the kernel's, or
// where the kernel has no ipip the eBPF emulation), a manifest's lab must
// already run 3.31 on an IPIP pool (the guard says so if not) and give the
// upgrade and birdc actions.

import (
	"fmt"
	"syscall"

	. "github.com/onsi/ginkgo/v2"

	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/harness/lab"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

var _ = func() bool {
	if scenariotest.Config.Lab == "" {
		return false
	}
	Describe("Upgrade handover on IPIP against a lab, node by node", Label("lab", "ipip", "upgrade", "timing"), func() {
		DescribeTable("the upgraded node loses no outbound probe while the programmer takes over BIRD's tunnel routes, and the lab is left as found",
			func(ctx SpecContext, sig syscall.Signal) {
				const upgraded = "node-2"
				// Every node on 3.31 (headlineFrom): BIRD owns the IPIP
				// routes, at the programmer's metric 0. attachLab puts the
				// node back (old BIRD TERMed) and compares the lab with
				// what it found when the spec ends.
				l, _ := attachLab(ctx, labStart{from: ownership{owner: judge.ByBIRD}, ipip: true, release: headlineFrom, upgraded: upgraded},
					lab.ActionUpgrade, lab.ActionBirdc)
				headlineUpgrade(ctx, l, upgraded, sig, fmt.Sprintf("upgrade handover IPIP (%s) on lab %s", sig, l.M.Name))
			},
			// The VM runs the kill (label conformance) against the kind-shaped
			// lab on the kernel's ipip (ci/test); both run natively.
			Entry("old BIRD SIGKILLed, as when the pod is deleted", Label("conformance"), syscall.SIGKILL),
			Entry("old BIRD SIGTERMed, so it sends a Cease", syscall.SIGTERM),
		)
	})
	return true
}()
