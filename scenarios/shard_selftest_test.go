package scenarios_test

// The suite split across machines (`birdcage run --shard i/n`, `ci/test
// --shard i/n`), held in place end to end: the self-test specs below
// (registered only with BIRDCAGE_SELFTEST=shard) are listed by a dry run,
// split in two by internal/shard, and run as shard 1/2 and 2/2 in child
// processes of this test binary selected by the shard's Ginkgo focus, and
// once unsharded. Merged (harness/resultsfile.Merge), the two shards' rows must
// be exactly the unsharded run's — the same keys as often, the same
// verdicts — and the merge must refuse the unsharded run beside a shard
// (a duplicate) and a shard of another build.

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/shard"
	"github.com/birdcage/birdcage/internal/testenv"
	resultsfile "github.com/birdcage/birdcage/report/results"
)

var _ = func() bool {
	if cfg.Selftest != "shard" {
		return false
	}
	Describe("Shard self-test", Label("selftest-shard"), func() {
		It("one (a spec that runs alone)", Label("timing"), func() { Expect(1).To(Equal(1)) })
		It("two (a spec that runs alone)", Label("timing"), func() { Expect(2).To(Equal(2)) })
		It("three", func() { Expect(3).To(Equal(3)) })
		It("four runs twice, a row each", MustPassRepeatedly(2), func() { Expect(4).To(Equal(4)) })
		It("five is skipped", func() { Skip("selftest: skipped on purpose") })
		DescribeTable("a table with (regexp) [characters]",
			func(n int) { Expect(n).To(BeNumerically(">", 0)) },
			Entry("entry 1.5 ms?", 1),
			Entry("entry a|b", 2),
		)
	})
	return true
}()

func TestShardsMergeIntoOneRun(t *testing.T) {
	if cfg.Selftest != "" {
		t.Skipf("%s is set: this is (or could be) the child run of a self-test", selftestEnv)
	}
	testenv.NeedRoot(t)

	// 1. The self-test specs, listed by a dry run and split in two.
	report := filepath.Join(t.TempDir(), "dry.json")
	dry := exec.Command(os.Args[0], "-test.run=^TestScenarios$", "-ginkgo.dry-run", "-ginkgo.no-color",
		"-ginkgo.label-filter=selftest-shard", "-ginkgo.json-report="+report)
	dry.Env = append(os.Environ(), env.Set(selftestEnv, "shard"), env.Set(env.Artifacts, t.TempDir()))
	if out, err := dry.CombinedOutput(); err != nil {
		t.Fatalf("dry run: %v\n%s", err, defuse(string(out)))
	}
	var reports []types.Report
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &reports); err != nil || len(reports) != 1 {
		t.Fatalf("dry run report: %v (%d suites)", err, len(reports))
	}
	var specs []shard.Spec
	for _, sr := range reports[0].SpecReports {
		if sr.LeafNodeType == types.NodeTypeIt && sr.State == types.SpecStatePassed {
			specs = append(specs, shard.Spec{Text: sr.FullText(), Labels: sr.Labels()})
		}
	}
	if len(specs) != 7 {
		t.Fatalf("guard: the dry run listed %d self-test specs, want 7", len(specs))
	}
	parts := shard.Split(specs, 2)

	// 2. Unsharded, shard 1/2 and shard 2/2 (build "x"), and shard 2/2 of
	// another build.
	run := func(focus, build string) *resultsfile.ResultsFile {
		t.Helper()
		dir := t.TempDir()
		args := []string{"-test.run=^TestScenarios$", "-ginkgo.no-color", "-ginkgo.label-filter=selftest-shard"}
		if focus != "" {
			args = append(args, "-ginkgo.focus="+focus)
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), env.Set(selftestEnv, "shard"), env.Set(env.Artifacts, dir), env.Set(env.Build, build))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child run (focus %q): %v\n%s", focus, err, defuse(string(out)))
		}
		files, _ := filepath.Glob(filepath.Join(dir, "results-*.json"))
		if len(files) != 1 {
			t.Fatalf("child run (focus %q) wrote %d results files", focus, len(files))
		}
		f, err := resultsfile.ReadResults(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if f.Env == nil || f.Env.Build != build {
			t.Fatalf("guard: the child's results do not record build %q: %+v", build, f.Env)
		}
		return f
	}
	whole := run("", "x")
	one := run(shard.Focus(suiteDescription(), parts[0]), "x")
	two := run(shard.Focus(suiteDescription(), parts[1]), "x")
	other := run(shard.Focus(suiteDescription(), parts[1]), "y")

	// 3. The shards merged are the unsharded run, row for row.
	if len(one.Scenarios) == 0 || len(two.Scenarios) == 0 {
		t.Fatalf("guard: a shard ran nothing (%d and %d rows)", len(one.Scenarios), len(two.Scenarios))
	}
	merged, err := resultsfile.Merge([]resultsfile.Named{{Path: "shard-1.json", File: one}, {Path: "shard-2.json", File: two}}, resultsfile.Shards)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rowsOf(merged), rowsOf(whole); !slices.Equal(got, want) {
		t.Errorf("shards merged give rows\n  %s\nthe unsharded run\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	// Guard: the unsharded run has every spec, the repeated one twice.
	if len(whole.Scenarios) != 8 {
		t.Errorf("guard: the unsharded run wrote %d rows, want 8 (7 specs, one run twice)", len(whole.Scenarios))
	}

	// 4. Refused: the whole run beside a shard, and a shard of another build.
	if _, err := resultsfile.Merge([]resultsfile.Named{{Path: "whole.json", File: whole}, {Path: "shard-1.json", File: one}}, resultsfile.Shards); !errors.Is(err, resultsfile.ErrDuplicateScenario) {
		t.Errorf("the unsharded run merged with a shard: %v, want %v", err, resultsfile.ErrDuplicateScenario)
	}
	if _, err := resultsfile.Merge([]resultsfile.Named{{Path: "shard-1.json", File: one}, {Path: "shard-2-other.json", File: other}}, resultsfile.Shards); !errors.Is(err, resultsfile.ErrMixedBuilds) {
		t.Errorf("shards of two builds merged: %v, want %v", err, resultsfile.ErrMixedBuilds)
	}
}

// suiteDescription is what suite_test.go passes to RunSpecs.
func suiteDescription() string { return "birdcage scenarios" }

// rowsOf is every row's key and verdict, sorted: what a run recorded,
// whatever order its processes wrote it in.
func rowsOf(f *resultsfile.ResultsFile) []string {
	var out []string
	for _, s := range f.Scenarios {
		out = append(out, s.Key()+" → "+string(s.VerdictOf()))
	}
	slices.Sort(out)
	return out
}
