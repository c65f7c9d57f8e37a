package results

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/testenv"
)

// joinHelperEnv makes this test binary a writer process of
// TestResultsJoinAcrossProcesses: "path token name rows". TestMain is this
// test binary's edge: the only place it reads the environment.
const joinHelperEnv = env.ResultsJoinHelper

func TestMain(m *testing.M) {
	if v := testenv.Env().ResultsJoinHelper; v != "" {
		os.Exit(joinHelper(v))
	}
	os.Exit(m.Run())
}

func joinHelper(v string) int {
	var path, token, name string
	var rows int
	if _, err := fmt.Sscanf(v, "%s %s %s %d", &path, &token, &name, &rows); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	if token == "-" {
		token = ""
	}
	r, err := OpenResultsJoin(path, token, &RunEnv{Where: "native"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	for i := range rows {
		if err := r.Add(ScenarioResult{Name: name + "-" + strconv.Itoa(i), Verdict: VerdictPass, Passed: true}); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
	}
	return 0
}

func rowNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range f.Scenarios {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// Three processes of one run write one results file at once, as ci/test's
// concurrent spec shards do: every row of every process is in the file.
// The positive control is the same three processes without the token: the
// file keeps one process's rows only, the loss the join exists to prevent.
func TestResultsJoinAcrossProcesses(t *testing.T) {
	run := func(path, token string) {
		t.Helper()
		var cmds []*exec.Cmd
		for _, name := range []string{"a", "b", "c"} {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			// "-" stands for no token (Sscanf needs a field).
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %d", joinHelperEnv, path, token, name, 25))
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		for _, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("writer process: %v", err)
			}
		}
	}
	dir := t.TempDir()
	joined := filepath.Join(dir, "joined", "results.json")
	run(joined, "run-1")
	if got := rowNames(t, joined); len(got) != 75 {
		t.Fatalf("joined: %d rows, want 75 (25 from each of 3 processes): %v", len(got), got)
	}
	f, err := ReadResults(joined)
	if err != nil {
		t.Fatal(err)
	}
	if f.Join != "run-1" {
		t.Errorf("joined file's token %q, want run-1", f.Join)
	}
	// No temporary file left beside it, and no lock file.
	ents, _ := os.ReadDir(filepath.Dir(joined))
	if len(ents) != 1 {
		t.Errorf("beside the results: %v, want the results file only", ents)
	}

	// Control: without a token, each process owns the file and rewrites it
	// with its own rows only.
	alone := filepath.Join(dir, "alone", "results.json")
	run(alone, "-")
	if got := rowNames(t, alone); len(got) >= 75 {
		t.Fatalf("control: %d rows without the join: the test cannot see a lost row", len(got))
	}
}

// A file another run left (another token, or none) is started afresh by
// the first process of a new run, not joined; a process of the same run
// joins it.
func TestResultsJoinStartsAfreshForAnotherRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	old, err := OpenResultsJoin(path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := old.Add(ScenarioResult{Name: fmt.Sprint("old-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := OpenResultsJoin(path, "new", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowNames(t, path); len(got) != 0 {
		t.Fatalf("a new run joined another run's rows: %v", got)
	}
	if err := first.Add(ScenarioResult{Name: "first"}); err != nil {
		t.Fatal(err)
	}
	second, err := OpenResultsJoin(path, "new", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Add(ScenarioResult{Name: "second"}); err != nil {
		t.Fatal(err)
	}
	if err := first.Add(ScenarioResult{Name: "first-again"}); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(rowNames(t, path)), "[first first-again second]"; got != want {
		t.Fatalf("rows %s, want %s", got, want)
	}
	// A later run with another token starts afresh again.
	if _, err := OpenResultsJoin(path, "newer", nil); err != nil {
		t.Fatal(err)
	}
	if got := rowNames(t, path); len(got) != 0 {
		t.Fatalf("run newer kept run new's rows: %v", got)
	}
}

// A file that is not a results file is an error naming it, not silently
// replaced: another process of the run may be mid-way.
func TestResultsJoinRefusesACorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenResultsJoin(path, "x", nil)
	if err == nil {
		t.Fatal("joined a corrupt results file")
	}
	if want := path; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}
