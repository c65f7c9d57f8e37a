package scenariotest

// Debugging a failure: with $BIRDCAGE_KEEP_ON_FAIL=1 (`birdcage run
// --keep-on-fail`) the first failed spec's cluster is left up instead of
// torn down, and the suite prints how to get in. Later failures are torn
// down as usual (one kept cluster is what a person can look at; more would
// pile up namespaces and BIRDs for the rest of the suite), saying which
// run is already kept.

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"

	"github.com/birdcage/birdcage/harness"
)

// keptRun is the run ID of the cluster kept so far, if any.
var keptRun string

// keepIfFailed keeps c when the running spec failed and keeping was asked
// for; it reports whether it did (the caller then must not stop c).
func keepIfFailed(c *harness.Cluster) bool {
	if !CurrentSpecReport().Failed() {
		return false
	}
	if !Config.KeepOnFail {
		return false
	}
	if keptRun != "" {
		fmt.Printf("[birdcage] kept: not keeping run %s of %q: run %s is kept already\n", c.Run.ID, CurrentSpecReport().FullText(), keptRun)
		return false
	}
	lines, err := c.Keep()
	if err != nil {
		// Half kept is worse than gone: tear it down and say why.
		fmt.Printf("[birdcage] kept: could not keep run %s: %v; tearing it down\n", c.Run.ID, err)
		return false
	}
	keptRun = c.Run.ID
	fmt.Printf("[birdcage] kept: the cluster of the failed spec %q\n", CurrentSpecReport().FullText())
	for _, l := range lines {
		fmt.Println("[birdcage] kept: " + l)
	}
	AddReportEntry("kept cluster", strings.Join(lines, "\n"))
	return true
}
