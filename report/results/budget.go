package results

import (
	"fmt"
	"strings"

	"github.com/birdcage/birdcage/instrument/probe/report"
)

// Budget is a disruption budget judged per flow, as upgrade gates in the
// field state them: no flow may be without delivery for longer than
// MaxGapMs, be disrupted more than AllowedDisruptions times (distinct runs
// of lost probes), or lose more than MaxLost probes. A nil field is not
// judged; a zero one allows nothing.
type Budget struct {
	MaxGapMs           *float64 `json:"maxGapMs,omitempty"`
	AllowedDisruptions *int     `json:"allowedDisruptions,omitempty"`
	MaxLost            *int64   `json:"maxLost,omitempty"`
}

// IsZero reports whether the budget judges nothing.
func (b Budget) IsZero() bool {
	return b.MaxGapMs == nil && b.AllowedDisruptions == nil && b.MaxLost == nil
}

func (b Budget) String() string {
	var parts []string
	if b.MaxGapMs != nil {
		parts = append(parts, fmt.Sprintf("max gap %g ms", *b.MaxGapMs))
	}
	if b.AllowedDisruptions != nil {
		parts = append(parts, fmt.Sprintf("at most %d disruptions", *b.AllowedDisruptions))
	}
	if b.MaxLost != nil {
		parts = append(parts, fmt.Sprintf("at most %d lost", *b.MaxLost))
	}
	if len(parts) == 0 {
		return "no budget"
	}
	return strings.Join(parts, ", ") + " per flow"
}

// Merge is b with every field other sets taken from other.
func (b Budget) Merge(other Budget) Budget {
	if other.MaxGapMs != nil {
		b.MaxGapMs = other.MaxGapMs
	}
	if other.AllowedDisruptions != nil {
		b.AllowedDisruptions = other.AllowedDisruptions
	}
	if other.MaxLost != nil {
		b.MaxLost = other.MaxLost
	}
	return b
}

// BudgetViolation is one flow over one limit of a budget.
type BudgetViolation struct {
	Flow  string  `json:"flow"`
	Limit string  `json:"limit"` // maxGapMs, allowedDisruptions, maxLost
	Want  float64 `json:"want"`
	Got   float64 `json:"got"`
	// Run is the run (from 1) of a repeated scenario that broke the
	// budget; 0 for a scenario that ran once.
	Run int `json:"run,omitempty"`
}

func (v BudgetViolation) String() string {
	if v.Got < 0 {
		return fmt.Sprintf("flow %s: %s cannot be judged: the results predate disruption counts", v.Flow, v.Limit)
	}
	return fmt.Sprintf("flow %s: %s %g over the budget's %g", v.Flow, v.Limit, v.Got, v.Want)
}

// Judge checks every flow of rep against the budget. Disruptions can only
// be judged on reports that carry them (results written since they exist);
// a budget that needs them on a report without them is a violation, so an
// old file cannot pass a gate it was never measured against.
func (b Budget) Judge(rep *report.Report) []BudgetViolation {
	if rep == nil || b.IsZero() {
		return nil
	}
	var out []BudgetViolation
	for _, f := range rep.Flows {
		if b.MaxGapMs != nil && f.LongestGapMs > *b.MaxGapMs {
			out = append(out, BudgetViolation{Flow: f.Flow, Limit: "maxGapMs", Want: *b.MaxGapMs, Got: f.LongestGapMs})
		}
		if b.AllowedDisruptions != nil {
			got := float64(f.DisruptionCount)
			if f.Delivery == nil && f.Lost > 0 {
				got = -1 // unknown: the report predates disruption counts
			}
			if got < 0 || got > float64(*b.AllowedDisruptions) {
				out = append(out, BudgetViolation{Flow: f.Flow, Limit: "allowedDisruptions", Want: float64(*b.AllowedDisruptions), Got: got})
			}
		}
		if b.MaxLost != nil && f.Lost > *b.MaxLost {
			out = append(out, BudgetViolation{Flow: f.Flow, Limit: "maxLost", Want: float64(*b.MaxLost), Got: float64(f.Lost)})
		}
	}
	return out
}
