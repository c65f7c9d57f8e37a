package scenarios_test

// Specs that exist only to test the suite's own machinery (the results
// rows written by the ReportAfterEach in scenariotest/rows.go), run by
// TestSuiteMachinery in selftest_test.go in a child process. They are
// registered only when BIRDCAGE_SELFTEST=fail is set, so an ordinary run of
// the suite, with any label filter, never sees them.

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/scenarios/scenariotest"
)

// selftestEnv, set to "fail", registers the self-test specs.
const selftestEnv = env.Selftest

// The self-test specs' messages, which the rows must carry.
const (
	selftestFailMsg     = "selftest: the claim fails on purpose after its figures were registered"
	selftestEarlyMsg    = "selftest: fails on purpose before registering anything"
	selftestSkipMsg     = "selftest: skipped on purpose"
	selftestTeardownMsg = "selftest: teardown fails on purpose"
)

var _ = func() bool {
	if scenariotest.Config.Selftest != "fail" {
		return false
	}
	Describe("Suite machinery self-test", Label("selftest"), func() {
		figures := func(name string) results.ScenarioResult {
			res := results.ScenarioResult{Name: name, Topology: "none"}
			res.Figure("answer", 42, results.KindSize)
			return res
		}
		It("passes after registering figures (positive control)", func() {
			scenariotest.Record("selftest pass", "figure\n", figures("selftest: passes"))
			Expect(1).To(Equal(1))
		})
		It("registers figures, then its claim fails", func() {
			scenariotest.Record("selftest fail", "figure\n", figures("selftest: registers then fails"))
			Expect(1).To(Equal(2), selftestFailMsg)
		})
		It("fails before registering figures", func() {
			Expect(1).To(Equal(2), selftestEarlyMsg)
			scenariotest.Record("selftest never reached", "", figures("selftest: never reached"))
		})
		It("is skipped", func() {
			Skip(selftestSkipMsg)
		})
		attempt := 0
		It("runs three times, a row each", MustPassRepeatedly(3), func() {
			attempt++
			res := results.ScenarioResult{Name: "selftest: repeated", Topology: "none"}
			res.Figure("attempt", float64(attempt), results.KindSize)
			scenariotest.Record("selftest repeated", "figure\n", res)
		})
		It("passes its body but fails in its teardown", func() {
			DeferCleanup(func() { Expect(1).To(Equal(2), selftestTeardownMsg) })
			scenariotest.Record("selftest teardown", "figure\n", figures("selftest: teardown fails"))
		})
	})
	return true
}()
