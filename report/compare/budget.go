package compare

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/birdcage/birdcage/report/results"
)

// Budgets is a budget file: a default budget for every scenario and
// per-scenario budgets (by scenario name) that override it field by field.
//
//	default:
//	  maxGapMs: 500
//	  allowedDisruptions: 1
//	scenarios:
//	  "live change on noencap: BIRD → programmer":
//	    maxLost: 50
type Budgets struct {
	Default   results.Budget            `json:"default"`
	Scenarios map[string]results.Budget `json:"scenarios,omitempty"`
}

// For is the budget scenario name is judged against.
func (b *Budgets) For(name string) results.Budget {
	out := b.Default
	if s, ok := b.Scenarios[name]; ok {
		out = out.Merge(s)
	}
	return out
}

// ReadBudgets reads a budget file (YAML or JSON), strictly: an unknown
// field is an error naming the file and the field.
func ReadBudgets(path string) (*Budgets, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("budget %s: %w", path, err)
	}
	return ParseBudgets(path, b)
}

// ParseBudgets parses a budget file's contents; name is for errors.
func ParseBudgets(name string, data []byte) (*Budgets, error) {
	var out Budgets
	if err := yaml.UnmarshalStrict(data, &out); err != nil {
		return nil, fmt.Errorf("budget %s: %w (valid fields: default and scenarios, each with maxGapMs, allowedDisruptions, maxLost)", name, err)
	}
	check := func(where string, b results.Budget) error {
		if b.MaxGapMs != nil && *b.MaxGapMs < 0 {
			return fmt.Errorf("budget %s: %s: field maxGapMs: %g is negative", name, where, *b.MaxGapMs)
		}
		if b.AllowedDisruptions != nil && *b.AllowedDisruptions < 0 {
			return fmt.Errorf("budget %s: %s: field allowedDisruptions: %d is negative", name, where, *b.AllowedDisruptions)
		}
		if b.MaxLost != nil && *b.MaxLost < 0 {
			return fmt.Errorf("budget %s: %s: field maxLost: %d is negative", name, where, *b.MaxLost)
		}
		return nil
	}
	if err := check("default", out.Default); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(out.Scenarios))
	for n := range out.Scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := check(fmt.Sprintf("scenario %q", n), out.Scenarios[n]); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// UnknownScenarios lists budgeted scenario names r does not contain: a
// typo in a budget file must not silently judge nothing.
func (b *Budgets) UnknownScenarios(r *results.ResultsFile) []string {
	have := map[string]bool{}
	for _, s := range r.Scenarios {
		have[s.Name] = true
	}
	var out []string
	for n := range b.Scenarios {
		if !have[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Describe says in one line what a budget file judges.
func (b *Budgets) Describe() string {
	s := "default: " + b.Default.String()
	if len(b.Scenarios) > 0 {
		s += fmt.Sprintf("; %d scenario budgets (%s)", len(b.Scenarios), strings.Join(keys(b.Scenarios), ", "))
	}
	return s
}

func keys(m map[string]results.Budget) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
