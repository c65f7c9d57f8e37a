package compare

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/birdcage/birdcage/harness"
)

// Thresholds say how much worse a figure may get before it is a
// regression. A figure regresses when it got worse by more than every
// threshold that applies to its kind: with a gap increase of 20 ms and a
// ratio of 1.5, a gap must grow by more than 20 ms and to more than 1.5×
// its base. Figures of no kind (counts, restart times) are judged by the
// ratio alone, and only when one is given.
type Thresholds struct {
	// MaxGapIncrease applies to gap figures (names with "gap" or
	// "window": ms without delivery or without a route) and to each
	// flow's longest gap. Negative: not judged.
	MaxGapIncrease time.Duration `json:"maxGapIncreaseNs"`
	// MaxLostIncrease applies to loss figures (names with "lost") and to
	// each flow's lost count. Negative: not judged.
	MaxLostIncrease int64 `json:"maxLostIncrease"`
	// MaxRatio (> 1) is how many times its base a figure may become; 0:
	// not judged. A base of 0 has no ratio: the absolute limits decide.
	MaxRatio float64 `json:"maxRatio,omitempty"`
}

// DefaultThresholds: a gap may grow by 20 ms (two 10 ms bins, well above
// the probe interval at 1 kHz), the loss by 20 probes; no ratio.
func DefaultThresholds() Thresholds {
	return Thresholds{MaxGapIncrease: 20 * time.Millisecond, MaxLostIncrease: 20}
}

// Kind is what a figure measures, which decides its threshold.
type Kind string

const (
	KindGap   Kind = "gap"
	KindLost  Kind = "lost"
	KindOther Kind = "other"
)

// KindOf classifies a figure by its name.
func KindOf(figure string) Kind {
	f := strings.ToLower(figure)
	switch {
	case strings.Contains(f, "lost"):
		return KindLost
	case strings.Contains(f, "gap") || strings.Contains(f, "window"):
		return KindGap
	}
	return KindOther
}

// Options for Compare.
type Options struct {
	Thresholds Thresholds
	// Budgets judges NEW's flows; nil: each scenario's own budget (the
	// one its result carries), if any.
	Budgets *Budgets
}

// Report is the whole comparison.
type Report struct {
	Base    string          `json:"base"` // labels (file paths)
	New     string          `json:"new"`
	BaseEnv *harness.RunEnv `json:"baseEnv,omitempty"`
	NewEnv  *harness.RunEnv `json:"newEnv,omitempty"`
	// Scenarios present in both, in NEW's order.
	Scenarios []ScenarioDiff `json:"scenarios"`
	// OnlyInBase and OnlyInNew list scenarios present on one side only.
	OnlyInBase []string `json:"onlyInBase,omitempty"`
	OnlyInNew  []string `json:"onlyInNew,omitempty"`
	// Regressions counts regressed scenarios.
	Regressions int        `json:"regressions"`
	Thresholds  Thresholds `json:"thresholds"`
	// EnvDiffers names what differs between the two runs' environments
	// (a TCG VM against native makes every figure incomparable).
	EnvDiffers []string `json:"envDiffers,omitempty"`
}

// ScenarioDiff is one scenario on both sides.
type ScenarioDiff struct {
	Name string `json:"name"`
	// BaseIndex and NewIndex locate the scenario in each file's list.
	BaseIndex   int                       `json:"baseIndex"`
	NewIndex    int                       `json:"newIndex"`
	BaseVerdict harness.Verdict           `json:"baseVerdict"`
	NewVerdict  harness.Verdict           `json:"newVerdict"`
	Figures     []FigureDiff              `json:"figures"`
	Flows       []FlowDiff                `json:"flows,omitempty"`
	Budget      *harness.Budget           `json:"budget,omitempty"`
	OverBudget  []harness.BudgetViolation `json:"overBudget,omitempty"`
	Regression  bool                      `json:"regression"`
	// Reasons say why it regressed, one line each.
	Reasons []string `json:"reasons,omitempty"`
	// Remarks are changes worth reading that are not regressions.
	Remarks []string `json:"remarks,omitempty"`
}

// FigureDiff is one figure on both sides.
type FigureDiff struct {
	Name    string  `json:"name"`
	Kind    Kind    `json:"kind"`
	Base    float64 `json:"base"`
	New     float64 `json:"new"`
	HasBase bool    `json:"hasBase"`
	HasNew  bool    `json:"hasNew"`
	Delta   float64 `json:"delta"`
	// Ratio is New/Base (0 when Base is 0).
	Ratio      float64 `json:"ratio,omitempty"`
	Regression bool    `json:"regression"`
	Why        string  `json:"why,omitempty"`
}

