// A suite whose label filter selects nothing: with -ginkgo.fail-on-empty the
// run must fail (ci/testsummary's recorded stream "failonempty").
package failonempty

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSuite(t *testing.T) { RegisterFailHandler(Fail); RunSpecs(t, "failonempty") }

var _ = It("is filtered out", Label("never-selected"), func() {})
