// A suite whose ReportAfterEach fails after a spec that passed (as
// scenarios/suite_test.go's results writer does when it cannot write a row).
package reportaftereach

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSuite(t *testing.T) { RegisterFailHandler(Fail); RunSpecs(t, "reportaftereach") }

var _ = ReportAfterEach(func(SpecReport) { Fail("could not write the results row") })

var _ = It("passes", func() {})
