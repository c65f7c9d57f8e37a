package scenarios_test

// A test of the suite machinery, outside the Ginkgo suite: it runs this
// very test binary again as a child, with BIRDCAGE_SELFTEST=fail (which
// registers the self-test specs of selftest_specs_test.go), a temporary
// artifacts directory and the selftest label, then reads the results file
// the child wrote and runs `birdcage report --brief` on it. A spec made to
// fail on purpose must leave a FAIL row with its message, one that fails
// before registering figures must leave a row too, a skipped one a SKIP row
// with its reason, a teardown failure a FAIL row; and the report must print
// them. The control: a spec that passes leaves a PASS row with its figures,
// and without the variable the suite has no self-test spec at all.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/report/results"
)

func TestSuiteMachinery(t *testing.T) {
	if cfg.Selftest != "" {
		t.Skipf("%s is set: this is (or could be) the child run of the self-test", selftestEnv)
	}
	testenv.NeedRoot(t) // the suite's BeforeEach skips every spec without root

	child := func(t *testing.T, artifacts string, vars []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestScenarios$", "-ginkgo.no-color"}, args...)...)
		cmd.Env = append(os.Environ(), append(vars, env.Set(env.Artifacts, artifacts))...)
		out, err := cmd.CombinedOutput()
		// The child's Ginkgo summary is shown only when this test fails,
		// and defused: ci/testsummary counts any "N Passed | N Failed"
		// line in a test's output as a suite's specs.
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("child %v: %v\n%s", cmd.Args[1:], err, defuse(string(out)))
			}
		})
		return string(out)
	}

	t.Run("without the variable the suite has no self-test spec", func(t *testing.T) {
		dir := t.TempDir()
		out := child(t, dir, nil, "-ginkgo.dry-run", "-ginkgo.v")
		if !strings.Contains(out, "Ran ") {
			t.Fatalf("guard: the dry run listed no specs at all:\n%s", out)
		}
		if strings.Contains(out, "Suite machinery self-test") {
			t.Errorf("the default suite contains the self-test specs")
		}
		out = child(t, dir, nil, "-ginkgo.label-filter=selftest")
		if !strings.Contains(out, "Ran 0 of") {
			t.Errorf("label selftest without %s ran specs:\n%s", selftestEnv, out)
		}
	})

	dir := t.TempDir()
	out := child(t, dir, []string{env.Set(selftestEnv, "fail")}, "-ginkgo.label-filter=selftest")
	if !strings.Contains(out, "2 Passed | 3 Failed") {
		t.Fatalf("guard: the child should run the self-test specs (2 pass, one of them three times; 3 fail, 1 skips):\n%s", out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "results-*.json"))
	if len(files) != 1 {
		t.Fatalf("the child wrote %d results files to %s (%v), want 1", len(files), dir, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scenarios []results.ScenarioResult `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	const prefix = "Suite machinery self-test "
	const repeatedSpec = prefix + "runs three times, a row each"
	rows := map[string]results.ScenarioResult{}
	var runs []results.ScenarioResult // the repeated spec's, in order
	for _, r := range doc.Scenarios {
		if r.Spec == repeatedSpec {
			runs = append(runs, r)
			continue
		}
		if _, dup := rows[r.Spec]; dup {
			t.Errorf("two rows for spec %q", r.Spec)
		}
		rows[r.Spec] = r
	}
	if len(doc.Scenarios) != 8 {
		t.Errorf("%d rows, want exactly one per spec run (5 specs once, one three times: 8): %+v", len(doc.Scenarios), doc.Scenarios)
	}
	// A repeated spec has a row per run, each with its own figures.
	if len(runs) != 3 {
		t.Errorf("the repeated spec has %d rows, want 3 (one per run): %+v", len(runs), runs)
	}
	for i, r := range runs {
		if r.Verdict != results.VerdictPass || r.Figures["attempt"] != float64(i+1) || r.Name != "selftest: repeated" ||
			!slicesContains(r.Notes, fmt.Sprintf("run %d of 3", i+1)) {
			t.Errorf("run %d's row: %+v", i+1, r)
		}
	}
	check := func(spec string, verdict results.Verdict, registered bool, msg string) results.ScenarioResult {
		t.Helper()
		r, ok := rows[prefix+spec]
		if !ok {
			t.Errorf("no row for %q; rows: %v", spec, keys(rows))
			return r
		}
		if r.Verdict != verdict || r.Passed != (verdict == results.VerdictPass) {
			t.Errorf("%q: verdict %q passed %v, want %q", spec, r.Verdict, r.Passed, verdict)
		}
		if r.Registered != registered {
			t.Errorf("%q: registered %v, want %v", spec, r.Registered, registered)
		}
		if msg != "" && !strings.Contains(r.Failure, msg) {
			t.Errorf("%q: failure %q does not carry %q", spec, r.Failure, msg)
		}
		if msg == "" && r.Failure != "" {
			t.Errorf("%q: a passing row carries a failure %q", spec, r.Failure)
		}
		if !slicesContains(r.Labels, "selftest") {
			t.Errorf("%q: labels %v", spec, r.Labels)
		}
		return r
	}
	pass := check("passes after registering figures (positive control)", results.VerdictPass, true, "")
	if pass.Name != "selftest: passes" || pass.Figures["answer"] != 42 {
		t.Errorf("the passing row lost its registered name or figures: %+v", pass)
	}
	failed := check("registers figures, then its claim fails", results.VerdictFail, true, selftestFailMsg)
	if failed.Figures["answer"] != 42 || !strings.Contains(failed.FailureLocation, "selftest_specs_test.go") {
		t.Errorf("the failed row should keep its figures and say where it failed: %+v", failed)
	}
	early := check("fails before registering figures", results.VerdictFail, false, selftestEarlyMsg)
	if early.Name != early.Spec || len(early.Figures) != 0 {
		t.Errorf("a row without registered figures is named by its spec and has no figures: %+v", early)
	}
	check("is skipped", results.VerdictSkip, false, selftestSkipMsg)
	check("passes its body but fails in its teardown", results.VerdictFail, true, selftestTeardownMsg)

	// birdcage report --brief, from the module root with no argument: it
	// must find the file through BIRDCAGE_ARTIFACTS, say it read it, and
	// print the FAIL rows with their reasons.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain here to build cmd/birdcage: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "birdcage")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/birdcage")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/birdcage: %v\n%s", err, b)
	}
	rep := exec.Command(bin, "report", "--brief")
	rep.Env = append(os.Environ(), env.Set(env.Artifacts, dir))
	rep.Dir = t.TempDir() // any working directory
	o, err := rep.CombinedOutput()
	report := string(o)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("birdcage report --brief: %v\n%s", err, report)
		}
	})
	if err != nil {
		t.Fatalf("birdcage report --brief: %v", err)
	}
	for _, want := range []string{
		"read " + files[0],
		"4 passed, 3 failed, 1 skipped", // the repeated spec is 3 rows
		"PASS  selftest: passes",
		"FAIL  selftest: registers then fails",
		selftestFailMsg,
		"selftest_specs_test.go:",
		"FAIL  " + prefix + "fails before registering figures",
		selftestEarlyMsg,
		"SKIP  " + prefix + "is skipped",
		selftestSkipMsg,
		"FAIL  selftest: teardown fails",
		selftestTeardownMsg,
	} {
		if !strings.Contains(report, want) {
			t.Errorf("birdcage report --brief does not print %q", want)
		}
	}
	if strings.Contains(report, "Expected\n") && !strings.Contains(report, selftestFailMsg) {
		t.Errorf("report printed a failure without its message")
	}
}

// defuse keeps a child suite's summary lines from reading as this run's.
func defuse(s string) string {
	return strings.NewReplacer(" | ", " / ", "Ran ", "ran ").Replace(s)
}

func keys(m map[string]results.ScenarioResult) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
