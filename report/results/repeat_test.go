package results

import (
	"testing"

	"github.com/birdcage/birdcage/internal/env"
)

func TestSummarizeRepeats(t *testing.T) {
	runs := []ScenarioResult{
		{Name: "a", Passed: true, Figures: map[string]float64{"gapMs": 10}},
		{Name: "b", Passed: true, Figures: map[string]float64{"gapMs": 99}},
		{Name: "a", Passed: false, Figures: map[string]float64{"gapMs": 30, "lost": 4}},
		{Name: "a", Passed: true, Figures: map[string]float64{"gapMs": 20}},
	}
	got := summarizeRepeats(runs)
	if _, ok := got["b"]; ok {
		t.Error("a scenario that ran once got a repeat summary")
	}
	a, ok := got["a"]
	if !ok {
		t.Fatalf("no summary for a: %+v", got)
	}
	if a.Runs != 3 || a.Passed != 2 {
		t.Errorf("runs %d passed %d, want 3 and 2", a.Runs, a.Passed)
	}
	g := a.Figures["gapMs"]
	if g.N != 3 || g.Min != 10 || g.Median != 20 || g.Max != 30 || g.Samples[1] != 30 {
		t.Errorf("gapMs: %+v (want min 10 median 20 max 30, samples in run order)", g)
	}
	if l := a.Figures["lost"]; l.N != 1 {
		t.Errorf("a figure only one run had: %+v", l)
	}
	if summarizeRepeats(runs[:2]) != nil {
		t.Error("no repeats should give no summary")
	}
}

func TestRepeatsEnv(t *testing.T) {
	repeats := func(v string, def int) (int, error) {
		c, err := env.Load(env.Map(map[string]string{env.Repeat: v}))
		return Repeats(c.Repeat, def), err
	}
	if n, err := repeats("", 3); n != 3 || err != nil {
		t.Errorf("unset: %d %v", n, err)
	}
	if n, err := repeats("5", 1); n != 5 || err != nil {
		t.Errorf("5: %d %v", n, err)
	}
	for _, bad := range []string{"0", "-1", "five"} {
		if _, err := repeats(bad, 1); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
