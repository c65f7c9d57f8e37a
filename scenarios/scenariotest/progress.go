package scenariotest

// Progress lines for `birdcage run` (which sets BIRDCAGE_PROGRESS=1): which
// spec started, and once a second while a cluster is up, its probes sent
// and lost so far. Off under plain go test, whose output stays as it was.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"

	"github.com/birdcage/birdcage/harness"
)

// progressCluster is the running spec's cluster, for the progress ticker
// (another goroutine than the spec's).
var progressCluster atomic.Pointer[harness.Cluster]

var progressOn = Config.Progress

var startProgressTicker sync.Once

var _ = BeforeEach(func() {
	if !progressOn {
		return
	}
	fmt.Printf("[birdcage] progress start %s\n", CurrentSpecReport().FullText())
	// The suite has one BeforeSuite (suite.go); the ticker starts with
	// the first spec and ends with the process.
	startProgressTicker.Do(func() { go progressTicker() })
})

func progressTicker() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range tick.C {
		if c := progressCluster.Load(); c != nil {
			if sent, lost, flows := c.Measure().ProbeProgress(); flows > 0 {
				fmt.Printf("[birdcage] progress probes sent=%d lost=%d flows=%d\n", sent, lost, flows)
			}
		}
	}
}
