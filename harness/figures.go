package harness

// Figures most scenarios record the same way: a probe report's totals and
// the programmer's restarts. A spec adds its own claim's figures beside them.

import (
	"fmt"
	"time"

	"github.com/birdcage/birdcage/harness/probe"
	"github.com/birdcage/birdcage/harness/supervisor"
)

// AddProbeFigures records a probe report's totals in a result: what was
// lost, the longest gap and the sender's own pause inside it, late and
// duplicated probes, the deepest reordering.
func (s *ScenarioResult) AddProbeFigures(rep *probe.Report) {
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
}

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
			restarts = append(restarts, durationMs(r.Duration()))
			if r.ProgrammedMono != 0 {
				toProgram = append(toProgram, durationMs(r.ToFirstProgram()))
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
}

func durationMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
