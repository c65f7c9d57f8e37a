package scenarios_test

// The kernel protocol each owner's routes carry, by the design's numbers:
// handovers (judge.Handovers) are read between these.

import (
	"time"

	"github.com/birdcage/birdcage/harness/judge"
	"github.com/birdcage/birdcage/internal/kroute"
)

func protoOf(o judge.Owner) kroute.Protocol {
	if o == judge.ByBIRD {
		return kroute.ProtoBIRD
	}
	return designProgrammerProtocol
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
