package compare

// Holds the upgrade gate in place: a figure regresses only past every
// threshold of its kind, a pass that turns into a failure is a regression
// whatever the figures say, per-flow gaps and losses are judged like the
// totals, a budget judges NEW's flows, and a scenario missing from NEW is a
// regression (a claim nobody checked), not a line in a list.

import (
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/instrument/probe/report"
	"github.com/birdcage/birdcage/report/results"
)

func scen(name string, v results.Verdict, figs map[string]float64) results.ScenarioResult {
	return results.ScenarioResult{Name: name, Verdict: v, Passed: v == results.VerdictPass, Figures: figs}
}

// The by-name rule, now only the fallback for rows without FigureKinds
// (its "lost" and "other" kinds are results' loss and duration).
func TestKindOf(t *testing.T) {
	for name, want := range map[string]results.FigureKind{
		"longestProbeGapMs": results.KindGap, "longestNoRouteWindowMs": results.KindGap, "lostProbes": results.KindLoss,
		"programmerRestartMsMax": results.KindDuration, "handovers: BIRD→programmer": results.KindDuration,
	} {
		if got := KindOf(name); got != want {
			t.Errorf("KindOf(%q) = %s, want %s", name, got, want)
		}
	}
}

func TestJudge(t *testing.T) {
	th := Thresholds{MaxGapIncrease: 20 * time.Millisecond, MaxLostIncrease: 10}
	withRatio := th
	withRatio.MaxRatio = 2
	for _, tc := range []struct {
		name       string
		figure     string
		base, new  float64
		t          Thresholds
		regression bool
	}{
		{"gap within the increase", "longestProbeGapMs", 30, 50, th, false},
		{"gap beyond the increase", "longestProbeGapMs", 30, 50.5, th, true},
		{"gap better", "longestProbeGapMs", 300, 5, th, false},
		{"gap beyond increase but within ratio", "longestProbeGapMs", 100, 150, withRatio, false},
		{"gap beyond increase and ratio", "longestProbeGapMs", 100, 201, withRatio, true},
		{"gap from zero: ratio cannot apply, increase decides", "longestProbeGapMs", 0, 25, withRatio, true},
		{"gap not judged", "longestProbeGapMs", 0, 2000, Thresholds{MaxGapIncrease: -1, MaxLostIncrease: -1}, false},
		{"lost within", "lostProbes", 0, 10, th, false},
		{"lost beyond", "lostProbes", 0, 11, th, true},
		{"other without ratio is information", "programmerRestartMsMax", 70, 7000, th, false},
		{"other beyond ratio", "programmerRestartMsMax", 70, 141, withRatio, true},
		{"other within ratio", "programmerRestartMsMax", 70, 139, withRatio, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := judge(tc.figure, KindOf(tc.figure), tc.base, true, tc.new, true, tc.t)
			if f.Regression != tc.regression {
				t.Errorf("%s %g → %g under %s: regression %v, want %v (%s)", tc.figure, tc.base, tc.new, tc.t, f.Regression, tc.regression, f.Why)
			}
			if f.Delta != tc.new-tc.base {
				t.Errorf("delta %g, want %g", f.Delta, tc.new-tc.base)
			}
		})
	}
}

func flows(gaps map[string]float64, lost map[string]int64, disruptions int) *report.Report {
	r := &report.Report{Rate: 1000}
	for f, g := range gaps {
		r.Flows = append(r.Flows, report.GapReport{Flow: f, LongestGapMs: g, Lost: lost[f], DisruptionCount: disruptions, Delivery: &report.Delivery{}})
	}
	return r
}

