package results

// Figures most scenarios record the same way. A spec adds its own claim's
// figures beside them.

import (
	"fmt"

	"github.com/birdcage/birdcage/instrument/probe/report"
)

// AddProbeFigures records a probe report's totals in a result: what was
// lost, the longest gap and the sender's own pause inside it, late and
// duplicated probes, the deepest reordering.
func (s *ScenarioResult) AddProbeFigures(rep *report.Report) {
	if s.Figures == nil {
		s.Figures = map[string]float64{}
	}
	s.Figures["lostProbes"] = float64(rep.Total.Lost)
	s.Figures["longestProbeGapMs"] = rep.Total.LongestGapMs
	s.Figures["senderPauseInGapMs"] = rep.Total.SenderPauseInGapMs
	s.Figures["lateProbes"] = float64(rep.Total.Late)
	s.Figures["duplicateProbes"] = float64(rep.Total.Duplicates)
	s.Figures["maxReorderDepth"] = float64(rep.Total.MaxReorderDepth)
	s.Notes = append(s.Notes, fmt.Sprintf("probe interval %.1f ms", 1000/float64(rep.Rate)))
	s.RecordFigureKinds()
}
