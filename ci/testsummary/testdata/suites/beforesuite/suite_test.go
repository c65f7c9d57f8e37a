// A suite whose BeforeSuite fails: no spec fails, every spec is skipped.
package beforesuite

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSuite(t *testing.T) { RegisterFailHandler(Fail); RunSpecs(t, "beforesuite") }

var _ = BeforeSuite(func() { Expect(1).To(Equal(2), "the suite's setup fails") })

var _ = It("would pass", func() {})