// FlowDiff is one probe flow's gap and loss on both sides.
type FlowDiff struct {
	Flow                string     `json:"flow"`
	Gap                 FigureDiff `json:"gap"`
	Lost                FigureDiff `json:"lost"`
	BaseDisruptions     int        `json:"baseDisruptions"`
	NewDisruptions      int        `json:"newDisruptions"`
	DisruptionsMeasured bool       `json:"disruptionsMeasured"`
}

// Compare compares new against base.
func Compare(baseName string, base *harness.ResultsFile, newName string, nw *harness.ResultsFile, o Options) *Report {
	r := &Report{Base: baseName, New: newName, BaseEnv: base.Env, NewEnv: nw.Env, Thresholds: o.Thresholds}
	r.EnvDiffers = envDiffers(base, nw)
	// Scenarios are matched by name; a name that occurs more than once (a
	// repeated scenario) pairs its i-th occurrence on each side.
	type key struct {
		name string
		i    int
	}
	index := func(rs []harness.ScenarioResult) (map[key]int, []key) {
		seen := map[string]int{}
		m := map[key]int{}
		var order []key
		for i, s := range rs {
			k := key{s.Name, seen[s.Name]}
			seen[s.Name]++
			m[k] = i
			order = append(order, k)
		}
		return m, order
	}
	bm, border := index(base.Scenarios)
	nm, norder := index(nw.Scenarios)
	label := func(k key) string {
		if k.i == 0 {
			return k.name
		}
		return fmt.Sprintf("%s (#%d)", k.name, k.i+1)
	}
	for _, k := range border {
		if _, ok := nm[k]; !ok {
			r.OnlyInBase = append(r.OnlyInBase, label(k))
		}
	}
	for _, k := range norder {
		bi, ok := bm[k]
		if !ok {
			r.OnlyInNew = append(r.OnlyInNew, label(k))
			continue
		}
		d := compareScenario(base.Scenarios[bi], nw.Scenarios[nm[k]], o)
		d.Name, d.BaseIndex, d.NewIndex = label(k), bi, nm[k]
		if d.Regression {
			r.Regressions++
		}
		r.Scenarios = append(r.Scenarios, d)
	}
	return r
}

