package compare

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/birdcage/birdcage/internal/stattest"
	"github.com/birdcage/birdcage/report/results"
)

// Thresholds say how much worse a figure may get before it is a
// regression. A figure regresses when it got worse by more than every
// threshold that applies to its kind (results.FigureKind, declared per
// figure in the results): with a gap increase of 20 ms and a ratio of 1.5,
// a gap must grow by more than 20 ms and to more than 1.5× its base.
// Durations (observed times that are not gaps) are judged by the ratio
// alone, and only when one is given; sizes and the machine's own figures
// are never judged.
type Thresholds struct {
	// MaxGapIncrease applies to gap figures (ms without delivery or
	// without a route) and to each flow's longest gap. Negative: not
	// judged.
	MaxGapIncrease time.Duration `json:"maxGapIncreaseNs"`
	// MaxLostIncrease applies to loss figures and to each flow's lost
	// count. Negative: not judged.
	MaxLostIncrease int64 `json:"maxLostIncrease"`
	// MaxCountIncrease applies to count figures (events that are bad when
	// they grow: deletes of remote blocks, prefixes with two routes,
	// refused writes, flaps). 0: any increase regresses. Negative: not
	// judged.
	MaxCountIncrease int64 `json:"maxCountIncrease"`
	// MaxRatio (> 1) is how many times its base a gap, loss, count or
	// duration may become; 0: not judged. A base of 0 has no ratio: the
	// absolute limits decide.
	MaxRatio float64 `json:"maxRatio,omitempty"`
}

// DefaultThresholds: a gap may grow by 20 ms (two 10 ms bins, well above
// the probe interval at 1 kHz), the loss by 20 probes, a count not at all;
// no ratio.
func DefaultThresholds() Thresholds {
	return Thresholds{MaxGapIncrease: 20 * time.Millisecond, MaxLostIncrease: 20, MaxCountIncrease: 0}
}

// KindOf is the by-name rule compare used before rows declared their
// figures' kinds, kept for such rows only: a name with "lost" is loss, one
// with "gap" or "window" a gap, anything else a duration (the ratio alone
// judges it). It misjudges figures (windowMs, a watch time, as a gap;
// platformLost…, machine noise, as loss; counts never), which is why rows
// now carry FigureKinds.
func KindOf(figure string) results.FigureKind {
	f := strings.ToLower(figure)
	switch {
	case strings.Contains(f, "lost"):
		return results.KindLoss
	case strings.Contains(f, "gap") || strings.Contains(f, "window"):
		return results.KindGap
	}
	return results.KindDuration
}

// figureKinds is how compareScenario judges the figures of one scenario's
// rows: by the kinds the rows declare (NEW's where both do), or, when no
// row on either side declares any (files written before kinds), by name.
type figureKinds struct {
	byName  bool
	base    map[string]results.FigureKind
	nw      map[string]results.FigureKind
	remarks []string
}

func kindsOf(bs, ns []results.ScenarioResult) *figureKinds {
	k := &figureKinds{base: map[string]results.FigureKind{}, nw: map[string]results.FigureKind{}}
	declared := false
	for _, side := range []struct {
		rs []results.ScenarioResult
		m  map[string]results.FigureKind
	}{{bs, k.base}, {ns, k.nw}} {
		for _, r := range side.rs {
			if r.FigureKinds != nil {
				declared = true
			}
			for n, kind := range r.FigureKinds {
				side.m[n] = kind
			}
		}
	}
	k.byName = !declared
	return k
}

// of is figure name's kind ("": undeclared, not judged).
func (k *figureKinds) of(name string) results.FigureKind {
	if k.byName {
		return KindOf(name)
	}
	nk, inNew := k.nw[name]
	bk, inBase := k.base[name]
	switch {
	case inNew && inBase && nk != bk:
		k.remarks = append(k.remarks, fmt.Sprintf("%s: kind %q in BASE, %q in NEW: judged as NEW's", name, bk, nk))
		return nk
	case inNew:
		return nk
	case inBase:
		return bk
	}
	return ""
}

// Options for Compare.
type Options struct {
	Thresholds Thresholds
	// Budgets judges NEW's flows; nil: each scenario's own budget (the
	// one its result carries), if any.
	Budgets *Budgets
	// Alpha is the family-wise significance of a scenario's gated figures:
	// their tests' p-values are Holm-adjusted together and a gated figure
	// regresses only when its adjusted p is below Alpha, so one scenario
	// comparison of two runs of one build regresses by chance at most
	// Alpha of the time; 0: DefaultAlpha.
	Alpha float64
	// Gated names the figures that can regress by a statistical test (see
	// DefaultGated); nil: DefaultGated. Every other judged figure, and
	// every flow's gap and loss, is informational: its test is printed,
	// never a regression. Counts that must stay 0 and the verdict are
	// judged whatever this says.
	Gated []string
	// MinSamples is the fewest runs on each side a noisy figure is judged
	// on (0: as few as the rank test can reach Alpha with). StrictSamples
	// turns a figure that could not be judged for want of samples into a
	// regression instead of a counted note (`compare --min-samples`).
	MinSamples    int
	StrictSamples bool
	// FailOnFail: a scenario that failed in BASE and fails again in NEW
	// regresses (the claim is still broken); without it that is a remark.
	FailOnFail bool
	// Allow names scenarios (their title or their spec text) whose absence
	// from NEW, or skip in NEW, is a remark, not a regression: a scenario
	// retired on purpose, a skip that is expected in NEW's environment. A
	// failure is never allowed; figures and budgets are judged all the
	// same.
	Allow []string
}

