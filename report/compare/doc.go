// Package compare is the upgrade gate: it compares two runs' results files
// (release A's and release B's) scenario by scenario and figure by figure,
// and per probe flow where both sides have probe reports, and says which
// changes are regressions under the caller's thresholds and budget.
//
// It is pure: it reads results.ResultsFile values and returns a Report; the
// CLI (`birdcage compare`) reads the files, prints and sets the exit status,
// and report/htmlreport draws the two runs side by side.
//
// It must not run scenarios or touch the system.
package compare
