// A suite whose label filter selects nothing, run WITHOUT
// -ginkgo.fail-on-empty: go test passes, and the stage must fail anyway
// (ci/testsummary's recorded stream "emptyselection").
package emptyselection

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSuite(t *testing.T) { RegisterFailHandler(Fail); RunSpecs(t, "emptyselection") }

var _ = It("is filtered out", Label("never-selected"), func() {})