func TestCompare(t *testing.T) {
	base := &results.ResultsFile{Kernel: "6.1", Scenarios: []results.ScenarioResult{
		scen("same", results.VerdictPass, map[string]float64{"longestProbeGapMs": 30, "lostProbes": 3}),
		scen("now fails", results.VerdictPass, map[string]float64{"longestProbeGapMs": 30}),
		scen("gap grew", results.VerdictPass, map[string]float64{"longestProbeGapMs": 30}),
		scen("one flow worse", results.VerdictPass, nil),
		scen("gone", results.VerdictPass, nil),
		scen("fixed", results.VerdictFail, nil),
	}}
	base.Scenarios[3].Probes = flows(map[string]float64{"a->b": 10, "b->a": 10}, map[string]int64{"a->b": 5, "b->a": 5}, 1)
	nw := &results.ResultsFile{Kernel: "6.1", Scenarios: []results.ScenarioResult{
		scen("same", results.VerdictPass, map[string]float64{"longestProbeGapMs": 30, "lostProbes": 3}),
		scen("now fails", results.VerdictFail, map[string]float64{"longestProbeGapMs": 30}),
		scen("gap grew", results.VerdictPass, map[string]float64{"longestProbeGapMs": 300}),
		scen("one flow worse", results.VerdictPass, nil),
		scen("new one", results.VerdictPass, nil),
		scen("fixed", results.VerdictPass, nil),
	}}
	nw.Scenarios[1].Failure = "node-2 lost 40 probes\nmore"
	nw.Scenarios[3].Probes = flows(map[string]float64{"a->b": 10, "b->a": 90}, map[string]int64{"a->b": 5, "b->a": 5}, 1)
	// One run a side: the figures that moved past their minimum effect
	// cannot be told from noise. They are counted and named, not passed
	// in silence; the verdict flip and the missing scenario are judged on
	// one run.
	r := Compare("base.json", base, "new.json", nw, Options{Thresholds: DefaultThresholds(), Gated: AllGated})
	if r.Regressions != 2 || r.Undecided != 2 {
		t.Errorf("one run a side: %d regressions (want 2: now fails, gone), %d undecided figures (want 2)", r.Regressions, r.Undecided)
	}
	squeezed := strings.Join(strings.Fields(r.Text()), " ")
	for _, want := range []string{"UNDECIDED gap grew", "longestProbeGapMs 30 300 +270 0.5 adj 0.5 not enough samples",
		"not enough samples to judge: 2 figures in 2 scenarios", "gap grew; one flow worse", "5 scenarios compared, 2 regressed: now fails; gone"} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("text lacks %q:\n%s", want, r.Text())
		}
	}
	// --min-samples: a figure that cannot be judged is an error.
	r = Compare("base.json", base, "new.json", nw, Options{Thresholds: DefaultThresholds(), Gated: AllGated, StrictSamples: true})
	got := map[string]ScenarioDiff{}
	for _, s := range r.Scenarios {
		got[s.Name] = s
	}
	for name, want := range map[string]bool{"same": false, "now fails": true, "gap grew": true, "one flow worse": true, "fixed": false} {
		if got[name].Regression != want {
			t.Errorf("%s: regression %v, want %v (reasons %v)", name, got[name].Regression, want, got[name].Reasons)
		}
	}
	// "gone" is missing from NEW: the fourth.
	if r.Regressions != 4 {
		t.Errorf("%d regressions, want 4", r.Regressions)
	}
	if rs := got["now fails"].Reasons; len(rs) != 1 || !strings.Contains(rs[0], "node-2 lost 40 probes") {
		t.Errorf("a new failure's reason should quote its message: %v", rs)
	}
	if rs := got["one flow worse"].Reasons; len(rs) != 1 || !strings.Contains(rs[0], "flow b->a") {
		t.Errorf("the flow that regressed should be named: %v", rs)
	}
	if strings.Join(r.OnlyInBase, ",") != "gone" || strings.Join(r.OnlyInNew, ",") != "new one" {
		t.Errorf("one-sided: base %v new %v", r.OnlyInBase, r.OnlyInNew)
	}
	txt := r.Text()
	squeezed = strings.Join(strings.Fields(txt), " ")
	for _, want := range []string{"REGRESSION gap grew", "longestProbeGapMs 30 300 +270 0.5 adj 0.5 REGRESSION", "only in BASE (1): gone", "only in NEW (1): new one", "REGRESSION gone: in BASE (pass), missing from NEW", "5 scenarios compared, 4 regressed",
		"not enough samples to judge: 2 figures in 2 scenarios", "counted as regressions (--min-samples)"} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
}

