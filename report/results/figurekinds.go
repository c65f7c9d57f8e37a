package results

import (
	"fmt"
	"sort"
)

// FigureKind is what a figure measures, which decides how `birdcage
// compare` judges it. A spec records each figure with its kind
// (ScenarioResult.Figure); the row carries the kinds
// (ScenarioResult.FigureKinds) so the judgement never depends on how a
// figure happens to be named.
type FigureKind string

const (
	// KindGap: milliseconds without delivery or without a route. Worse is
	// longer; judged by the gap threshold (and the ratio).
	KindGap FigureKind = "gap"
	// KindLoss: probes lost. Worse is more; judged by the loss threshold
	// (and the ratio).
	KindLoss FigureKind = "loss"
	// KindCount: events that are bad when they grow (deletes of remote
	// blocks, prefixes with two routes, refused writes, flaps, steps with
	// a peer without a route). Judged by the count threshold (default: any
	// increase) and the ratio.
	KindCount FigureKind = "count"
	// KindDuration: an observed time that is not a gap: how long a spec
	// watched, a convergence or reaction time, a rollout. Judged by the
	// ratio only, when one is given.
	KindDuration FigureKind = "duration"
	// KindSize: how many things were checked, probed or configured, and
	// the settings and fitted parameters a spec reports. Neutral: never
	// judged (a difference is a remark).
	KindSize FigureKind = "size"
	// KindMachine: the platform's own noise or footprint (platform loss
	// on control flows, the sender's own pauses, RSS, CPU, memory, kernel
	// drops). Never judged (a difference is a remark).
	KindMachine FigureKind = "machine"
)

// FigureKinds lists every kind.
var FigureKinds = []FigureKind{KindGap, KindLoss, KindCount, KindDuration, KindSize, KindMachine}

// Valid says whether k is one of FigureKinds.
func (k FigureKind) Valid() bool {
	for _, x := range FigureKinds {
		if k == x {
			return true
		}
	}
	return false
}

// MarkUndeclaredFigures gives every figure written into Figures without
// a kind (not through Figure, AddFigure or MaxFigure: a row built by hand)
// the kind "" and a note that
// compare does not judge it. The results writer calls it on every row, so
// such a figure is visible in the report rather than silently unjudged.
func (s *ScenarioResult) MarkUndeclaredFigures() {
	if len(s.Figures) == 0 {
		return
	}
	if s.FigureKinds == nil {
		s.FigureKinds = map[string]FigureKind{}
	}
	names := make([]string, 0, len(s.Figures))
	for name := range s.Figures {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if s.FigureKinds[name].Valid() {
			continue
		}
		s.FigureKinds[name] = ""
		note := fmt.Sprintf("figure %s has no declared kind: compare does not judge it", name)
		if !hasNote(s.Notes, note) {
			s.Notes = append(s.Notes, note)
		}
	}
}

func hasNote(notes []string, n string) bool {
	for _, x := range notes {
		if x == n {
			return true
		}
	}
	return false
}
