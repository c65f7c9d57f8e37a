package compare

// Figures are judged by the kind their rows declare (results.FigureKind,
// recorded by the suite's row writer), never by their name.

import (
	"strings"
	"testing"

	"github.com/birdcage/birdcage/report/results"
)

// suiteKinds are the kinds the suite records these figures with
// (results.ScenarioResult.Figure at their specs); a name not here is
// written without one.
var suiteKinds = map[string]results.FigureKind{
	"windowMs":                      results.KindDuration, // how long a spec watched
	"longestPeerNoRouteMs":          results.KindGap,
	"prefixesWithTwoRoutes":         results.KindCount,
	"deletesOfRemoteBlocks":         results.KindCount,
	"platformLostPerControlFlowMax": results.KindMachine,
	"senderPauseInGapMs":            results.KindMachine,
	"flows":                         results.KindSize,
	"lostProbes":                    results.KindLoss,
	"longestProbeGapMs":             results.KindGap,
	"longestNoRouteWindowMs":        results.KindGap,
}

// declared is a row as the suite writes it: figures with their kinds.
func declared(name string, figs map[string]float64) results.ScenarioResult {
	s := scen(name, results.VerdictPass, nil)
	for f, v := range figs {
		if k, ok := suiteKinds[f]; ok {
			s.Figure(f, v, k)
		} else {
			if s.Figures == nil {
				s.Figures = map[string]float64{}
			}
			s.Figures[f] = v
		}
	}
	s.MarkUndeclaredFigures()
	return s
}

// compareOne compares one run a side. What these tests hold is which
// figures are judged and by which minimum effect, so a figure past it is a
// regression (StrictSamples: one run a side is otherwise "not enough
// samples to judge"); compareOneLenient is the default gate.
func compareOne(t *testing.T, base, nw results.ScenarioResult, th Thresholds) ScenarioDiff {
	t.Helper()
	return compareWith(t, base, nw, Options{Thresholds: th, StrictSamples: true})
}

func compareOneLenient(t *testing.T, base, nw results.ScenarioResult, th Thresholds) ScenarioDiff {
	t.Helper()
	return compareWith(t, base, nw, Options{Thresholds: th})
}

func compareWith(t *testing.T, base, nw results.ScenarioResult, o Options) ScenarioDiff {
	t.Helper()
	if o.Gated == nil {
		o.Gated = AllGated // which kinds are judged, whether gated or not
	}
	r := Compare("base", &results.ResultsFile{Scenarios: []results.ScenarioResult{base}},
		"new", &results.ResultsFile{Scenarios: []results.ScenarioResult{nw}}, o)
	if len(r.Scenarios) != 1 {
		t.Fatalf("%d paired scenarios, want 1: %+v", len(r.Scenarios), r)
	}
	return r.Scenarios[0]
}

func TestJudgeByDeclaredKind(t *testing.T) {
	for _, tc := range []struct {
		name       string
		figure     string
		base, new  float64
		regression bool
		remark     string // a remark that must be there
	}{
		// How long a spec watched is a duration: no ratio, not judged.
		{"windowMs is not a gap", "windowMs", 500, 5000, false, ""},
		// A peer without a route is a gap, whatever its name says.
		{"longestPeerNoRouteMs is a gap", "longestPeerNoRouteMs", 10, 500, true, ""},
		{"longestPeerNoRouteMs within the gap increase", "longestPeerNoRouteMs", 10, 25, false, ""},
		{"prefixesWithTwoRoutes 0→1 regresses", "prefixesWithTwoRoutes", 0, 1, true, ""},
		{"deletesOfRemoteBlocks 0→1 regresses", "deletesOfRemoteBlocks", 0, 1, true, ""},
		{"deletesOfRemoteBlocks 1→0 does not", "deletesOfRemoteBlocks", 1, 0, false, ""},
		// The machine's own loss on control flows is never judged.
		{"platformLost… 0→50 does not regress", "platformLostPerControlFlowMax", 0, 50, false, "platformLostPerControlFlowMax (machine) 0 → 50: not judged"},
		{"senderPauseInGapMs is the machine", "senderPauseInGapMs", 1, 900, false, "(machine)"},
		{"a size is neutral", "flows", 6, 12, false, "flows (size) 6 → 12: not judged"},
		{"loss is judged as loss", "lostProbes", 0, 21, true, ""},
		{"an undeclared figure is not judged", "someNewFigure", 0, 1e6, false, "someNewFigure (no declared kind) 0 → 1e+06: not judged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := compareOne(t, declared("s", map[string]float64{tc.figure: tc.base}), declared("s", map[string]float64{tc.figure: tc.new}), DefaultThresholds())
			if d.Regression != tc.regression {
				t.Errorf("%s %g → %g: regression %v, want %v (reasons %q)", tc.figure, tc.base, tc.new, d.Regression, tc.regression, d.Reasons)
			}
			if tc.remark != "" && !strings.Contains(strings.Join(d.Remarks, "\n"), tc.remark) {
				t.Errorf("remarks %q lack %q", d.Remarks, tc.remark)
			}
			if strings.Contains(strings.Join(d.Remarks, "\n"), "judged by name") {
				t.Errorf("rows with kinds were judged by name: %q", d.Remarks)
			}
		})
	}
}

