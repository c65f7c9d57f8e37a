package harness

import (
	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/report/results"
)

// OpenResults starts (or, with join, the run's $BIRDCAGE_RESULTS_JOIN,
// joins) the results file at path, recording this process's CurrentRunEnv
// on machine m. The results model itself is harness/results.
func OpenResults(path, join, build string, m machine.Profile) (*results.Results, error) {
	return results.OpenResultsJoin(path, join, CurrentRunEnv(m, build))
}