// DefaultAlpha is the family-wise significance compare judges each
// scenario's gated figures at unless told: at most one false alarm in 100
// scenario comparisons of one build, the gate's stated target. With the
// two default gated figures Holm asks α/2 = 0.005 of the smaller p; the
// one-sided rank test reaches it with 5 runs a side (1/252 ≈ 0.0040) and
// not with 4 (1/70).
const DefaultAlpha = 0.01

// DefaultGated are the figures every scenario family is gated on: what the
// dataplane did to the claim "no probe lost, no route missing" — the
// probes lost (counted at the receiver's eBPF counters, whatever the
// sender's pace) and the longest window the route timeline saw a node
// without a route. Figures that carry the harness's own overhead (the
// longest probe gap, which includes the sender's stalls; durations; each
// flow's gap) are informational. Two figures keep Holm's first step at
// α/2, which 5 runs a side can reach.
var DefaultGated = []string{"lostProbes", "longestNoRouteWindowMs"}

func (o Options) alpha() float64 {
	if o.Alpha <= 0 {
		return DefaultAlpha
	}
	return o.Alpha
}

// AllGated, as Options.Gated, gates every judged figure and every flow's
// gap and loss (compare --gate all): the rule before figures were gated,
// with Holm over all of them, which 5 runs a side cannot pass (some 30
// tests share α).
var AllGated = []string{"*"}

func (o Options) gatedList() []string {
	if o.Gated == nil {
		return DefaultGated
	}
	return o.Gated
}

func (o Options) gated(name string) bool {
	g := o.Gated
	if g == nil {
		g = DefaultGated
	}
	for _, n := range g {
		if n == name || n == "*" {
			return true
		}
	}
	return false
}

func (o Options) allowed(rs ...results.ScenarioResult) bool {
	for _, r := range rs {
		for _, a := range o.Allow {
			if a == r.Name || a == r.Key() {
				return true
			}
		}
	}
	return false
}

// Report is the whole comparison.
type Report struct {
	Base    string          `json:"base"` // labels (file paths)
	New     string          `json:"new"`
	BaseEnv *results.RunEnv `json:"baseEnv,omitempty"`
	NewEnv  *results.RunEnv `json:"newEnv,omitempty"`
	// Scenarios present in both, in NEW's order.
	Scenarios []ScenarioDiff `json:"scenarios"`
	// OnlyInBase and OnlyInNew list scenarios present on one side only
	// (by title). A scenario missing from NEW regresses unless allowed;
	// one only in NEW regresses when it fails there.
	OnlyInBase []string `json:"onlyInBase,omitempty"`
	OnlyInNew  []string `json:"onlyInNew,omitempty"`
	// OneSided are the one-sided scenarios that regressed, with why.
	OneSided []OneSided `json:"oneSided,omitempty"`
	// Regressions counts regressed scenarios, one-sided ones included.
	Regressions int        `json:"regressions"`
	Thresholds  Thresholds `json:"thresholds"`
	// Alpha is the significance the tests were judged at; MinSamples the
	// fewest runs a side needed (0: what the test needs).
	Alpha      float64 `json:"alpha"`
	MinSamples int     `json:"minSamples,omitempty"`
	// Gated are the figures that could regress by a test (Options.Gated).
	Gated []string `json:"gated"`
	// StrictSamples: undecided figures were counted as regressions.
	StrictSamples bool `json:"strictSamples,omitempty"`
	// Undecided counts the figures (and flows' gaps and losses) that moved
	// past their minimum effect on too few samples to tell from noise:
	// "not enough samples to judge", never a silent pass.
	Undecided int `json:"undecided"`
	// EnvDiffers names what differs between the two runs' environments
	// (a TCG VM against native makes every figure incomparable).
	EnvDiffers []string `json:"envDiffers,omitempty"`
}

// OneSided is a scenario on one side only that regressed.
type OneSided struct {
	Name    string          `json:"name"`
	Side    string          `json:"side"` // "BASE" or "NEW": where it is
	Verdict results.Verdict `json:"verdict"`
	Why     string          `json:"why"`
}

// ScenarioDiff is one scenario on both sides.
type ScenarioDiff struct {
	Name string `json:"name"`
	// BaseIndex and NewIndex locate the scenario (its first run) in each
	// file's list; for a repeated scenario BaseRuns and NewRuns list every
	// run's index.
	BaseIndex   int                       `json:"baseIndex"`
	NewIndex    int                       `json:"newIndex"`
	BaseRuns    []int                     `json:"baseRuns,omitempty"`
	NewRuns     []int                     `json:"newRuns,omitempty"`
	BaseVerdict results.Verdict           `json:"baseVerdict"`
	NewVerdict  results.Verdict           `json:"newVerdict"`
	Figures     []FigureDiff              `json:"figures"`
	Flows       []FlowDiff                `json:"flows,omitempty"`
	Budget      *results.Budget           `json:"budget,omitempty"`
	OverBudget  []results.BudgetViolation `json:"overBudget,omitempty"`
	Regression  bool                      `json:"regression"`
	// Reasons say why it regressed, one line each.
	Reasons []string `json:"reasons,omitempty"`
	// Remarks are changes worth reading that are not regressions.
	Remarks []string `json:"remarks,omitempty"`
	// Undecided are the figures that could not be judged for want of
	// samples, each with why.
	Undecided []string `json:"undecided,omitempty"`
	// Informational are the figures that are not gated but moved past
	// their minimum effect with an unadjusted p below α: printed for the
	// reader (benchstat's "~" is the rest), never a regression.
	Informational []string `json:"informational,omitempty"`
	// Family is how many gated figures' tests the scenario's α was shared
	// among (Holm).
	Family int `json:"family,omitempty"`
}

