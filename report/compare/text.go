package compare

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/report/results"
)

// Text renders the comparison for people: per scenario its verdicts, every
// figure as base / new / delta with REGRESSION where it is one, the flows
// whose gap or loss moved, the budget, then the scenarios on one side only
// and the count of regressions.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "BASE %s (%s)\nNEW  %s (%s)\n", r.Base, r.BaseEnv, r.New, r.NewEnv)
	fmt.Fprintf(&b, "thresholds: %s\n", r.Thresholds)
	fmt.Fprintf(&b, "rule: a gated figure (%s) regresses when NEW's median is worse by more than its minimum effect (or, a bimodal figure, more of NEW's runs fell in its slow mode) AND its one-sided Mann–Whitney U test, Holm-adjusted over the scenario's gated figures, gives p < α %g (family-wise, per scenario); a count 0 in every BASE run is judged on any number of runs; other figures and flows are informational (~)%s\n", strings.Join(r.Gated, ", "), r.Alpha, minSamplesNote(r.MinSamples))
	for _, e := range r.EnvDiffers {
		fmt.Fprintf(&b, "warning: the runs differ in %s: figures may not be comparable\n", e)
	}
	for _, s := range r.Scenarios {
		mark := "ok        "
		switch {
		case s.Regression:
			mark = "REGRESSION"
		case len(s.Undecided) > 0:
			mark = "UNDECIDED "
		}
		fmt.Fprintf(&b, "\n%s  %s  [%s → %s]\n", mark, s.Name, s.BaseVerdict, s.NewVerdict)
		if len(s.BaseRuns)+len(s.NewRuns) > 0 {
			fmt.Fprintf(&b, "  repeated: %d runs in BASE, %d in NEW; medians [min–max]\n", len(s.BaseRuns), len(s.NewRuns))
		}
		for _, why := range s.Reasons {
			fmt.Fprintf(&b, "  ! %s\n", why)
		}
		if !s.Regression {
			for _, u := range s.Undecided {
				fmt.Fprintf(&b, "  ? %s\n", u)
			}
		}
		for _, i := range s.Informational {
			fmt.Fprintf(&b, "  ~ %s\n", i)
		}
		for _, rm := range s.Remarks {
			fmt.Fprintf(&b, "  note: %s\n", rm)
		}
		if len(s.Figures) > 0 {
			w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "  figure\tbase\tnew\tdelta\tp\t\tkind\t")
			for _, f := range s.Figures {
				fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f.Name, dist(f.Base, f.HasBase, f.BaseStats), dist(f.New, f.HasNew, f.NewStats), delta(f), pValue(f), regMark(f), kindName(f.Kind))
			}
			w.Flush()
		}
		if len(s.Flows) > 0 {
			w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "  flow\tgap ms base\tnew\tdelta\t\tlost base\tnew\tdelta\t\tdisruptions base→new\t")
			for _, f := range s.Flows {
				dis := "-"
				if f.DisruptionsMeasured {
					dis = fmt.Sprintf("%d → %d", f.BaseDisruptions, f.NewDisruptions)
				}
				fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", f.Flow,
					dist(f.Gap.Base, true, f.Gap.BaseStats), dist(f.Gap.New, true, f.Gap.NewStats), delta(f.Gap), regMark(f.Gap),
					dist(f.Lost.Base, true, f.Lost.BaseStats), dist(f.Lost.New, true, f.Lost.NewStats), delta(f.Lost), regMark(f.Lost), dis)
			}
			w.Flush()
		}
		if s.Budget != nil {
			verdict := "within budget"
			if len(s.OverBudget) > 0 {
				verdict = fmt.Sprintf("OVER BUDGET on %d limits", len(s.OverBudget))
			}
			fmt.Fprintf(&b, "  budget: %s: %s\n", s.Budget, verdict)
		}
	}
	if len(r.OnlyInBase) > 0 {
		fmt.Fprintf(&b, "\nonly in BASE (%d):\n", len(r.OnlyInBase))
		for _, n := range r.OnlyInBase {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	if len(r.OnlyInNew) > 0 {
		fmt.Fprintf(&b, "\nonly in NEW (%d):\n", len(r.OnlyInNew))
		for _, n := range r.OnlyInNew {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	if len(r.OneSided) > 0 {
		fmt.Fprintf(&b, "\none-sided regressions (%d):\n", len(r.OneSided))
		for _, o := range r.OneSided {
			fmt.Fprintf(&b, "  REGRESSION %s: %s\n", o.Name, o.Why)
		}
	}
	fmt.Fprintf(&b, "\n%d scenarios compared, %d regressed", len(r.Scenarios), r.Regressions)
	if r.Regressions > 0 {
		var names []string
		for _, s := range r.Scenarios {
			if s.Regression {
				names = append(names, s.Name)
			}
		}
		for _, o := range r.OneSided {
			names = append(names, o.Name)
		}
		fmt.Fprintf(&b, ": %s", strings.Join(names, "; "))
	}
	b.WriteString("\n")
	if r.Undecided > 0 {
		var names []string
		for _, s := range r.Scenarios {
			if len(s.Undecided) > 0 {
				names = append(names, s.Name)
			}
		}
		verdict := "not judged: run both sides with --repeat N (" + env.Repeat + ") or compare against a directory of runs; --min-samples makes this an error"
		if r.StrictSamples {
			verdict = "counted as regressions (--min-samples)"
		}
		fmt.Fprintf(&b, "not enough samples to judge: %d figures in %d scenarios moved past their minimum effect on too few runs (%s): %s\n",
			r.Undecided, len(names), verdict, strings.Join(names, "; "))
	}
	return b.String()
}

func minSamplesNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; at least %d runs a side (--min-samples)", n)
}

func (t Thresholds) String() string {
	var parts []string
	if t.MaxGapIncrease >= 0 {
		parts = append(parts, "gap +"+t.MaxGapIncrease.String())
	} else {
		parts = append(parts, "gap not judged")
	}
	if t.MaxLostIncrease >= 0 {
		parts = append(parts, fmt.Sprintf("lost +%d", t.MaxLostIncrease))
	} else {
		parts = append(parts, "lost not judged")
	}
	if t.MaxCountIncrease >= 0 {
		parts = append(parts, fmt.Sprintf("count +%d", t.MaxCountIncrease))
	} else {
		parts = append(parts, "count not judged")
	}
	if t.MaxRatio > 0 {
		parts = append(parts, fmt.Sprintf("ratio ×%g", t.MaxRatio))
	}
	return strings.Join(parts, ", ")
}

func side(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmtNum(v)
}

// dist is a side's value, or for a repeated scenario its median with the
// range of its runs.
func dist(v float64, ok bool, st *results.Stats) string {
	if !ok || st == nil || st.N < 2 {
		return side(v, ok)
	}
	return fmt.Sprintf("%s [%s–%s]", fmtNum(st.Median), fmtNum(st.Min), fmtNum(st.Max))
}

func delta(f FigureDiff) string {
	if !f.HasBase || !f.HasNew {
		return ""
	}
	if f.Delta == 0 {
		return "0"
	}
	return fmt.Sprintf("%+g", round(f.Delta))
}

func regMark(f FigureDiff) string {
	switch {
	case f.Regression:
		return "REGRESSION"
	case f.Undecided:
		return "not enough samples"
	case f.Gated:
		return "gated"
	case f.Informational:
		return "~ worse"
	}
	return ""
}

// pValue is the figure's one-sided test p (the slow mode's Fisher p for a
// bimodal figure), with the Holm-adjusted p of a gated one; else "-".
func pValue(f FigureDiff) string {
	if !f.Tested {
		return "-"
	}
	p := fmt.Sprintf("%.3g", f.P)
	if f.SlowMode != nil {
		p += fmt.Sprintf(" (slow mode %d→%d, Fisher %.3g)", f.SlowMode.Base, f.SlowMode.New, f.SlowMode.P)
	}
	if f.Gated {
		p += fmt.Sprintf(" adj %.3g", f.AdjustedP)
	}
	return p
}
