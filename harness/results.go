package harness

import (
	"github.com/birdcage/birdcage/harness/probe"
	"github.com/birdcage/birdcage/harness/results"
)

// The results model is harness/results. These aliases and forwards keep the
// scenarios' harness.ScenarioResult, harness.NewTable and the rest; new
// code imports harness/results directly.
type (
	ScenarioResult = results.ScenarioResult
	Results        = results.Results
	ResultsFile    = results.ResultsFile
	RunEnv         = results.RunEnv
	Verdict        = results.Verdict
	Stats          = results.Stats
	Table          = results.Table
)

const (
	VerdictPass = results.VerdictPass
	VerdictFail = results.VerdictFail
	VerdictSkip = results.VerdictSkip
)

// OpenResults starts (or, with join, the run's $BIRDCAGE_RESULTS_JOIN,
// joins) the results file at path, recording this process's CurrentRunEnv
// on machine m.
func OpenResults(path, join string, m Machine) (*Results, error) {
	return results.OpenResultsJoin(path, join, CurrentRunEnv(m))
}

// ReadResults reads a results file (results.ReadResults).
func ReadResults(path string) (*ResultsFile, error) { return results.ReadResults(path) }

// ResultsPath is where a scenario run on this kernel writes its results
// (results.ResultsPath).
func ResultsPath(artifacts, lab string) string { return results.ResultsPath(artifacts, lab) }

// ArtifactsDir is where diagnostics and results files go
// (results.ArtifactsDir).
func ArtifactsDir(dir string) string { return results.ArtifactsDir(dir) }

// GapTable renders a probe report as a table a person reads.
func GapTable(rep *probe.Report) string { return results.GapTable(rep) }

// NewTable is a text table with these column titles (results.NewTable).
func NewTable(cols ...string) *Table { return results.NewTable(cols...) }

// Cellf formats one table cell.
func Cellf(format string, a ...any) string { return results.Cellf(format, a...) }

// Repeats is n (the run's $BIRDCAGE_REPEAT) when set, else def.
func Repeats(n, def int) int { return results.Repeats(n, def) }

// NewSweep starts a sweep over knob, measured in unit (results.NewSweep).
func NewSweep(knob, unit string) *results.Sweep { return results.NewSweep(knob, unit) }

// Summarize computes the distribution of samples (results.Summarize).
func Summarize(samples []float64) Stats { return results.Summarize(samples) }

// LinearFit fits y ≈ A·x + B by ordinary least squares.
func LinearFit(x, y []float64) (results.Fit, error) { return results.LinearFit(x, y) }