func TestBudgets(t *testing.T) {
	b, err := ParseBudgets("budget.yaml", []byte(`
default:
  maxGapMs: 50
  allowedDisruptions: 1
scenarios:
  strict:
    maxLost: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	rep := flows(map[string]float64{"a->b": 40}, map[string]int64{"a->b": 4}, 2)
	for _, tc := range []struct {
		scenario string
		limits   []string
	}{
		{"loose", []string{"allowedDisruptions"}},
		{"strict", []string{"allowedDisruptions", "maxLost"}},
	} {
		var got []string
		for _, v := range b.For(tc.scenario).Judge(rep) {
			got = append(got, v.Limit)
		}
		if strings.Join(got, ",") != strings.Join(tc.limits, ",") {
			t.Errorf("%s: over %v, want %v", tc.scenario, got, tc.limits)
		}
	}
	// A report without disruption counts cannot pass a disruption budget.
	old := flows(map[string]float64{"a->b": 40}, map[string]int64{"a->b": 4}, 0)
	old.Flows[0].Delivery = nil
	if vs := b.For("loose").Judge(old); len(vs) != 1 || vs[0].Got != -1 {
		t.Errorf("old report judged %v, want one unknown-disruptions violation", vs)
	}
	// Compare applies the budget file to NEW.
	res := &results.ResultsFile{Scenarios: []results.ScenarioResult{{Name: "strict", Verdict: results.VerdictPass, Probes: rep}}}
	r := Compare("a", res, "b", res, Options{Thresholds: DefaultThresholds(), Gated: AllGated, Budgets: b})
	if r.Regressions != 1 || len(r.Scenarios[0].OverBudget) != 2 {
		t.Errorf("budget not applied: %+v", r.Scenarios[0])
	}
	for _, bad := range []struct{ doc, want string }{
		{"default: {maxGap: 5}", "unknown field"},
		{"default: {maxLost: -1}", "field maxLost"},
		{"scenarios: {x: {allowedDisruptions: -2}}", `scenario "x": field allowedDisruptions`},
	} {
		if _, err := ParseBudgets("b.yaml", []byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "b.yaml") {
			t.Errorf("%s: error %v, want one naming b.yaml and %q", bad.doc, err, bad.want)
		}
	}
}

// runs is n results of one scenario, the i-th with the i-th gap.
func runs(name string, gaps ...float64) []results.ScenarioResult {
	var out []results.ScenarioResult
	for _, g := range gaps {
		out = append(out, scen(name, results.VerdictPass, map[string]float64{"longestProbeGapMs": g}))
	}
	return out
}

// Repeated scenarios are compared as distributions: NEW's median must be
// worse by more than the minimum effect and the Mann–Whitney test must say
// the runs differ (p < α). Occurrence pairing (run i against run i) would
// flag the noise cases below; too few runs to test is "not enough samples".
func TestCompareRepeated(t *testing.T) {
	for _, tc := range []struct {
		name       string
		base, new  []float64
		regression bool
		undecided  bool
	}{
		// Timing sweep 0 s (issue 12): a sender pause makes one run 17 ms.
		{"same distribution, shuffled", []float64{4, 17, 1.3, 5, 4.2}, []float64{17, 4, 5, 1.3, 4.2}, false, false},
		{"one NEW outlier does not move the median", []float64{900, 901, 902, 903, 900}, []float64{901, 1400, 902, 900, 903}, false, false},
		{"median past the increase but within BASE's spread", []float64{100, 105, 110, 115, 150}, []float64{140, 142, 145, 90, 100}, false, false},
		{"median shifted past BASE's max", []float64{900, 901, 902, 903, 900}, []float64{1200, 1201, 1199, 905, 1202}, true, false},
		{"median above BASE's max but within the increase", []float64{900, 901, 902}, []float64{910, 911, 912}, false, false},
		// 1 run against 3: the smallest p a rank test can give is 0.5.
		{"one BASE run, repeated NEW", []float64{900}, []float64{1200, 1210, 1190}, false, true},
		{"repeated BASE, one NEW below its max", []float64{900, 905, 1300}, []float64{1250}, false, true},
		// The one-sided test: 3 runs a side reach 0.05 at best, 4 reach
		// 1/70 ≈ 0.014: still not enough at the default α 0.01; 5 reach
		// 1/252 ≈ 0.0040.
		{"three runs a side, every NEW above every BASE", []float64{900, 901, 902}, []float64{1200, 1201, 1202}, false, true},
		{"four runs a side, every NEW above every BASE", []float64{900, 901, 902, 903}, []float64{1200, 1201, 1202, 1203}, false, true},
		{"five runs a side, every NEW above every BASE", []float64{900, 901, 902, 903, 904}, []float64{1200, 1201, 1202, 1203, 1204}, true, false},
		// A figure that moved less than the minimum effect is judged on any
		// number of runs: it did not regress.
		{"one run a side within the increase", []float64{900}, []float64{915}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &results.ResultsFile{Scenarios: runs("s", tc.base...)}
			nw := &results.ResultsFile{Scenarios: runs("s", tc.new...)}
			r := Compare("b", base, "n", nw, Options{Thresholds: DefaultThresholds(), Gated: AllGated})
			if len(r.Scenarios) != 1 || len(r.OnlyInBase)+len(r.OnlyInNew) != 0 {
				t.Fatalf("a repeated name must pair once, by name: %d pairs, one-sided %v %v", len(r.Scenarios), r.OnlyInBase, r.OnlyInNew)
			}
			d := r.Scenarios[0]
			if d.Regression != tc.regression || (len(d.Undecided) > 0) != tc.undecided || (r.Undecided > 0) != tc.undecided {
				t.Errorf("%v → %v: regression %v (want %v), undecided %q (want %v)", tc.base, tc.new, d.Regression, tc.regression, d.Undecided, tc.undecided)
			}
			f := d.Figures[0]
			if len(tc.base) == 1 && len(tc.new) == 1 {
				return
			}
			if f.BaseStats == nil || f.NewStats == nil || f.BaseStats.N != len(tc.base) || f.NewStats.N != len(tc.new) {
				t.Fatalf("the distributions are not carried: %+v", f)
			}
			if f.Base != f.BaseStats.Median || f.New != f.NewStats.Median {
				t.Errorf("base/new should be the medians: %g/%g vs %g/%g", f.Base, f.New, f.BaseStats.Median, f.NewStats.Median)
			}
			if len(d.BaseRuns) != len(tc.base) || len(d.NewRuns) != len(tc.new) {
				t.Errorf("runs %v / %v, want %d / %d", d.BaseRuns, d.NewRuns, len(tc.base), len(tc.new))
			}
			if tc.regression && (len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "Mann–Whitney p=") || f.Test == nil || f.AdjustedP >= DefaultAlpha) {
				t.Errorf("the reason should state the rule: %v", d.Reasons)
			}
			if strings.Contains(r.Text(), "from one run on each side") {
				t.Errorf("a repeated scenario is not one sample per side, yet the text says so:\n%s", r.Text())
			}
		})
	}
}

// Positive control for the pairing: by occurrence, the shuffled case
// above has run 1 17 ms against 4 ms — the single-run rule on that pair
// is a regression, so name pairing is what keeps it quiet.
func TestCompareRepeatedPairsByNameNotOccurrence(t *testing.T) {
	one := func(g float64) *results.ResultsFile { return &results.ResultsFile{Scenarios: runs("s", g)} }
	if r := Compare("b", one(1.3), "n", one(30), Options{Thresholds: DefaultThresholds(), Gated: AllGated, StrictSamples: true}); r.Regressions != 1 {
		t.Fatalf("control: a single run 1.3 → 30 ms must regress, got %d", r.Regressions)
	}
	// Interleaved names: each name's runs pair with its own, wherever they sit.
	base := &results.ResultsFile{Scenarios: append(runs("a", 10, 10), runs("b", 500, 500)...)}
	nw := &results.ResultsFile{Scenarios: []results.ScenarioResult{runs("b", 500)[0], runs("a", 10)[0], runs("b", 501)[0], runs("a", 11)[0]}}
	r := Compare("b", base, "n", nw, Options{Thresholds: DefaultThresholds(), Gated: AllGated})
	if r.Regressions != 0 || len(r.Scenarios) != 2 {
		t.Errorf("interleaved runs: %d regressions in %d pairs, want 0 in 2: %+v", r.Regressions, len(r.Scenarios), r.Scenarios)
	}
}

// The verdict of a repeated scenario: NEW failing in a larger share of its
// runs regresses; skipped runs do not count; per-flow figures use the same
// distribution rule; a budget judges every NEW run, naming it.
func TestCompareRepeatedVerdictsFlowsBudget(t *testing.T) {
	fail := func(rs []results.ScenarioResult, i int) []results.ScenarioResult {
		rs[i].Verdict, rs[i].Passed, rs[i].Failure = results.VerdictFail, false, "lost 40 probes"
		return rs
	}
	skip := func(rs []results.ScenarioResult, i int) []results.ScenarioResult {
		rs[i].Verdict, rs[i].Passed = results.VerdictSkip, false
		return rs
	}
	for _, tc := range []struct {
		name       string
		base, new  []results.ScenarioResult
		regression bool
		reason     string
	}{
		{"NEW failing in most runs where BASE had none", runs("s", 1, 1, 1), fail(fail(runs("s", 1, 1, 1), 1), 2), true, "failed in 2 of 3 runs in NEW, 0 of 3 in BASE (Fisher p=0.2; most of NEW's runs): lost 40 probes"},
		// One failing run of five where BASE had none: a flaky spec as
		// likely as a broken claim (Fisher p 0.5); counted, not a regression.
		{"one NEW failure of five where BASE had none", runs("s", 1, 1, 1, 1, 1), fail(runs("s", 1, 1, 1, 1, 1), 1), false, ""},
		{"the same failure share", fail(runs("s", 1, 1, 1), 0), fail(runs("s", 1, 1, 1), 2), false, ""},
		{"fewer failures", fail(fail(runs("s", 1, 1, 1), 0), 1), fail(runs("s", 1, 1, 1), 2), false, ""},
		{"skips do not count", runs("s", 1, 1), skip(runs("s", 1, 1), 0), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Compare("b", &results.ResultsFile{Scenarios: tc.base}, "n", &results.ResultsFile{Scenarios: tc.new}, Options{Thresholds: DefaultThresholds(), Gated: AllGated})
			d := r.Scenarios[0]
			if d.Regression != tc.regression {
				t.Errorf("regression %v, want %v (%v)", d.Regression, tc.regression, d.Reasons)
			}
			if tc.reason != "" && (len(d.Reasons) == 0 || d.Reasons[0] != tc.reason) {
				t.Errorf("reasons %v, want %q", d.Reasons, tc.reason)
			}
		})
	}
	// The minority failure is counted and named; --min-samples makes it a
	// regression; with the shares past α (Fisher) it is one anyway.
	one := fail(runs("s", 1, 1, 1, 1, 1), 1)
	r := Compare("b", &results.ResultsFile{Scenarios: runs("s", 1, 1, 1, 1, 1)}, "n", &results.ResultsFile{Scenarios: one}, Options{Thresholds: DefaultThresholds()})
	if d := r.Scenarios[0]; d.Regression || r.Undecided != 1 || !strings.Contains(d.Undecided[0], "failed in 1 of 5 runs in NEW, 0 of 5 in BASE (Fisher p=0.5 ≥ α 0.01): lost 40 probes") {
		t.Errorf("one failure in five: regression %v, undecided %q", d.Regression, d.Undecided)
	}
	r = Compare("b", &results.ResultsFile{Scenarios: runs("s", 1, 1, 1, 1, 1)}, "n", &results.ResultsFile{Scenarios: one}, Options{Thresholds: DefaultThresholds(), StrictSamples: true})
	if !r.Scenarios[0].Regression {
		t.Errorf("--min-samples: one failure in five should regress: %v", r.Scenarios[0].Reasons)
	}
	// A flaky BASE (1 of 10) against NEW failing 9 of 10: the majority
	// rule does not apply (BASE failed too); Fisher's test does.
	ten := func(failing int) []results.ScenarioResult {
		rs := runs("s", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
		for i := range failing {
			rs = fail(rs, i)
		}
		return rs
	}
	if r := Compare("b", &results.ResultsFile{Scenarios: ten(1)}, "n", &results.ResultsFile{Scenarios: ten(9)}, Options{Thresholds: DefaultThresholds()}); !r.Scenarios[0].Regression ||
		!strings.Contains(r.Scenarios[0].Reasons[0], "failed in 9 of 10 runs in NEW, 1 of 10 in BASE (Fisher p=0.000547 < α 0.01)") {
		t.Errorf("a flaky BASE (1 of 10) against 9 of 10: %v", r.Scenarios[0].Reasons)
	}

	withFlow := func(gaps ...float64) []results.ScenarioResult {
		rs := runs("s", gaps...)
		for i := range rs {
			rs[i].Figures = nil
			rs[i].Probes = flows(map[string]float64{"a->b": gaps[i]}, map[string]int64{"a->b": int64(gaps[i])}, 1)
		}
		return rs
	}
	r = Compare("b", &results.ResultsFile{Scenarios: withFlow(10, 12, 50)}, "n", &results.ResultsFile{Scenarios: withFlow(11, 60, 12)}, Options{Thresholds: DefaultThresholds(), Gated: AllGated})
	if r.Regressions != 0 {
		t.Errorf("flow noise flagged: %v", r.Scenarios[0].Reasons)
	}
	// The default gate: a flow's gap (which carries the sender's own
	// pause, the harness's overhead) and loss are informational, printed
	// with their test, never a regression; the scenario's lostProbes, a
	// gated figure, shifted the same way regresses (the control).
	shifted := withFlow(60, 61, 62, 62, 63)
	for i := range shifted {
		shifted[i].Probes.Flows[0].SenderPauseInGapMs = 50
	}
	r = Compare("b", &results.ResultsFile{Scenarios: withFlow(10, 12, 14, 11, 13)}, "n", &results.ResultsFile{Scenarios: shifted}, Options{Thresholds: DefaultThresholds()})
	if d := r.Scenarios[0]; d.Regression || !d.Flows[0].Gap.Informational || !strings.Contains(d.Flows[0].Gap.Why, "~ informational, not gated: median 12 → 62") || !strings.Contains(r.Text(), "~ worse") {
		t.Errorf("a flow's gap should be informational under the default gate: regression %v %v, flow %+v", d.Regression, d.Reasons, d.Flows[0].Gap)
	}
	for i := range shifted {
		shifted[i].Figures = map[string]float64{"lostProbes": shifted[i].Probes.Flows[0].LongestGapMs}
	}
	base := withFlow(10, 12, 14, 11, 13)
	for i := range base {
		base[i].Figures = map[string]float64{"lostProbes": base[i].Probes.Flows[0].LongestGapMs}
	}
	r = Compare("b", &results.ResultsFile{Scenarios: base}, "n", &results.ResultsFile{Scenarios: shifted}, Options{Thresholds: DefaultThresholds()})
	if d := r.Scenarios[0]; !d.Regression || len(d.Reasons) != 1 || !strings.Contains(d.Reasons[0], "lostProbes: median 12 → 62") || d.Family != 1 {
		t.Errorf("a shifted lostProbes should regress, alone (family %d): %v", d.Family, d.Reasons)
	}
	// --gate all: the flows are gated too, and name themselves.
	r = Compare("b", &results.ResultsFile{Scenarios: withFlow(10, 12, 14, 11, 13)}, "n", &results.ResultsFile{Scenarios: withFlow(60, 61, 12, 62, 63)}, Options{Thresholds: DefaultThresholds(), Gated: AllGated, Alpha: 0.05})
	if d := r.Scenarios[0]; !d.Regression || !strings.Contains(strings.Join(d.Reasons, "\n"), "flow a->b longest gap ms: median 12 → 61") {
		t.Errorf("a shifted flow should regress under --gate all, naming it: %v", d.Reasons)
	}
	maxGap := 40.0
	nw := withFlow(10, 45, 12)
	nw[0].Budget = &results.Budget{MaxGapMs: &maxGap}
	r = Compare("b", &results.ResultsFile{Scenarios: withFlow(10, 12, 14)}, "n", &results.ResultsFile{Scenarios: nw}, Options{Thresholds: DefaultThresholds(), Gated: AllGated})
	if d := r.Scenarios[0]; !d.Regression || len(d.OverBudget) != 1 || d.OverBudget[0].Run != 2 || !strings.HasPrefix(d.Reasons[len(d.Reasons)-1], "run 2 of 3: over budget") {
		t.Errorf("the budget should judge every NEW run and name run 2: %+v %v", d.OverBudget, d.Reasons)
	}
}

// Verdict transitions that used to be silent: pass→skip, skip→fail, a
// scenario only in NEW that fails, and rows paired by spec text when the
// titles differ (a spec that failed before it registered its title).
func TestVerdictTransitions(t *testing.T) {
	row := func(spec, title string, v results.Verdict) results.ScenarioResult {
		return results.ScenarioResult{Spec: spec, Name: title, Verdict: v, Passed: v == results.VerdictPass}
	}
	base := &results.ResultsFile{Scenarios: []results.ScenarioResult{
		row("A spec", "a title", results.VerdictPass),
		row("B spec", "b title", results.VerdictPass),
		row("C spec", "C spec", results.VerdictSkip),
		row("D spec", "d title", results.VerdictSkip),
	}}
	nw := &results.ResultsFile{Scenarios: []results.ScenarioResult{
		row("A spec", "A spec", results.VerdictFail), // failed before registering
		row("B spec", "B spec", results.VerdictSkip),
		row("C spec", "C spec", results.VerdictFail),
		row("D spec", "d title", results.VerdictSkip), // skip → skip: nothing to judge
		row("E spec", "E spec", results.VerdictFail),  // new, and failing
	}}
	r := Compare("b", base, "n", nw, Options{Thresholds: DefaultThresholds(), Gated: AllGated})
	if len(r.OnlyInBase) != 0 || len(r.OnlyInNew) != 1 {
		t.Fatalf("rows not paired by spec text: only in BASE %v, only in NEW %v", r.OnlyInBase, r.OnlyInNew)
	}
	want := map[string]string{"a title": "passed in BASE, fails in NEW", "b title": "pass in BASE, skipped in NEW", "C spec": "skipped in BASE, fails in NEW"}
	for _, s := range r.Scenarios {
		w, ok := want[s.Name]
		if !ok {
			if s.Regression {
				t.Errorf("%s regressed: %v", s.Name, s.Reasons)
			}
			continue
		}
		if !s.Regression || !strings.Contains(strings.Join(s.Reasons, "; "), w) {
			t.Errorf("%s: regression %v, reasons %v, want %q", s.Name, s.Regression, s.Reasons, w)
		}
	}
	if len(r.OneSided) != 1 || r.OneSided[0].Name != "E spec" || r.Regressions != 4 {
		t.Errorf("one-sided %+v, %d regressions; want E spec and 4", r.OneSided, r.Regressions)
	}
}

// Two runs on different tunl0s (the kernel's ipip, the eBPF emulation) or
// with different wait scales are not comparable figure for figure: compare
// says so at the top and on each IPIP scenario, and judges as before.
func TestCompareNamesTheTunnelAndWaitScale(t *testing.T) {
	row := func(tunnel string) results.ScenarioResult {
		r := scen("ipip upgrade", results.VerdictPass, map[string]float64{"lostProbes": 0})
		r.FigureKinds = map[string]results.FigureKind{"lostProbes": results.KindLoss}
		r.Tunnel = tunnel
		return r
	}
	file := func(tunnel string, scale float64) *results.ResultsFile {
		return &results.ResultsFile{Kernel: "6.18", Env: &results.RunEnv{Where: "native", ProbeRate: 1000, Tunnel: tunnel, TimeoutScale: scale},
			Scenarios: []results.ScenarioResult{row(tunnel)}}
	}
	r := Compare("vm.json", file("kernel", 2), "native.json", file("ebpf", 0), Options{Thresholds: DefaultThresholds(), Gated: AllGated})
	env := strings.Join(r.EnvDiffers, "; ")
	for _, want := range []string{"tunl0 kernel vs ebpf", "waits ×2 vs ×1"} {
		if !strings.Contains(env, want) {
			t.Errorf("environment differences %q lack %q", env, want)
		}
	}
	if len(r.Scenarios) != 1 || !strings.Contains(strings.Join(r.Scenarios[0].Remarks, "; "), "tunl0 kernel in BASE, ebpf in NEW") {
		t.Errorf("the scenario's remarks should name both tunnels: %+v", r.Scenarios)
	}
	if r.Regressions != 0 {
		t.Errorf("a tunnel difference is a remark, not a regression: %d", r.Regressions)
	}
	// The control: the same tunnel and scale (0 read as 1) say nothing.
	r = Compare("a.json", file("ebpf", 1), "b.json", file("ebpf", 0), Options{Thresholds: DefaultThresholds(), Gated: AllGated})
	if len(r.EnvDiffers) != 0 || len(r.Scenarios[0].Remarks) != 0 {
		t.Errorf("same tunnel and scale: differences %v, remarks %v", r.EnvDiffers, r.Scenarios[0].Remarks)
	}
}

// A bimodal figure: the live change on IPIP lost 0 probes in some runs and
// ~1100 (one BIRD kernel scan later) in others. Two builds that land in
// the slow mode as often do not regress; one that lands there more often
// does, by its slow-mode share even when its median did not move.
func TestCompareBimodal(t *testing.T) {
	lost := func(vs ...float64) []results.ScenarioResult {
		var out []results.ScenarioResult
		for _, v := range vs {
			s := declared("live change on ipip", map[string]float64{"lostProbes": v})
			out = append(out, s)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		base, new  []results.ScenarioResult
		regression bool
		why        string
	}{
		{"A/A: the slow mode as often", lost(0, 0, 1103, 0, 1100), lost(0, 1101, 0, 1102, 0), false, ""},
		{"A/A: medians 0 → 1101, the shares 2 of 5 → 3 of 5", lost(0, 0, 1103, 0, 1100), lost(1101, 1101, 0, 1102, 0), false, ""},
		{"every NEW run slow", lost(0, 0, 0, 0, 0), lost(1100, 1103, 1101, 1102, 0), true, "Mann–Whitney p="},
		{"the share alone: 0 of 9 → 4 of 9, median still 0", lost(0, 0, 0, 0, 0, 0, 0, 0, 0), lost(0, 1100, 0, 1101, 0, 1102, 0, 1099, 0), true, "slow mode (≥ 1099, the fast one ≤ 0) in 4 of 9 runs in NEW, 0 of 9 in BASE (Fisher p=0.0412); Mann–Whitney p="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// α 0.05: the rule for a bimodal figure, not the family's
			// arithmetic (TestFamilyWiseAlpha).
			r := Compare("b", &results.ResultsFile{Scenarios: tc.base}, "n", &results.ResultsFile{Scenarios: tc.new}, Options{Thresholds: DefaultThresholds(), Gated: AllGated, Alpha: 0.05})
			d := r.Scenarios[0]
			if d.Regression != tc.regression || len(d.Undecided) != 0 {
				t.Errorf("regression %v (want %v), undecided %q: %q", d.Regression, tc.regression, d.Undecided, d.Reasons)
			}
			if f := d.Figures[0]; f.SlowMode == nil {
				t.Errorf("the figure's two modes were not found: %+v", f)
			}
			if tc.why != "" && !strings.Contains(strings.Join(d.Reasons, "\n"), tc.why) {
				t.Errorf("reasons %q lack %q", d.Reasons, tc.why)
			}
		})
	}
	// Control: one mode with spread is not bimodal.
	if sm := slowModeOf(results.KindGap, []float64{900, 910, 905}, []float64{930, 940, 920}, DefaultThresholds()); sm != nil {
		t.Errorf("900–940 ms found bimodal: %+v", sm)
	}
}