// FigureDiff is one figure on both sides.
type FigureDiff struct {
	Name    string             `json:"name"`
	Kind    results.FigureKind `json:"kind"`
	Base    float64            `json:"base"`
	New     float64            `json:"new"`
	HasBase bool               `json:"hasBase"`
	HasNew  bool               `json:"hasNew"`
	Delta   float64            `json:"delta"`
	// Ratio is New/Base (0 when Base is 0).
	Ratio      float64 `json:"ratio,omitempty"`
	Regression bool    `json:"regression"`
	Why        string  `json:"why,omitempty"`
	// BaseStats and NewStats are the figure's distribution over a repeated
	// scenario's runs (Base and New are then the medians); absent for a
	// scenario that ran once on each side.
	BaseStats *results.Stats `json:"baseStats,omitempty"`
	NewStats  *results.Stats `json:"newStats,omitempty"`
	// Exact says the figure was judged as one that must stay 0 (a count
	// that was 0 in every BASE run), on any number of samples.
	Exact bool `json:"exact,omitempty"`
	// Test is the Mann–Whitney U test of NEW's runs against BASE's, when
	// the medians moved past the minimum effect and there were samples
	// enough to test.
	Test *stattest.MannWhitney `json:"test,omitempty"`
	// SlowMode is the bimodal figure's split, when its runs fall in two
	// modes (see slowModeOf).
	SlowMode *SlowMode `json:"slowMode,omitempty"`
	// Undecided: the medians moved past the minimum effect on fewer
	// samples than the test can tell from noise (Why says so).
	Undecided bool `json:"undecided,omitempty"`
	// Gated: the figure can regress by its test (Options.Gated); else it
	// is informational.
	Gated bool `json:"gated,omitempty"`
	// P is the one-sided p of the figure's test (did NEW get worse?):
	// Mann–Whitney's PGreater; Tested says there was one. AdjustedP is P after Holm's
	// adjustment over the scenario's gated figures.
	P         float64 `json:"p,omitempty"`
	AdjustedP float64 `json:"adjustedP,omitempty"`
	Tested    bool    `json:"tested,omitempty"`
	// Past: NEW's median is worse than BASE's by more than the kind's
	// minimum effect (effect says by how much).
	Past   bool `json:"past,omitempty"`
	effect string
	// Informational: not gated, and moved past its minimum effect with an
	// unadjusted p below α (Why says so); never a regression.
	Informational bool `json:"informational,omitempty"`
	nBase, nNew   int
}

// SlowMode is how many runs of a bimodal figure fell in its slow mode on
// each side, and Fisher's exact p of NEW having the larger share.
type SlowMode struct {
	// From is the slow mode's lowest value; Below the fast mode's highest.
	From  float64 `json:"from"`
	Below float64 `json:"below"`
	Base  int     `json:"base"`
	New   int     `json:"new"`
	P     float64 `json:"p"`
}

// FlowDiff is one probe flow's gap and loss on both sides.
type FlowDiff struct {
	Flow string     `json:"flow"`
	Gap  FigureDiff `json:"gap"`
	Lost FigureDiff `json:"lost"`
	// BaseDisruptions and NewDisruptions are the most distinct gaps any
	// one run saw (a repeated scenario's worst run).
	BaseDisruptions     int  `json:"baseDisruptions"`
	NewDisruptions      int  `json:"newDisruptions"`
	DisruptionsMeasured bool `json:"disruptionsMeasured"`
}

// flowGapName is how a flow's gap is named: its longest gap as the
// receiver saw it (informational: it includes the sender's own stalls).
const flowGapName = "longest gap ms"

