// A suite where every selected spec passes and one Go test passes: the
// positive control.
package passing

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestPlain(t *testing.T) {}

func TestSuite(t *testing.T) { RegisterFailHandler(Fail); RunSpecs(t, "passing") }

var _ = It("passes", func() { Expect(true).To(BeTrue()) })
