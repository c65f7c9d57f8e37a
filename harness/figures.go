package harness

// Figures most scenarios record the same way: the programmer's restarts
// (here) and a probe report's totals (results.ScenarioResult.AddProbeFigures).
// A spec adds its own claim's figures beside them.

import (
	"github.com/birdcage/birdcage/dataplane/supervisor"
	"github.com/birdcage/birdcage/internal/monoclock"
	"github.com/birdcage/birdcage/report/results"
)

// Measure reads what the cluster's processes did and cost, for a spec's
// figures and for the people watching a run: the programmers' restarts,
// confd's reactions and the handovers they made, the host's neighbour
// table, memory, probe progress, and the netlink route requests a node's
// processes send (TraceRoutes). It judges nothing (harness/judge does).
type Measure struct{ c *Cluster }

// Measure is the cluster's measuring side.
func (c *Cluster) Measure() *Measure { return &Measure{c} }

// AddRestartFigures records the programmers' configuration-change restarts
// whose replacement synced: how long each restart took and how long the
// replacement took to its first programming pass (samples and maxima).
func (m *Measure) AddRestartFigures(s *results.ScenarioResult) {
	var restarts, toProgram []float64
	for _, n := range m.c.Nodes() {
		if n.Programmer == nil {
			continue // a calico node: Felix's restarts are its own
		}
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
	if s.Samples == nil {
		s.Samples = map[string]results.Stats{}
	}
	s.Samples["programmerRestartMs"] = results.Summarize(restarts)
	s.Samples["programmerToFirstProgramMs"] = results.Summarize(toProgram)
	s.Figure("programmerRestartMsMax", s.Samples["programmerRestartMs"].Max, results.KindDuration)
	s.Figure("programmerToFirstProgramMsMax", s.Samples["programmerToFirstProgramMs"].Max, results.KindDuration)
}