// Compare compares new against base. Scenarios are paired by their key
// (results.ScenarioResult.Key: the spec's full text), never by the title a
// spec registers, which a spec that failed early never got to. A key that
// occurs more than once on a side (a repeated scenario, $BIRDCAGE_REPEAT)
// is compared as a distribution over all its runs on each side (see
// compareScenario), never run i against run i.
func Compare(baseName string, base *results.ResultsFile, newName string, nw *results.ResultsFile, o Options) *Report {
	r := &Report{Base: baseName, New: newName, BaseEnv: base.Env, NewEnv: nw.Env, Thresholds: o.Thresholds, Alpha: o.alpha(), MinSamples: o.MinSamples, StrictSamples: o.StrictSamples, Gated: o.gatedList()}
	r.EnvDiffers = envDiffers(base, nw)
	bruns, border := runsByKey(base.Scenarios)
	nruns, norder := runsByKey(nw.Scenarios)
	for _, k := range border {
		if _, ok := nruns[k]; ok {
			continue
		}
		bs := pick(base.Scenarios, bruns[k])
		name := titleOf(bs)
		r.OnlyInBase = append(r.OnlyInBase, name)
		if !o.allowed(bs...) {
			r.OneSided = append(r.OneSided, OneSided{Name: name, Side: "BASE", Verdict: verdictOf(bs),
				Why: fmt.Sprintf("in BASE (%s), missing from NEW: the claim was not checked", verdictOf(bs))})
		}
	}
	for _, k := range norder {
		ns := pick(nw.Scenarios, nruns[k])
		bi, ok := bruns[k]
		if !ok {
			name := titleOf(ns)
			r.OnlyInNew = append(r.OnlyInNew, name)
			if v := verdictOf(ns); v == results.VerdictFail && !o.allowed(ns...) {
				r.OneSided = append(r.OneSided, OneSided{Name: name, Side: "NEW", Verdict: v,
					Why: "only in NEW, and it fails there: " + firstLine(ns[0].Failure)})
			}
			continue
		}
		bs := pick(base.Scenarios, bi)
		d := compareScenario(bs, ns, o)
		// NEW's title, else BASE's: a NEW run that failed before
		// registering carries none.
		d.Name, d.BaseIndex, d.NewIndex = titleOf(append(append([]results.ScenarioResult{}, ns...), bs...)), bi[0], nruns[k][0]
		if len(bi) > 1 || len(nruns[k]) > 1 {
			d.BaseRuns, d.NewRuns = bi, nruns[k]
		}
		if d.Regression {
			r.Regressions++
		}
		r.Undecided += len(d.Undecided)
		r.Scenarios = append(r.Scenarios, d)
	}
	r.Regressions += len(r.OneSided)
	return r
}

// titleOf is a scenario's title for people: the one a run registered
// (runs that failed early carry only their spec text), else its key.
func titleOf(rs []results.ScenarioResult) string {
	for _, r := range rs {
		if r.Name != "" && r.Name != r.Spec {
			return r.Name
		}
	}
	return rs[0].Key()
}

// runsByKey is each scenario key's indices in rs, and the keys in order of
// first occurrence.
func runsByKey(rs []results.ScenarioResult) (map[string][]int, []string) {
	m := map[string][]int{}
	var order []string
	for i, s := range rs {
		k := s.Key()
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = append(m[k], i)
	}
	return m, order
}

func pick(rs []results.ScenarioResult, idx []int) []results.ScenarioResult {
	out := make([]results.ScenarioResult, len(idx))
	for i, j := range idx {
		out[i] = rs[j]
	}
	return out
}

func envDiffers(a, b *results.ResultsFile) []string {
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
		// The emulated tunl0 against the kernel's is the conformance
		// question itself (README), never a release's difference.
		if a.Env.Tunnel != "" && b.Env.Tunnel != "" && a.Env.Tunnel != b.Env.Tunnel {
			out = append(out, fmt.Sprintf("tunl0 %s vs %s", a.Env.Tunnel, b.Env.Tunnel))
		}
		if sa, sb := waitScale(a.Env), waitScale(b.Env); sa != sb {
			out = append(out, fmt.Sprintf("waits ×%g vs ×%g", sa, sb))
		}
	}
	return out
}

