package scenarios_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

func TestScenarios(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "birdcage scenarios")
}

var (
	resultsFile *results.Results
	current     *harness.Cluster // the running spec's cluster, for diagnostics
)

var _ = BeforeSuite(func() {
	Expect(cfgErr).NotTo(HaveOccurred())
	if cfg.Repeat > 1 {
		// One repeat mechanism: the suite runs each spec once; `birdcage
		// run --repeat N` (whose default $BIRDCAGE_REPEAT is) runs the
		// suite N times and keeps every run's rows, a failed run's too.
		// Only the live-change sweep reads it here, as its sample count.
		fmt.Printf("[birdcage] %s=%d: specs run once per suite run; `birdcage run --repeat %d` runs the suite %d times, every run kept (the sweep takes it as its sample count)\n",
			env.Repeat, cfg.Repeat, cfg.Repeat, cfg.Repeat)
	}
	topo.ForceTunnel(cfg.Tunnel)
	// An Eventually without a limit of its own waits this long: long
	// enough for any route, session or flow of a converged cluster to
	// settle, on this machine.
	SetDefaultEventuallyTimeout(machine.Wait(30 * time.Second))
	var err error
	resultsFile, err = harness.OpenResults(results.ResultsPath(cfg.Artifacts, cfg.Lab), cfg.ResultsJoin, cfg.Build, machine)
	Expect(err).NotTo(HaveOccurred())
})

// cfg is the suite's environment knobs (internal/env): the suite's edge, the
// only place it reads the environment. It is read when the package loads
// because node timeouts (NodeTimeout) and the specs a knob adds or leaves
// out are settled as the spec tree is built, before BeforeSuite; a bad
// value fails the suite, naming the variable.
var cfg, cfgErr = env.LoadOS()

// machine is the profile every cluster of the suite starts on and every
// wait of a spec takes its limit from: a limit is written as it is at
// native speed and machine.Wait makes it this machine's.
var machine = cfg.Machine()

var _ = BeforeEach(func() { testenv.NeedRoot(GinkgoT()) })

// On failure, before the cluster is torn down, keep everything a person
// needs to see why, and say where it is.
var _ = JustAfterEach(func(ctx SpecContext) {
	if current == nil {
		return
	}
	// What makes the run's figures doubtful (a host-wide limit the
	// emulation exceeded), whatever the verdict, for the row and the log.
	clusterWarnings = current.Warnings()
	for _, w := range clusterWarnings {
		fmt.Printf("[birdcage] warning: %s\n", w)
	}
	if !CurrentSpecReport().Failed() {
		return
	}
	dir := filepath.Join(results.ArtifactsDir(cfg.Artifacts), slug(CurrentSpecReport().FullText()))
	if err := current.Diagnose(ctx, dir); err != nil {
		AddReportEntry("diagnostics failed", err.Error())
		return
	}
	AddReportEntry("diagnostics", "node routes, links, BIRD state and logs, programmer logs, route timelines: "+dir)
	fmt.Printf("[birdcage] diagnostics for the failed spec are in %s\n", dir)
})

// startCluster brings up a built-in topology and tears it down after the
// spec. A topology this kernel cannot build skips with the missing feature
// (and fails where the environment promised it).
func startCluster(ctx context.Context, name string, opts harness.Options) *harness.Cluster {
	GinkgoHelper()
	t, err := topo.Builtin(name)
	Expect(err).NotTo(HaveOccurred())
	return startClusterOn(ctx, t, opts)
}

// startClusterOn is startCluster for a topology built in Go (a built-in with
// a variation, say).
func startClusterOn(ctx context.Context, t *topo.Topology, opts harness.Options) *harness.Cluster {
	GinkgoHelper()
	name := t.Name
	if opts.Machine == nil {
		opts.Machine = &machine
	}
	opts, err := harness.WithEnv(cfg, opts)
	Expect(err).NotTo(HaveOccurred(), "the run's environment")
	c, err := harness.Start(ctx, t, opts)
	testenv.SkipIfMissing(GinkgoT(), err, "topology "+name)
	Expect(err).NotTo(HaveOccurred(), "start cluster on topology %s", name)
	current = c
	progressCluster.Store(c)
	armCaptures(c)
	DeferCleanup(func() {
		current = nil
		progressCluster.Store(nil)
		if keepIfFailed(c) {
			return
		}
		Expect(c.Stop()).To(Succeed(), "tear down cluster")
	})
	return c
}

// act asserts that a cluster action succeeded and returns the event it
// marked: act(c.UpgradeNode(ctx, "node-2", config.R333, harness.UpgradeOptions{})).
func act(e results.Event, err error) results.Event {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred(), "cluster action %s", e.Name)
	return e
}

// registered is the running spec's figures, stored by report and written
// as its row by the ReportAfterEach below once the spec has ended.
var registered *results.ScenarioResult

// report prints a table for people (go test -v, CI logs) and registers the
// scenario's figures for its row in the results file. It decides nothing:
// the row's verdict is the spec's final state, written after the spec and
// its cleanup have run, so a spec may register early and assert after.
func report(title, table string, res results.ScenarioResult) {
	GinkgoHelper()
	AddReportEntry(title, table)
	for _, line := range strings.Split(strings.TrimRight("== "+title+"\n"+table, "\n"), "\n") {
		fmt.Println("[birdcage] " + line)
	}
	res.Registered = true
	registered = &res
	addFigureEntries(res)
}

var _ = ReportBeforeEach(func(SpecReport) { registered, clusterWarnings, earlierRuns = nil, nil, nil })

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
	row.RecordFigureKinds()
	return row
}

var nonWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

func slug(s string) string {
	s = strings.Trim(nonWord.ReplaceAllString(s, "-"), "-")
	if len(s) > 100 {
		s = s[:100]
	}
	return s
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
