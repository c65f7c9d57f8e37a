package results

import (
	"fmt"
	"os"
	"strconv"
)

// RepeatEnv makes scenarios that honour it run N times (default 1); the
// results file then carries every figure's distribution over the runs.
const RepeatEnv = "BIRDCAGE_REPEAT"

// Repeats is $BIRDCAGE_REPEAT, else def. An unparsable or non-positive value
// is an error so a typo does not silently run once.
func Repeats(def int) (int, error) {
	v := os.Getenv(RepeatEnv)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("$%s=%q: want a whole number of runs, 1 or more", RepeatEnv, v)
	}
	return n, nil
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