// waitScale is the run's timeout scale, 1 for files that predate it.
func waitScale(e *results.RunEnv) float64 {
	if e.TimeoutScale == 0 {
		return 1
	}
	return e.TimeoutScale
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// compareScenario compares one scenario's runs on each side (one run
// each unless it was repeated).
//
// The rule for figures, stated once (see judgeRuns and decide). A
// scenario's figures are of three sorts:
//   - gated (Options.Gated, DefaultGated: lost probes and the longest
//     no-route window): it regresses when NEW's median is worse than
//     BASE's by more than its kind's minimum effect (for a bimodal figure,
//     or when a larger share of NEW's runs fell in its slow mode) AND its
//     one-sided Mann–Whitney U test of NEW's runs against BASE's,
//     Holm-adjusted over the scenario's gated figures, is below α: the
//     scenario's family-wise false-alarm rate is α. A gated figure whose median moved past the minimum effect on
//     fewer runs than can reach α/m is "not enough samples to judge":
//     counted, never passed in silence.
//   - exact: a count that was 0 in every BASE run and grew regresses on
//     any number of runs, gated or not (no test: a count that must stay 0).
//   - informational: every other figure and every flow's gap and loss;
//     tested and printed (benchstat's "~"), never a regression.
//
// The verdict regresses when NEW failed where BASE passed: on one run a
// side, that run; repeated, when NEW failed in a larger share of its runs
// and either BASE never failed and NEW failed in most of its runs (a
// broken claim) or Fisher's one-sided test of the shares gives p < α; a
// minority of failing NEW runs that the test cannot tell from a flaky
// spec is "not enough samples to judge" (counted; --min-samples makes it
// a regression). Skipped runs judged nothing and do not count. A budget
// judges every NEW run.
func compareScenario(bs, ns []results.ScenarioResult, o Options) ScenarioDiff {
	b, n := bs[0], ns[0]
	repeated := len(bs) > 1 || len(ns) > 1
	d := ScenarioDiff{BaseVerdict: verdictOf(bs), NewVerdict: verdictOf(ns)}
	bf, bran, bt := failures(bs)
	nf, nran, nt := failures(ns)
	switch {
	case bran > 0 && nran > 0 && float64(nf)/float64(nran) > float64(bf)/float64(bran):
		if !repeated {
			d.Regression = true
			d.Reasons = append(d.Reasons, "passed in BASE, fails in NEW: "+firstLine(n.Failure))
			break
		}
		// A claim that held in every BASE run and now fails in most of
		// NEW's is broken: no test needed. A smaller share is a test of
		// the shares (Fisher, one-sided, at α): a spec that fails now
		// and then under load fails one run in five on either side, and
		// crying wolf on it is the false alarm the gate must not raise.
		p := stattest.FisherGreater(bf, bran, nf, nran)
		shares := fmt.Sprintf("failed in %d of %d runs in NEW, %d of %d in BASE (Fisher p=%.3g", nf, nran, bf, bran, p)
		switch {
		case bf == 0 && 2*nf > nran:
			d.Regression = true
			d.Reasons = append(d.Reasons, shares+"; most of NEW's runs): "+firstLine(ns[nt].Failure))
		case p < o.alpha():
			d.Regression = true
			d.Reasons = append(d.Reasons, fmt.Sprintf("%s < α %g): %s", shares, o.alpha(), firstLine(ns[nt].Failure)))
		default:
			why := fmt.Sprintf("verdict: not enough samples to judge a claim that failed in a minority of NEW's runs: %s ≥ α %g): %s", shares, o.alpha(), firstLine(ns[nt].Failure))
			if o.StrictSamples {
				d.Regression = true
				d.Reasons = append(d.Reasons, why+" (--min-samples)")
			}
			d.Undecided = append(d.Undecided, why)
		}
	case bran > 0 && nran == 0:
		// Every NEW run skipped: the claim BASE checked was not checked.
		why := fmt.Sprintf("%s in BASE, skipped in NEW: %s", d.BaseVerdict, firstLine(n.Failure))
		if o.allowed(ns...) {
			d.Remarks = append(d.Remarks, why+" (allowed)")
		} else {
			d.Regression = true
			d.Reasons = append(d.Reasons, why)
		}
	case bran == 0 && nf > 0:
		// BASE only skipped: NEW's failure has no base rate to beat, and
		// is a broken claim all the same.
		d.Regression = true
		d.Reasons = append(d.Reasons, "skipped in BASE, fails in NEW: "+firstLine(ns[nt].Failure))
	case o.FailOnFail && nf > 0 && bf > 0:
		d.Regression = true
		d.Reasons = append(d.Reasons, fmt.Sprintf("fails in BASE (%d of %d runs) and in NEW (%d of %d): %s", bf, len(bs), nf, len(ns), firstLine(ns[nt].Failure)))
	case repeated && nf < bf:
		d.Remarks = append(d.Remarks, fmt.Sprintf("failed in %d of %d runs in BASE, %d of %d in NEW", bf, len(bs), nf, len(ns)))
	case repeated && bf > 0:
		d.Remarks = append(d.Remarks, fmt.Sprintf("failed in %d of %d runs in BASE (%s), %d of %d in NEW", bf, len(bs), firstLine(bs[bt].Failure), nf, len(ns)))
	case d.BaseVerdict == results.VerdictFail && d.NewVerdict == results.VerdictFail:
		d.Remarks = append(d.Remarks, "fails in BASE and in NEW (--fail-on-fail makes this a regression): "+firstLine(ns[nt].Failure))
	case d.BaseVerdict == results.VerdictFail && d.NewVerdict == results.VerdictPass:
		d.Remarks = append(d.Remarks, "failed in BASE, passes in NEW")
	}
	if b.Tunnel != "" && n.Tunnel != "" && b.Tunnel != n.Tunnel {
		d.Remarks = append(d.Remarks, fmt.Sprintf("tunl0 %s in BASE, %s in NEW: a difference may be the tunnel's, not the release's", b.Tunnel, n.Tunnel))
	}
	if b.Probes != nil && n.Probes != nil && b.Probes.Rate != n.Probes.Rate {
		d.Remarks = append(d.Remarks, fmt.Sprintf("probe rate %d/s in BASE, %d/s in NEW: gaps are comparable, loss counts are not", b.Probes.Rate, n.Probes.Rate))
	}
	var names results.FigureNames
	for _, r := range append(append([]results.ScenarioResult{}, bs...), ns...) {
		names = results.AddFigureNames(names, r.Figures)
	}
	kinds := kindsOf(bs, ns)
	if kinds.byName && len(names) > 0 {
		d.Remarks = append(d.Remarks, "no row declares its figures' kinds (written before kinds existed): figures judged by name")
	}
	for _, name := range names.Sorted() {
		kind := kinds.of(name)
		f := judgeRuns(name, kind, figureSamples(bs, name), figureSamples(ns, name), o)
		f.Gated = o.gated(name) && judged(kind)
		if !judged(kind) && f.HasBase && f.HasNew && f.Delta != 0 {
			d.Remarks = append(d.Remarks, fmt.Sprintf("%s (%s) %s → %s: not judged", name, kindName(kind), fmtNum(f.Base), fmtNum(f.New)))
		}
		d.Figures = append(d.Figures, f)
	}
	d.Remarks = append(d.Remarks, kinds.remarks...)
	bflows, nflows := flowRuns(bs), flowRuns(ns)
	for _, flow := range nflows.order {
		bfr, ok := bflows.byFlow[flow]
		if !ok {
			continue
		}
		nfr := nflows.byFlow[flow]
		fd := FlowDiff{Flow: flow,
			Gap:                 judgeRuns(flowGapName, results.KindGap, bfr.gap, nfr.gap, o),
			Lost:                judgeRuns("lost", results.KindLoss, bfr.lost, nfr.lost, o),
			BaseDisruptions:     bfr.disruptions,
			NewDisruptions:      nfr.disruptions,
			DisruptionsMeasured: bfr.measured && nfr.measured,
		}
		fd.Gap.Gated, fd.Lost.Gated = o.gated("*"), o.gated("*")
		d.Flows = append(d.Flows, fd)
	}
	d.decide(o)
	budget := n.Budget
	if o.Budgets != nil {
		bb := o.Budgets.For(n.Name)
		budget = &bb
	}
	if budget != nil && !budget.IsZero() {
		d.Budget = budget
		for i, r := range ns {
			run := ""
			if repeated {
				run = fmt.Sprintf("run %d of %d: ", i+1, len(ns))
			}
			if r.Probes == nil {
				d.Regression = true
				d.Reasons = append(d.Reasons, run+"budget "+budget.String()+": NEW has no probe report to judge it on")
				continue
			}
			for _, v := range budget.Judge(r.Probes) {
				if repeated {
					v.Run = i + 1
				}
				d.OverBudget = append(d.OverBudget, v)
				d.Regression = true
				d.Reasons = append(d.Reasons, run+"over budget: "+v.String())
			}
		}
	}
	return d
}

// verdictOf is the verdict over runs: fail if any failed, else pass if any
// passed, else skip.
func verdictOf(rs []results.ScenarioResult) results.Verdict {
	v := results.VerdictSkip
	for _, r := range rs {
		switch r.VerdictOf() {
		case results.VerdictFail:
			return results.VerdictFail
		case results.VerdictPass:
			v = results.VerdictPass
		}
	}
	return v
}

// failures counts the failed runs and the runs that did not skip (a skip
// judged nothing), and gives the index of the first failure.
func failures(rs []results.ScenarioResult) (failed, ran, first int) {
	first = -1
	for i, r := range rs {
		switch r.VerdictOf() {
		case results.VerdictFail:
			if first < 0 {
				first = i
			}
			failed++
			ran++
		case results.VerdictPass:
			ran++
		}
	}
	return failed, ran, max(first, 0)
}

// figureSamples is the figure's value in every run that has it.
func figureSamples(rs []results.ScenarioResult, name string) []float64 {
	var out []float64
	for _, r := range rs {
		if v, ok := r.Figures[name]; ok {
			out = append(out, v)
		}
	}
	return out
}

// flowSamples is one flow's longest gap and loss in every run that probed it, and the most disruptions any
// of those runs saw.
type flowSamples struct {
	gap, lost   []float64
	disruptions int
	measured    bool
}

type flowSet struct {
	byFlow map[string]*flowSamples
	order  []string
}

func flowRuns(rs []results.ScenarioResult) flowSet {
	s := flowSet{byFlow: map[string]*flowSamples{}}
	for _, r := range rs {
		if r.Probes == nil {
			continue
		}
		for _, f := range r.Probes.Flows {
			fs, ok := s.byFlow[f.Flow]
			if !ok {
				fs = &flowSamples{measured: true}
				s.byFlow[f.Flow] = fs
				s.order = append(s.order, f.Flow)
			}
			// The longest gap as the receiver saw it. It is informational
			// (never gated): it carries the sender's own stalls
			// (senderPauseInGapMs), the harness's overhead, which a loaded
			// host shows as 30–90 ms on every flow with nothing lost. What
			// the dataplane did is judged by the probes lost and the route
			// timeline's windows (DefaultGated).
			fs.gap = append(fs.gap, f.LongestGapMs)
			fs.lost = append(fs.lost, float64(f.Lost))
			fs.disruptions = max(fs.disruptions, f.DisruptionCount)
			fs.measured = fs.measured && f.Delivery != nil
		}
	}
	return s
}

// note records a judged figure's outcome in the scenario's reasons or its
// undecided list.
func (d *ScenarioDiff) note(what string, f FigureDiff) {
	switch {
	case f.Regression:
		d.Regression = true
		d.Reasons = append(d.Reasons, what+": "+f.Why)
	case f.Undecided:
		d.Undecided = append(d.Undecided, what+": "+f.Why)
	case f.Informational:
		d.Informational = append(d.Informational, what+": "+f.Why)
	}
	if f.Regression && f.Undecided {
		d.Undecided = append(d.Undecided, what+": "+f.Why) // counted all the same
	}
}

// judgeRuns measures a figure over one or more runs per side: the
// medians (Base, New) and, with more than one run on a side, both
// distributions; whether NEW's median is worse by more than the kind's
// minimum effect (Past); for a count 0 in every BASE run that grew, the
// exact regression; else the figure's one-sided Mann–Whitney test (P) and,
// for a bimodal figure, its slow-mode split with Fisher's p. Whether
// a tested figure regresses is the scenario's business (decide), since
// its α is shared among the scenario's gated figures.
func judgeRuns(name string, kind results.FigureKind, bv, nv []float64, o Options) FigureDiff {
	bst, nst := results.Summarize(bv), results.Summarize(nv)
	f := judge(name, kind, bst.Median, bst.N > 0, nst.Median, nst.N > 0, o.Thresholds)
	f.nBase, f.nNew = bst.N, nst.N
	if bst.N > 1 || nst.N > 1 {
		if bst.N > 0 {
			f.BaseStats = &bst
		}
		if nst.N > 0 {
			f.NewStats = &nst
		}
	}
	// judge said whether the medians moved past the minimum effect; the
	// samples decide the rest.
	f.effect, f.Past = f.Why, f.Regression
	f.Regression, f.Why = false, ""
	if bst.N == 0 || nst.N == 0 || !judged(kind) {
		return f
	}
	if f.Past && kind == results.KindCount && bst.Max == 0 {
		// A count that must stay 0 and did in every BASE run: exact, no
		// test needed, on any number of runs.
		f.Exact, f.Regression = true, true
		f.Why = fmt.Sprintf("median %s; 0 in every BASE run (n=%d): a count that must stay 0", f.effect, bst.N)
		return f
	}
	if mw, err := stattest.MannWhitneyU(bv, nv); err == nil {
		f.Test = &mw
		f.P, f.Tested = mw.PGreater, true
	}
	// A bimodal figure's slow-mode share is its effect when the median did
	// not move; its test stays the rank test (one test a figure, so the
	// family's α is not spent twice), and Fisher's p is printed beside it.
	if sm := slowModeOf(kind, bv, nv, o.Thresholds); sm != nil && min(bst.N, nst.N) > 1 {
		sm.P = stattest.FisherGreater(sm.Base, bst.N, sm.New, nst.N)
		f.SlowMode = sm
	}
	return f
}

// decide judges a scenario's figures and flows once all are measured:
// the gated figures' p-values are Holm-adjusted together (the family,
// d.Family), so the scenario's chance of a false alarm stays at α; each
// figure is then decided (FigureDiff.decide) and noted.
func (d *ScenarioDiff) decide(o Options) {
	all := make([]*FigureDiff, 0, len(d.Figures)+2*len(d.Flows))
	for i := range d.Figures {
		all = append(all, &d.Figures[i])
	}
	for i := range d.Flows {
		all = append(all, &d.Flows[i].Gap, &d.Flows[i].Lost)
	}
	// The family: every gated figure measured on both sides. One that
	// could not be tested still counts: its share of α is spent either way.
	var family []*FigureDiff
	d.Family = 0
	for _, f := range all {
		if !f.Gated || f.Exact || !judged(f.Kind) || f.nBase == 0 || f.nNew == 0 {
			continue
		}
		d.Family++
		if f.Tested {
			family = append(family, f)
		}
	}
	ps := make([]float64, len(family))
	for i, f := range family {
		ps[i] = f.P
	}
	adj := stattest.Holm(append(ps, ones(d.Family-len(family))...))
	for i, f := range family {
		f.AdjustedP = adj[i]
	}
	for i := range d.Figures {
		d.Figures[i].decide(d.Family, o)
		d.note(d.Figures[i].Name, d.Figures[i])
	}
	for i := range d.Flows {
		fd := &d.Flows[i]
		for _, x := range []*FigureDiff{&fd.Gap, &fd.Lost} {
			x.decide(d.Family, o)
			if x.Informational {
				continue // marked in the flows' table; the list names figures
			}
			d.note("flow "+fd.Flow+" "+x.Name, *x)
		}
	}
}

func ones(n int) []float64 {
	out := make([]float64, max(n, 0))
	for i := range out {
		out[i] = 1
	}
	return out
}

// decide is the rule for one measured figure, m the scenario's family of
// gated figures. Exact: already a regression. Gated: a regression when its
// Holm-adjusted p is below α and either NEW's median moved past the
// minimum effect or, for a bimodal figure, the slow mode's share grew;
// a median past the minimum effect on fewer runs than can reach α/m is
// "not enough samples to judge". Not gated: informational, never a
// regression; noted when it moved past its minimum effect with an
// unadjusted p below α.
func (f *FigureDiff) decide(m int, o Options) {
	if f.Exact || !judged(f.Kind) || f.nBase == 0 || f.nNew == 0 {
		return
	}
	alpha := o.alpha()
	if !f.Gated {
		if f.Tested && (f.Past || f.SlowMode != nil) && f.P < alpha {
			f.Informational = true
			f.Why = fmt.Sprintf("~ informational, not gated: median %s, one-sided p=%.3g (n=%d vs %d)", orMedian(f), f.P, f.nBase, f.nNew)
		}
		return
	}
	m = max(m, 1)
	enough := min(f.nBase, f.nNew) >= o.MinSamples
	if f.Past && (!enough || !f.Tested || stattest.MinPGreater(f.nBase, f.nNew) >= alpha/float64(m)) {
		f.Undecided = true
		f.Why = fmt.Sprintf("not enough samples to judge: median %s on n=%d vs %d; a one-sided rank test at α %g shared by %d gated figures needs e.g. %d runs a side",
			f.effect, f.nBase, f.nNew, alpha, m, max(o.MinSamples, runsFor(alpha/float64(m))))
		if o.StrictSamples {
			f.Regression = true
			f.Why += " (--min-samples)"
		}
		return
	}
	if !f.Tested || f.AdjustedP >= alpha {
		return
	}
	slower := f.SlowMode != nil && f.SlowMode.New > f.SlowMode.Base
	if !f.Past && !slower {
		return
	}
	f.Regression = true
	var effect []string
	if f.Past {
		effect = append(effect, "median "+f.effect)
	}
	if slower {
		sm := f.SlowMode
		effect = append(effect, fmt.Sprintf("slow mode (≥ %s, the fast one ≤ %s) in %d of %d runs in NEW, %d of %d in BASE (Fisher p=%.3g)",
			fmtNum(sm.From), fmtNum(sm.Below), sm.New, f.nNew, sm.Base, f.nBase, sm.P))
	}
	f.Why = fmt.Sprintf("%s; Mann–Whitney p=%.3g one-sided, Holm-adjusted over %d gated figures %.3g < α %g (n=%d vs %d)",
		strings.Join(effect, "; "), f.P, m, f.AdjustedP, alpha, f.nBase, f.nNew)
}

// orMedian is the effect for a note: the median's move, else the medians.
func orMedian(f *FigureDiff) string {
	if f.effect != "" {
		return f.effect
	}
	return fmt.Sprintf("%s → %s", fmtNum(f.Base), fmtNum(f.New))
}

// runsFor is the fewest runs a side (equal on both) with which the
// one-sided rank test can reach alpha.
func runsFor(alpha float64) int {
	for n := 1; n < 100; n++ {
		if stattest.MinPGreater(n, n) < alpha {
			return n
		}
	}
	return 100
}

// slowModeOf finds a bimodal figure's two modes, the rule stated once:
// pool both sides' samples, sort them and split them at the widest step
// between neighbours; the figure is bimodal when that step is wider than
// the kind's minimum effect and more than twice as wide as either mode's
// own range (the live change on IPIP lost 0 probes in some runs and ~1100,
// one BIRD kernel scan later, in others). Figures without an absolute
// minimum effect (durations, a kind not judged) have no slow mode; nil
// when the samples are not bimodal.
func slowModeOf(kind results.FigureKind, bv, nv []float64, t Thresholds) *SlowMode {
	var limit float64
	switch kind {
	case results.KindGap:
		if t.MaxGapIncrease < 0 {
			return nil
		}
		limit = float64(t.MaxGapIncrease) / float64(time.Millisecond)
	case results.KindLoss:
		if t.MaxLostIncrease < 0 {
			return nil
		}
		limit = float64(t.MaxLostIncrease)
	case results.KindCount:
		if t.MaxCountIncrease < 0 {
			return nil
		}
		limit = float64(t.MaxCountIncrease)
	default:
		return nil
	}
	pool := append(append([]float64{}, bv...), nv...)
	if len(pool) < 2 {
		return nil
	}
	sort.Float64s(pool)
	split, step := 0, 0.0
	for i := 1; i < len(pool); i++ {
		if d := pool[i] - pool[i-1]; d > step {
			split, step = i, d
		}
	}
	if split == 0 {
		return nil
	}
	lowRange, highRange := pool[split-1]-pool[0], pool[len(pool)-1]-pool[split]
	if step <= limit || step <= 2*max(lowRange, highRange) {
		return nil
	}
	sm := &SlowMode{From: pool[split], Below: pool[split-1]}
	for _, v := range bv {
		if v >= sm.From {
			sm.Base++
		}
	}
	for _, v := range nv {
		if v >= sm.From {
			sm.New++
		}
	}
	sm.P = 1
	return sm
}

// judged says whether compare judges figures of kind at all: sizes, the
// machine's figures and undeclared ones never are.
func judged(kind results.FigureKind) bool {
	switch kind {
	case results.KindGap, results.KindLoss, results.KindCount, results.KindDuration:
		return true
	}
	return false
}

func kindName(k results.FigureKind) string {
	if k == "" {
		return "no declared kind"
	}
	return string(k)
}

// judge compares one figure by its kind. Worse is higher for every kind
// that is judged (gaps, losses, counts, durations).
func judge(name string, kind results.FigureKind, bv float64, hb bool, nv float64, hn bool, t Thresholds) FigureDiff {
	f := FigureDiff{Name: name, Kind: kind, Base: bv, New: nv, HasBase: hb, HasNew: hn}
	if !hb || !hn {
		return f
	}
	f.Delta = nv - bv
	if bv != 0 {
		f.Ratio = nv / bv
	}
	if f.Delta <= 0 || !judged(kind) {
		return f
	}
	var limits []string
	over := true
	limited := false
	switch kind {
	case results.KindGap:
		if t.MaxGapIncrease >= 0 {
			lim := float64(t.MaxGapIncrease) / float64(time.Millisecond)
			limited = true
			over = over && f.Delta > lim
			limits = append(limits, fmt.Sprintf("+%g ms allowed", lim))
		}
	case results.KindLoss:
		if t.MaxLostIncrease >= 0 {
			limited = true
			over = over && f.Delta > float64(t.MaxLostIncrease)
			limits = append(limits, fmt.Sprintf("+%d allowed", t.MaxLostIncrease))
		}
	case results.KindCount:
		if t.MaxCountIncrease >= 0 {
			limited = true
			over = over && f.Delta > float64(t.MaxCountIncrease)
			limits = append(limits, fmt.Sprintf("+%d allowed", t.MaxCountIncrease))
		}
	}
	if t.MaxRatio > 0 && bv != 0 {
		limited = true
		over = over && f.Ratio > t.MaxRatio
		limits = append(limits, fmt.Sprintf("×%g allowed", t.MaxRatio))
	}
	if limited && over {
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
