package harness

import "github.com/birdcage/birdcage/harness/results"

// Sweep and SweepPoint are the results model's (harness/results): a figure
// measured over a timing-model knob, with its fit.
type (
	Sweep      = results.Sweep
	SweepPoint = results.SweepPoint
)

// NewSweep starts a sweep over knob, measured in unit (results.NewSweep).
func NewSweep(knob, unit string) *Sweep { return results.NewSweep(knob, unit) }
