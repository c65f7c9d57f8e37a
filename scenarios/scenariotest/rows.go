package scenariotest

// The spec's row in the results file: what Record registers, the rows of a
// repeated spec's earlier runs, and one row per spec that ran.

import (
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"

	"github.com/birdcage/birdcage/report/results"
)

// registered is the running spec's figures, stored by Record and written
// as its row by the ReportAfterEach below once the spec has ended.
var registered *results.ScenarioResult

// Record prints a table for people (go test -v, CI logs) and registers the
// scenario's figures for its row in the results file. It decides nothing:
// the row's verdict is the spec's final state, written after the spec and
// its cleanup have run, so a spec may register early and assert after.
func Record(title, table string, res results.ScenarioResult) {
	GinkgoHelper()
	AddReportEntry(title, table)
	for _, line := range strings.Split(strings.TrimRight("== "+title+"\n"+table, "\n"), "\n") {
		fmt.Println("[birdcage] " + line)
	}
	res.Registered = true
	registered = &res
	addFigureEntries(res)
}

// Registered is the running spec's figures as Record registered them (nil:
// none yet), for a spec that judges its own row.
func Registered() *results.ScenarioResult { return registered }

var _ = ReportBeforeEach(func(SpecReport) {
	registered, clusterWarnings, earlierRuns, conformanceCase = nil, nil, nil, nil
})

// conformanceCase is the running spec's conformance case as soon as it is
// known (NameConformance): the row writer gives it to a row that failed
// before it registered its own, so the failure still pairs in the
// model-vs-Calico table (birdcage conformance).
var conformanceCase *results.Conformance

// NameConformance names the running spec's conformance case and node.
func NameConformance(name, node string) {
	conformanceCase = &results.Conformance{Case: name, Node: node}
}

// earlierRuns are the rows of a repeated spec's runs before its last
// (MustPassRepeatedly, $BIRDCAGE_REPEAT): Ginkgo reports a repeated spec
// once, after its last attempt, so each attempt that another follows is
// kept here as it ends, with its own figures, and written as a row of its
// own beside the last. Ginkgo goes on only after an attempt passed.
var earlierRuns []earlierRun

type earlierRun struct {
	attempt int
	row     results.ScenarioResult
}

// Each attempt starts with nothing registered.
var _ = BeforeEach(func() { registered = nil })

var _ = AfterEach(func() {
	sr := CurrentSpecReport()
	if sr.MaxMustPassRepeatedly < 2 || sr.Failed() || sr.NumAttempts >= sr.MaxMustPassRepeatedly {
		return // not repeated, or this attempt is the last: its row is the final report's
	}
	var row results.ScenarioResult
	if registered != nil {
		row = *registered
	}
	row.Spec, row.Labels = sr.FullText(), sr.Labels()
	if row.Name == "" {
		row.Name = row.Spec
	}
	row.Verdict, row.Passed = results.VerdictPass, true
	row.Notes = append(row.Notes, fmt.Sprintf("run %d of %d", sr.NumAttempts, sr.MaxMustPassRepeatedly))
	earlierRuns = append(earlierRuns, earlierRun{attempt: sr.NumAttempts, row: row})
	registered = nil
})

// clusterWarnings are the running spec's cluster's warnings, taken before
// its teardown.
var clusterWarnings []string

// Exactly one row per spec that ran: passed, failed (with the failure and
// where it happened, teardown failures included) or skipped (with the
// reason), carrying whatever figures the spec registered, even none. Specs
// the label filter left out did not run and get no row.
var _ = ReportAfterEach(func(sr SpecReport) {
	res := registered
	registered = nil
	if sr.NumAttempts == 0 || resultsFile == nil {
		return
	}
	for _, e := range earlierRuns {
		if e.attempt >= sr.NumAttempts {
			continue // that attempt turned out to be the last (it failed in its cleanup)
		}
		if err := resultsFile.Add(e.row); err != nil {
			Fail(fmt.Sprintf("could not write run %d's row of %q to %s: %v", e.attempt, e.row.Spec, resultsFile.Path(), err))
		}
	}
	earlierRuns = nil
	row := scenarioRow(sr, res)
	if row.Conformance == nil && conformanceCase != nil {
		cc := *conformanceCase
		row.Conformance = &cc
	}
	conformanceCase = nil
	if sr.MaxMustPassRepeatedly > 1 {
		row.Notes = append(row.Notes, fmt.Sprintf("run %d of %d", sr.NumAttempts, sr.MaxMustPassRepeatedly))
	}
	for _, w := range clusterWarnings {
		if !slices.Contains(row.Notes, w) {
			row.Notes = append(row.Notes, w)
		}
	}
	clusterWarnings = nil
	if err := resultsFile.Add(row); err != nil {
		// A failure here fails the spec (and so the suite): a run whose
		// results file lacks a row must not pass.
		Fail(fmt.Sprintf("could not write the row of %q to %s: %v", row.Spec, resultsFile.Path(), err))
	}
})

// scenarioRow is a spec's row from its final report and the figures it
// registered (nil: none).
func scenarioRow(sr SpecReport, res *results.ScenarioResult) results.ScenarioResult {
	var row results.ScenarioResult
	if res != nil {
		row = *res
	}
	row.Spec = sr.FullText()
	if row.Name == "" {
		row.Name = row.Spec
	}
	row.Labels = sr.Labels()
	if row.Duration == 0 {
		row.Duration = sr.RunTime.Seconds()
	}
	switch {
	case sr.State.Is(types.SpecStatePassed):
		row.Verdict = results.VerdictPass
	case sr.State.Is(types.SpecStateSkipped | types.SpecStatePending):
		row.Verdict = results.VerdictSkip
		row.Failure = sr.Failure.Message
	default:
		row.Verdict = results.VerdictFail
		msgs := []string{fmt.Sprintf("[%s in %s] %s", sr.State, sr.Failure.FailureNodeType, sr.Failure.Message)}
		for _, af := range sr.AdditionalFailures {
			msgs = append(msgs, fmt.Sprintf("then [%s in %s] %s", af.State, af.Failure.FailureNodeType, af.Failure.Message))
		}
		row.Failure = strings.Join(msgs, "\n")
		row.FailureLocation = sr.Failure.Location.String()
	}
	row.Passed = row.Verdict == results.VerdictPass
	// Every figure's declared kind, what compare judges it by (an
	// undeclared one gets "" and a note).
	row.MarkUndeclaredFigures()
	return row
}

// One line per spec as it ends, for a person watching a long run (in the VM
// above all): ci/testsummary prints "[birdcage] " lines as they arrive.
// Specs the label filter left out are reported as skipped with no reason;
// they did not run and get no line.
var _ = ReportAfterEach(func(r SpecReport) {
	if r.State == types.SpecStateSkipped && r.Failure.Message == "" {
		return
	}
	fmt.Printf("[birdcage] spec %-7s %6.1fs  %s\n", r.State, r.RunTime.Seconds(), r.FullText())
	if r.State == types.SpecStateSkipped {
		// ci/testsummary judges a skip by its reason against the stage's
		// declared skips (ci/expected-skips).
		fmt.Printf("[birdcage] spec skipped because: %s\n", firstLineOf(r.Failure.Message))
	}
})

func firstLineOf(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
