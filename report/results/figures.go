package results

// Recording figures: every figure is written with its kind, so the kind
// travels with the figure into the results file (ScenarioResult.FigureKinds)
// and compare judges it by what it measures, never by how it is named.
// Figures most scenarios record the same way sit here too; a spec adds its
// own claim's figures beside them.

import (
	"fmt"
	"net/netip"

	"github.com/birdcage/birdcage/instrument/probe/report"
)

// Figure records the figure name as v, of the given kind (as
// testing.B.ReportMetric records a metric with its unit). It panics on a
// kind that is not one of FigureKinds: that is a bug in the spec, not in
// the system under test.
func (s *ScenarioResult) Figure(name string, v float64, kind FigureKind) {
	if !kind.Valid() {
		panic(fmt.Sprintf("results: figure %s recorded with kind %q; want one of %v", name, kind, FigureKinds))
	}
	if s.Figures == nil {
		s.Figures = map[string]float64{}
	}
	if s.FigureKinds == nil {
		s.FigureKinds = map[string]FigureKind{}
	}
	s.Figures[name] = v
	s.FigureKinds[name] = kind
}

// AddFigure adds delta to the figure name (0 when not yet recorded), of the
// given kind: a count or a loss summed over flows, nodes or steps.
func (s *ScenarioResult) AddFigure(name string, delta float64, kind FigureKind) {
	s.Figure(name, s.Figures[name]+delta, kind)
}

// MaxFigure raises the figure name to v if v is larger (or records it):
// the longest of several windows or gaps.
func (s *ScenarioResult) MaxFigure(name string, v float64, kind FigureKind) {
	if old, ok := s.Figures[name]; ok && old >= v {
		s.Figure(name, old, kind)
		return
	}
	s.Figure(name, v, kind)
}

// AddProbeFigures records a probe report's totals in a result: what was
// lost, the longest gap and the sender's own pause inside it, late and
// duplicated probes, the deepest reordering.
func (s *ScenarioResult) AddProbeFigures(rep *report.Report) {
	s.Figure("lostProbes", float64(rep.Total.Lost), KindLoss)
	s.Figure("longestProbeGapMs", rep.Total.LongestGapMs, KindGap)
	// The sender's own stall inside the gap, not the network's.
	s.Figure("senderPauseInGapMs", rep.Total.SenderPauseInGapMs, KindMachine)
	// Reordering follows a path change: remarked, not judged.
	s.Figure("lateProbes", float64(rep.Total.Late), KindSize)
	s.Figure("duplicateProbes", float64(rep.Total.Duplicates), KindCount)
	s.Figure("maxReorderDepth", float64(rep.Total.MaxReorderDepth), KindSize)
	s.Notes = append(s.Notes, fmt.Sprintf("probe interval %.1f ms", 1000/float64(rep.Rate)))
}

// AddNodeLossFigures records the probes lost on the flows leaving one node
// (lostOutboundUpgradedNode) and entering it (lostInboundUpgradedNode),
// both recorded when 0: the node is the one an upgrade or a change acted
// on, and ofNode says whether an address is one of its.
func (s *ScenarioResult) AddNodeLossFigures(rep *report.Report, ofNode func(netip.Addr) bool) {
	s.Figure("lostOutboundUpgradedNode", 0, KindLoss)
	s.Figure("lostInboundUpgradedNode", 0, KindLoss)
	for _, f := range rep.Flows {
		if ofNode(f.SrcAddr) {
			s.AddFigure("lostOutboundUpgradedNode", float64(f.Lost), KindLoss)
		}
		if ofNode(f.DstAddr) {
			s.AddFigure("lostInboundUpgradedNode", float64(f.Lost), KindLoss)
		}
	}
}
