package scenarios_test

// The kernel protocol each owner's routes carry, by the design's numbers:
// handovers (harness.Handovers) are read between these.

import (
	"time"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/internal/kroute"
)

func protoOf(o harness.Owner) kroute.Protocol {
	if o == harness.ByBIRD {
		return kroute.ProtoBIRD
	}
	return designProgrammerProtocol
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
