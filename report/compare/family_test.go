package compare

// The gate's false-alarm arithmetic: each scenario's gated figures share α
// (Holm), the rest are informational, so A/A comparisons of one build
// regress in at most α of scenarios; and the injected 100 ms window is
// still found with 5 runs a side.

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/report/results"
)

// headlineRuns is n runs of one scenario: the two default gated figures,
// the longest probe gap (informational) and extra informational gaps,
// each drawn by draw.
func headlineRuns(n, extra int, draw func(figure string) float64) []results.ScenarioResult {
	var out []results.ScenarioResult
	for range n {
		figs := map[string]float64{
			"lostProbes":             draw("lostProbes"),
			"longestNoRouteWindowMs": draw("longestNoRouteWindowMs"),
			"longestProbeGapMs":      draw("longestProbeGapMs"),
		}
		kinds := map[string]results.FigureKind{"lostProbes": results.KindLoss, "longestNoRouteWindowMs": results.KindGap, "longestProbeGapMs": results.KindGap}
		for i := range extra {
			name := "gap" + string(rune('A'+i))
			figs[name], kinds[name] = draw(name), results.KindGap
		}
		out = append(out, results.ScenarioResult{Name: "s", Verdict: results.VerdictPass, Passed: true, Figures: figs, FigureKinds: kinds})
	}
	return out
}

// A/A by simulation: 2000 pairs of 5 runs a side, every figure drawn from
// one continuous distribution, no minimum effect (so only the tests stand
// between noise and a regression). The default gate regresses in at most
// α of them (within sampling error); the control, every one of 16 figures
// gated each at α 0.05 with no family (the rule before gating), regresses
// in far more.
func TestFamilyWiseAlpha(t *testing.T) {
	noEffect := Thresholds{MaxGapIncrease: 0, MaxLostIncrease: 0}
	rng := rand.New(rand.NewPCG(44, 1))
	draw := func(string) float64 { return rng.NormFloat64()*10 + 100 }
	const pairs = 2000
	gated, ungatedEach := 0, 0
	for range pairs {
		base, nw := headlineRuns(5, 13, draw), headlineRuns(5, 13, draw)
		r := Compare("b", &results.ResultsFile{Scenarios: base}, "n", &results.ResultsFile{Scenarios: nw}, Options{Thresholds: noEffect})
		if r.Scenarios[0].Family != 2 {
			t.Fatalf("the default gate's family is %d figures, want 2", r.Scenarios[0].Family)
		}
		gated += r.Regressions
		// The control: each figure on its own at α 0.05 (a family of one
		// per figure, as every figure used to be judged).
		for _, f := range r.Scenarios[0].Figures {
			if f.Tested && f.P < 0.05 {
				ungatedEach++
				break
			}
		}
	}
	if rate := float64(gated) / pairs; rate > 0.015 {
		t.Errorf("A/A under the default gate: %d of %d scenario comparisons regressed (%.3f), want ≤ α 0.01 within sampling error", gated, pairs, rate)
	}
	if rate := float64(ungatedEach) / pairs; rate < 0.3 {
		t.Errorf("control: every figure at α 0.05 alone should cry wolf often, got %d of %d", ungatedEach, pairs)
	}
	t.Logf("A/A simulation: default gate %d of %d regressed; every figure alone at 0.05: %d of %d", gated, pairs, ungatedEach, pairs)
}

// The gatecheck's injected window, 5 runs a side: the longest no-route
// window 0 → ~100 ms in every NEW run. One-sided p 1/252 ≈ 0.0040, Holm
// over the two gated figures 0.0079 < α 0.01: a regression naming the
// figure, the effect and both p-values. The longest probe gap moved as far
// and is informational. At 4 runs a side the same shift is "not enough
// samples to judge" (1/70 ≈ 0.014 > α/2).
func TestInjectedWindowFoundAtFiveRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 2))
	clean := func(f string) float64 {
		switch f {
		case "longestNoRouteWindowMs", "lostProbes":
			return 0
		}
		return 20 + rng.Float64()*30
	}
	faulty := func(f string) float64 {
		switch f {
		case "longestNoRouteWindowMs":
			return 100 + rng.Float64()*2
		case "longestProbeGapMs":
			return 120 + rng.Float64()*30
		case "lostProbes":
			return 0
		}
		return 20 + rng.Float64()*30
	}
	r := Compare("b", &results.ResultsFile{Scenarios: headlineRuns(5, 0, clean)}, "n", &results.ResultsFile{Scenarios: headlineRuns(5, 0, faulty)}, Options{Thresholds: DefaultThresholds()})
	d := r.Scenarios[0]
	why := strings.Join(d.Reasons, "\n")
	if !d.Regression || len(d.Reasons) != 1 || !strings.Contains(why, "longestNoRouteWindowMs: median 0 → 10") ||
		!strings.Contains(why, "Mann–Whitney p=0.00397 one-sided, Holm-adjusted over 2 gated figures 0.00794 < α 0.01 (n=5 vs 5)") {
		t.Errorf("the injected window should regress on its own gated figure: %q", d.Reasons)
	}
	if !strings.Contains(strings.Join(d.Informational, "\n"), "longestProbeGapMs: ~ informational") {
		t.Errorf("the longest probe gap should be informational: %q", d.Informational)
	}
	r = Compare("b", &results.ResultsFile{Scenarios: headlineRuns(4, 0, clean)}, "n", &results.ResultsFile{Scenarios: headlineRuns(4, 0, faulty)}, Options{Thresholds: DefaultThresholds()})
	if d := r.Scenarios[0]; d.Regression || len(d.Undecided) != 1 || !strings.Contains(d.Undecided[0], "needs e.g. 5 runs a side") {
		t.Errorf("4 runs a side: regression %v, undecided %q; want not enough samples, naming 5 runs", d.Regression, d.Undecided)
	}
	// A gate of one figure (--gate longestNoRouteWindowMs) at 4 runs a
	// side still cannot reach α 0.01 (1/70); at α 0.02 it can.
	r = Compare("b", &results.ResultsFile{Scenarios: headlineRuns(4, 0, clean)}, "n", &results.ResultsFile{Scenarios: headlineRuns(4, 0, faulty)},
		Options{Thresholds: DefaultThresholds(), Gated: []string{"longestNoRouteWindowMs"}, Alpha: 0.02})
	if d := r.Scenarios[0]; !d.Regression || d.Family != 1 {
		t.Errorf("one gated figure at α 0.02, 4 runs a side: regression %v (family %d) %q", d.Regression, d.Family, d.Reasons)
	}
}
