// A suite with one failing spec.
package specfail

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSuite(t *testing.T) { RegisterFailHandler(Fail); RunSpecs(t, "specfail") }

var _ = It("passes", func() {})
var _ = It("fails", func() { Expect(1).To(Equal(2), "node-2 lost 5 probes") })
