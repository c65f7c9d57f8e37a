package results

import (
	"fmt"

	"github.com/onsi/ginkgo/v2/types"
)

// SelectLabels narrows a results file to the scenarios whose labels a
// Ginkgo label filter selects ("upgrade && ipip", "headline && !timing"),
// so two runs of different scopes (a run of the whole headline and one of
// the upgrades only) compare on the scenarios both ran. It returns a copy;
// the repeat summaries are recomputed. A row written before rows carried
// labels has none, so only a filter that selects the empty label set keeps
// it.
func SelectLabels(f *ResultsFile, filter string) (*ResultsFile, error) {
	match, err := types.ParseLabelFilter(filter)
	if err != nil {
		return nil, fmt.Errorf("label filter %q: %w", filter, err)
	}
	out := *f
	out.Scenarios = nil
	for _, s := range f.Scenarios {
		if match(s.Labels) {
			out.Scenarios = append(out.Scenarios, s)
		}
	}
	out.Repeats = summarizeRepeats(out.Scenarios)
	return &out, nil
}
