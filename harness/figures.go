package harness

// Figures most scenarios record the same way: the programmer's restarts
// (here) and a probe report's totals (results.ScenarioResult.AddProbeFigures).
// A spec adds its own claim's figures beside them.

import (
	"github.com/birdcage/birdcage/harness/supervisor"
	"github.com/birdcage/birdcage/internal/monoclock"
)

// AddRestartFigures records the programmers' configuration-change restarts
// whose replacement synced: how long each restart took and how long the
// replacement took to its first programming pass (samples and maxima).
func (c *Cluster) AddRestartFigures(s *ScenarioResult) {
	var restarts, toProgram []float64
	for _, n := range c.Nodes() {
		for _, r := range n.Programmer.Restarts() {
			if r.Reason != supervisor.ReasonConfigChanged || r.SyncedMono == 0 {
				continue
			}
			restarts = append(restarts, monoclock.Ms(int64(r.Duration())))
			if r.ProgrammedMono != 0 {
				toProgram = append(toProgram, monoclock.Ms(int64(r.ToFirstProgram())))
			}
		}
	}
	if s.Figures == nil {
		s.Figures = map[string]float64{}
	}
	if s.Samples == nil {
		s.Samples = map[string]Stats{}
	}
	s.Samples["programmerRestartMs"] = Summarize(restarts)
	s.Samples["programmerToFirstProgramMs"] = Summarize(toProgram)
	s.Figures["programmerRestartMsMax"] = s.Samples["programmerRestartMs"].Max
	s.Figures["programmerToFirstProgramMsMax"] = s.Samples["programmerToFirstProgramMs"].Max
	s.RecordFigureKinds()
}
