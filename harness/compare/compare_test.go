package compare

// Holds the upgrade gate in place: a figure regresses only past every
// threshold of its kind, a pass that turns into a failure is a regression
// whatever the figures say, per-flow gaps and losses are judged like the
// totals, a budget judges NEW's flows, and scenarios on one side only are
// listed, not compared.

import (
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/harness/probe"
)

func scen(name string, v harness.Verdict, figs map[string]float64) harness.ScenarioResult {
	return harness.ScenarioResult{Name: name, Verdict: v, Passed: v == harness.VerdictPass, Figures: figs}
}

func TestKindOf(t *testing.T) {
	for name, want := range map[string]Kind{
		"longestProbeGapMs": KindGap, "longestNoRouteWindowMs": KindGap, "lostProbes": KindLost,
		"programmerRestartMsMax": KindOther, "handovers: BIRD→programmer": KindOther,
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

func flows(gaps map[string]float64, lost map[string]int64, disruptions int) *probe.Report {
	r := &probe.Report{Rate: 1000}
	for f, g := range gaps {
		r.Flows = append(r.Flows, probe.GapReport{Flow: f, LongestGapMs: g, Lost: lost[f], DisruptionCount: disruptions, Delivery: &probe.Delivery{}})
	}
	return r
}

func TestCompare(t *testing.T) {
	base := &harness.ResultsFile{Kernel: "6.1", Scenarios: []harness.ScenarioResult{
		scen("same", harness.VerdictPass, map[string]float64{"longestProbeGapMs": 30, "lostProbes": 3}),
		scen("now fails", harness.VerdictPass, map[string]float64{"longestProbeGapMs": 30}),
		scen("gap grew", harness.VerdictPass, map[string]float64{"longestProbeGapMs": 30}),
		scen("one flow worse", harness.VerdictPass, nil),
		scen("gone", harness.VerdictPass, nil),
		scen("fixed", harness.VerdictFail, nil),
	}}
	base.Scenarios[3].Probes = flows(map[string]float64{"a->b": 10, "b->a": 10}, map[string]int64{"a->b": 5, "b->a": 5}, 1)
	nw := &harness.ResultsFile{Kernel: "6.1", Scenarios: []harness.ScenarioResult{
		scen("same", harness.VerdictPass, map[string]float64{"longestProbeGapMs": 30, "lostProbes": 3}),
		scen("now fails", harness.VerdictFail, map[string]float64{"longestProbeGapMs": 30}),
		scen("gap grew", harness.VerdictPass, map[string]float64{"longestProbeGapMs": 300}),
		scen("one flow worse", harness.VerdictPass, nil),
		scen("new one", harness.VerdictPass, nil),
		scen("fixed", harness.VerdictPass, nil),
	}}
	nw.Scenarios[1].Failure = "node-2 lost 40 probes\nmore"
	nw.Scenarios[3].Probes = flows(map[string]float64{"a->b": 10, "b->a": 90}, map[string]int64{"a->b": 5, "b->a": 5}, 1)
	r := Compare("base.json", base, "new.json", nw, Options{Thresholds: DefaultThresholds()})
	got := map[string]ScenarioDiff{}
	for _, s := range r.Scenarios {
		got[s.Name] = s
	}
	for name, want := range map[string]bool{"same": false, "now fails": true, "gap grew": true, "one flow worse": true, "fixed": false} {
		if got[name].Regression != want {
			t.Errorf("%s: regression %v, want %v (reasons %v)", name, got[name].Regression, want, got[name].Reasons)
		}
	}
	if r.Regressions != 3 {
		t.Errorf("%d regressions, want 3", r.Regressions)
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
	squeezed := strings.Join(strings.Fields(txt), " ")
	for _, want := range []string{"REGRESSION gap grew", "longestProbeGapMs 30 300 +270 REGRESSION", "only in BASE (1): gone", "only in NEW (1): new one", "5 scenarios compared, 3 regressed"} {
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
	res := &harness.ResultsFile{Scenarios: []harness.ScenarioResult{{Name: "strict", Verdict: harness.VerdictPass, Probes: rep}}}
	r := Compare("a", res, "b", res, Options{Thresholds: DefaultThresholds(), Budgets: b})
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
