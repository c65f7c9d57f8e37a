// A suite where one spec skips in its body and one Go test skips.
package skipped

import (
	"fmt"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
)

func TestGoSkip(t *testing.T) { t.Skip("the kernel has no ipip") }

func TestSuite(t *testing.T) { RegisterFailHandler(Fail); RunSpecs(t, "skipped") }

var _ = ReportAfterEach(func(r SpecReport) {
	if r.State == types.SpecStateSkipped && r.Failure.Message == "" {
		return
	}
	// The same two lines as scenarios/suite_test.go prints.
	fmt.Printf("[birdcage] spec %-7s %6.1fs  %s\n", r.State, r.RunTime.Seconds(), r.FullText())
	if r.State == types.SpecStateSkipped {
		fmt.Printf("[birdcage] spec skipped because: %s\n", r.Failure.Message)
	}
})

var _ = It("passes", func() {})
var _ = It("skips in its body", func() { Skip("BIRD release 1.6 is not installed") })
