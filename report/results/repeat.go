package results

// Repeats is how many times a repeated scenario runs: n (the run's
// $BIRDCAGE_REPEAT, from internal/env, which refuses a non-positive value)
// when set, else def.
func Repeats(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// RepeatSummary is one scenario's runs in a results file: how many ran and
// passed, and each figure's distribution over them (with every sample, in
// run order).
type RepeatSummary struct {
	Runs    int              `json:"runs"`
	Passed  int              `json:"passed"`
	Figures map[string]Stats `json:"figures"`
}

// summarizeRepeats groups results by scenario name; names that ran more
// than once get a summary.
func summarizeRepeats(all []ScenarioResult) map[string]RepeatSummary {
	byName := map[string][]ScenarioResult{}
	for _, s := range all {
		byName[s.Name] = append(byName[s.Name], s)
	}
	out := map[string]RepeatSummary{}
	for name, runs := range byName {
		if len(runs) < 2 {
			continue
		}
		sum := RepeatSummary{Runs: len(runs), Figures: map[string]Stats{}}
		samples := map[string][]float64{}
		for _, r := range runs {
			if r.Passed {
				sum.Passed++
			}
			for k, v := range r.Figures {
				samples[k] = append(samples[k], v)
			}
		}
		for k, v := range samples {
			sum.Figures[k] = Summarize(v)
		}
		out[name] = sum
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
