package scenarios_test

// The suite's entry. Its machinery (configuration, clusters, rows,
// keep-on-fail, captures, progress, JUnit) is scenarios/scenariotest; the
// spec files hold the claims.

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestScenarios(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "birdcage scenarios")
}