// A count that was 0 in BASE and must stay 0 is exact: it regresses on one
// run a side under the default gate; a gap or loss that moved on one run a
// side is "not enough samples to judge" instead.
func TestExactCountsOnOneRun(t *testing.T) {
	d := compareOneLenient(t, declared("s", map[string]float64{"deletesOfRemoteBlocks": 0}), declared("s", map[string]float64{"deletesOfRemoteBlocks": 1}), DefaultThresholds())
	if !d.Regression || !strings.Contains(strings.Join(d.Reasons, ""), "must stay 0") || !d.Figures[0].Exact {
		t.Errorf("0 → 1 deletes on one run: regression %v, reasons %q; want an exact regression", d.Regression, d.Reasons)
	}
	d = compareOneLenient(t, declared("s", map[string]float64{"deletesOfRemoteBlocks": 2}), declared("s", map[string]float64{"deletesOfRemoteBlocks": 3}), DefaultThresholds())
	if d.Regression || len(d.Undecided) != 1 {
		t.Errorf("2 → 3 deletes on one run: regression %v, undecided %q; want not enough samples", d.Regression, d.Undecided)
	}
	d = compareOneLenient(t, declared("s", map[string]float64{"lostProbes": 0}), declared("s", map[string]float64{"lostProbes": 1103}), DefaultThresholds())
	if d.Regression || len(d.Undecided) != 1 || !strings.Contains(d.Undecided[0], "not enough samples to judge") {
		t.Errorf("lost 0 → 1103 on one run (the bimodal live change): regression %v, undecided %q; want not enough samples", d.Regression, d.Undecided)
	}
}

// Counts: any increase by default, MaxCountIncrease allows some, a
// negative one judges none, and the ratio applies on top.
func TestCountThresholds(t *testing.T) {
	b, n := declared("s", map[string]float64{"deletesOfRemoteBlocks": 2}), declared("s", map[string]float64{"deletesOfRemoteBlocks": 4})
	for _, tc := range []struct {
		name       string
		t          Thresholds
		regression bool
	}{
		{"default: any increase", DefaultThresholds(), true},
		{"two allowed", Thresholds{MaxCountIncrease: 2}, false},
		{"one allowed", Thresholds{MaxCountIncrease: 1}, true},
		{"not judged", Thresholds{MaxCountIncrease: -1}, false},
		{"within the ratio", Thresholds{MaxCountIncrease: 0, MaxRatio: 3}, false},
		{"beyond the ratio", Thresholds{MaxCountIncrease: 0, MaxRatio: 1.5}, true},
	} {
		if d := compareOne(t, b, n, tc.t); d.Regression != tc.regression {
			t.Errorf("%s: 2 → 4 regression %v, want %v (%q)", tc.name, d.Regression, tc.regression, d.Reasons)
		}
	}
	// A duration is judged by the ratio alone, when one is given.
	b, n = declared("s", map[string]float64{"windowMs": 100}), declared("s", map[string]float64{"windowMs": 300})
	if d := compareOne(t, b, n, Thresholds{MaxRatio: 2}); !d.Regression {
		t.Error("windowMs ×3 under a ratio of 2 did not regress")
	}
}

// Rows written before kinds existed are judged by name, and the diff says
// so; the kinds of one side are enough to judge by kind.
func TestRowsWithoutKindsFallBackToNames(t *testing.T) {
	old := scen("s", results.VerdictPass, map[string]float64{"windowMs": 100})
	nw := scen("s", results.VerdictPass, map[string]float64{"windowMs": 200})
	d := compareOne(t, old, nw, DefaultThresholds())
	if !d.Regression {
		t.Error("by name, windowMs is a gap: +100 ms should regress")
	}
	if !strings.Contains(strings.Join(d.Remarks, "\n"), "figures judged by name") {
		t.Errorf("no remark that the figures were judged by name: %q", d.Remarks)
	}
	d = compareOne(t, old, declared("s", map[string]float64{"windowMs": 200}), DefaultThresholds())
	if d.Regression || strings.Contains(strings.Join(d.Remarks, "\n"), "judged by name") {
		t.Errorf("NEW declares windowMs a duration: want no regression and no by-name remark, got %v %q %q", d.Regression, d.Reasons, d.Remarks)
	}
}
