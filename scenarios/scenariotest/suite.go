package scenariotest

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
	"github.com/birdcage/birdcage/topo"
)

// Config is the suite's environment knobs (internal/env): the suite's edge,
// the only place it reads the environment. It is read when the package
// loads because node timeouts (NodeTimeout) and the specs a knob adds or
// leaves out are settled as the spec tree is built, before BeforeSuite; a
// bad value fails the suite, naming the variable.
var Config, configErr = env.LoadOS()

// Machine is the profile every cluster of the suite starts on and every
// wait of a spec takes its limit from: a limit is written as it is at
// native speed and Machine.Wait makes it this machine's.
var Machine = Config.Machine()

var (
	resultsFile *results.Results
	current     *harness.Cluster // the running spec's cluster, for diagnostics
)

var _ = BeforeSuite(func() {
	Expect(configErr).NotTo(HaveOccurred())
	if Config.Repeat > 1 {
		// One repeat mechanism: the suite runs each spec once; `birdcage
		// run --repeat N` (whose default $BIRDCAGE_REPEAT is) runs the
		// suite N times and keeps every run's rows, a failed run's too.
		// Only the live-change sweep reads it here, as its sample count.
		fmt.Printf("[birdcage] %s=%d: specs run once per suite run; `birdcage run --repeat %d` runs the suite %d times, every run kept (the sweep takes it as its sample count)\n",
			env.Repeat, Config.Repeat, Config.Repeat, Config.Repeat)
	}
	topo.ForceTunnel(Config.Tunnel)
	// An Eventually without a limit of its own waits this long: long
	// enough for any route, session or flow of a converged cluster to
	// settle, on this machine.
	SetDefaultEventuallyTimeout(Machine.Wait(30 * time.Second))
	var err error
	resultsFile, err = harness.OpenResults(results.ResultsPath(Config.Artifacts, Config.Lab), Config.ResultsJoin, Config.Build, Machine)
	Expect(err).NotTo(HaveOccurred())
})

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
	dir := filepath.Join(results.ArtifactsDir(Config.Artifacts), slug(CurrentSpecReport().FullText()))
	if err := current.Diagnose(ctx, dir); err != nil {
		AddReportEntry("diagnostics failed", err.Error())
		return
	}
	AddReportEntry("diagnostics", "node routes, links, BIRD state and logs, programmer logs, route timelines: "+dir)
	fmt.Printf("[birdcage] diagnostics for the failed spec are in %s\n", dir)
})

// StartCluster brings up a built-in topology and tears it down after the
// spec. A topology this kernel cannot build skips with the missing feature
// (and fails where the environment promised it).
func StartCluster(ctx context.Context, name string, opts harness.Options) *harness.Cluster {
	GinkgoHelper()
	t, err := topo.Builtin(name)
	Expect(err).NotTo(HaveOccurred())
	return StartClusterOn(ctx, t, opts)
}

// StartClusterOn is StartCluster for a topology built in Go (a built-in
// with a variation, say).
func StartClusterOn(ctx context.Context, t *topo.Topology, opts harness.Options) *harness.Cluster {
	GinkgoHelper()
	name := t.Name
	if opts.Machine == nil {
		opts.Machine = &Machine
	}
	opts, err := harness.WithEnv(Config, opts)
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

// Act asserts that a cluster action succeeded and returns the event it
// marked: Act(c.UpgradeNode(ctx, "node-2", config.R333, harness.UpgradeOptions{})).
func Act(e results.Event, err error) results.Event {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred(), "cluster action %s", e.Name)
	return e
}

var nonWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

// slug is a spec's text as a directory name.
func slug(s string) string {
	s = strings.Trim(nonWord.ReplaceAllString(s, "-"), "-")
	if len(s) > 100 {
		s = s[:100]
	}
	return s
}