func envDiffers(a, b *harness.ResultsFile) []string {
	var out []string
	if a.Kernel != b.Kernel {
		out = append(out, fmt.Sprintf("kernel %s vs %s", a.Kernel, b.Kernel))
	}
	if a.Env != nil && b.Env != nil {
		if a.Env.Where != b.Env.Where || a.Env.VMAccel != b.Env.VMAccel {
			out = append(out, fmt.Sprintf("where %s%s vs %s%s", a.Env.Where, paren(a.Env.VMAccel), b.Env.Where, paren(b.Env.VMAccel)))
		}
		if a.Env.ProbeRate != b.Env.ProbeRate {
			out = append(out, fmt.Sprintf("probe rate %d vs %d", a.Env.ProbeRate, b.Env.ProbeRate))
		}
		if a.Env.BIRDVersion != b.Env.BIRDVersion {
			out = append(out, fmt.Sprintf("BIRD %s vs %s", a.Env.BIRDVersion, b.Env.BIRDVersion))
		}
	}
	return out
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func compareScenario(b, n harness.ScenarioResult, o Options) ScenarioDiff {
	d := ScenarioDiff{BaseVerdict: b.VerdictOf(), NewVerdict: n.VerdictOf()}
	switch {
	case d.BaseVerdict == harness.VerdictPass && d.NewVerdict == harness.VerdictFail:
		d.Regression = true
		d.Reasons = append(d.Reasons, "passed in BASE, fails in NEW: "+firstLine(n.Failure))
	case d.BaseVerdict == harness.VerdictPass && d.NewVerdict == harness.VerdictSkip:
		d.Remarks = append(d.Remarks, "passed in BASE, skipped in NEW: "+firstLine(n.Failure))
	case d.BaseVerdict == harness.VerdictFail && d.NewVerdict == harness.VerdictPass:
		d.Remarks = append(d.Remarks, "failed in BASE, passes in NEW")
	}
	if b.Probes != nil && n.Probes != nil && b.Probes.Rate != n.Probes.Rate {
		d.Remarks = append(d.Remarks, fmt.Sprintf("probe rate %d/s in BASE, %d/s in NEW: gaps are comparable, loss counts are not", b.Probes.Rate, n.Probes.Rate))
	}
	for _, name := range harness.AddFigureNames(harness.AddFigureNames(nil, b.Figures), n.Figures).Sorted() {
		bv, hb := b.Figures[name]
		nv, hn := n.Figures[name]
		f := judge(name, KindOf(name), bv, hb, nv, hn, o.Thresholds)
		if f.Regression {
			d.Regression = true
			d.Reasons = append(d.Reasons, fmt.Sprintf("%s: %s", name, f.Why))
		}
		d.Figures = append(d.Figures, f)
	}
	if b.Probes != nil && n.Probes != nil {
		byFlow := map[string]int{}
		for i, f := range b.Probes.Flows {
			byFlow[f.Flow] = i
		}
		for _, nf := range n.Probes.Flows {
			i, ok := byFlow[nf.Flow]
			if !ok {
				continue
			}
			bf := b.Probes.Flows[i]
			fd := FlowDiff{Flow: nf.Flow,
				Gap:                 judge("longest gap ms", KindGap, bf.LongestGapMs, true, nf.LongestGapMs, true, o.Thresholds),
				Lost:                judge("lost", KindLost, float64(bf.Lost), true, float64(nf.Lost), true, o.Thresholds),
				BaseDisruptions:     bf.DisruptionCount,
				NewDisruptions:      nf.DisruptionCount,
				DisruptionsMeasured: bf.Delivery != nil && nf.Delivery != nil,
			}
			for _, x := range []FigureDiff{fd.Gap, fd.Lost} {
				if x.Regression {
					d.Regression = true
					d.Reasons = append(d.Reasons, fmt.Sprintf("flow %s %s: %s", nf.Flow, x.Name, x.Why))
				}
			}
			d.Flows = append(d.Flows, fd)
		}
	}
	budget := n.Budget
	if o.Budgets != nil {
		bb := o.Budgets.For(n.Name)
		budget = &bb
	}
	if budget != nil && !budget.IsZero() {
		d.Budget = budget
		if n.Probes == nil {
			d.Regression = true
			d.Reasons = append(d.Reasons, "budget "+budget.String()+": NEW has no probe report to judge it on")
		}
		d.OverBudget = budget.Judge(n.Probes)
		for _, v := range d.OverBudget {
			d.Regression = true
			d.Reasons = append(d.Reasons, "over budget: "+v.String())
		}
	}
	return d
}

// judge compares one figure. Worse is higher for every birdcage figure
// that has a threshold (gaps, losses, times).
func judge(name string, kind Kind, bv float64, hb bool, nv float64, hn bool, t Thresholds) FigureDiff {
	f := FigureDiff{Name: name, Kind: kind, Base: bv, New: nv, HasBase: hb, HasNew: hn}
	if !hb || !hn {
		return f
	}
	f.Delta = nv - bv
	if bv != 0 {
		f.Ratio = nv / bv
	}
	if f.Delta <= 0 {
		return f
	}
	var limits []string
	over := true
	judged := false
	switch kind {
	case KindGap:
		if t.MaxGapIncrease >= 0 {
			lim := float64(t.MaxGapIncrease) / float64(time.Millisecond)
			judged = true
			over = over && f.Delta > lim
			limits = append(limits, fmt.Sprintf("+%g ms allowed", lim))
		}
	case KindLost:
		if t.MaxLostIncrease >= 0 {
			judged = true
			over = over && f.Delta > float64(t.MaxLostIncrease)
			limits = append(limits, fmt.Sprintf("+%d allowed", t.MaxLostIncrease))
		}
	}
	if t.MaxRatio > 0 && bv != 0 {
		judged = true
		over = over && f.Ratio > t.MaxRatio
		limits = append(limits, fmt.Sprintf("×%g allowed", t.MaxRatio))
	}
	if judged && over {
		f.Regression = true
		f.Why = fmt.Sprintf("%s → %s (%+g", fmtNum(bv), fmtNum(nv), round(f.Delta))
		if f.Ratio != 0 {
			f.Why += fmt.Sprintf(", ×%.2f", f.Ratio)
		}
		f.Why += "; " + strings.Join(limits, ", ") + ")"
	}
	return f
}

func fmtNum(v float64) string { return fmt.Sprintf("%g", round(v)) }

func round(v float64) float64 { return math.Round(v*10) / 10 }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if s == "" {
		return "(no failure message)"
	}
	return s
}
