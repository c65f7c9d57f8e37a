package results

import (
	"os"
	"path/filepath"
	"testing"
)

// ArtifactsDir is the same directory from anywhere in the checkout (go
// test runs a package's tests in the package's directory; the CLI runs at
// the root), and $BIRDCAGE_ARTIFACTS wins.
func TestArtifactsDirFromAnyWorkingDirectory(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "artifacts")
	for _, dir := range []string{root, filepath.Join(root, "scenarios"), filepath.Join(root, "instrument", "probe")} {
		t.Chdir(dir)
		if got := ArtifactsDir(""); got != want {
			t.Errorf("from %s: ArtifactsDir() = %s, want %s", dir, got, want)
		}
	}
	if got, want := ArtifactsDir("elsewhere"), filepath.Join(filepath.Join(root, "instrument", "probe"), "elsewhere"); got != want {
		t.Errorf("with the artifacts dir elsewhere: %s, want %s (made absolute)", got, want)
	}
	// Outside a checkout: ./artifacts.
	tmp := t.TempDir()
	t.Chdir(tmp)
	if _, err := os.Stat(filepath.Join(tmp, "go.mod")); err == nil {
		t.Fatal("guard: the temp dir has a go.mod")
	}
	if got := ArtifactsDir(""); got != filepath.Join(tmp, "artifacts") {
		t.Errorf("outside a checkout: %s, want %s", got, filepath.Join(tmp, "artifacts"))
	}
}

func TestVerdictOfOldRows(t *testing.T) {
	for _, c := range []struct {
		r    ScenarioResult
		want Verdict
	}{
		{ScenarioResult{Passed: true}, VerdictPass},
		{ScenarioResult{Passed: false}, VerdictFail},
		{ScenarioResult{Verdict: VerdictSkip}, VerdictSkip},
	} {
		if got := c.r.VerdictOf(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.r, got, c.want)
		}
	}
}

// A lab run writes its own results file: ci/test runs the lab specs right
// after the whole suite, and one file for both lost the suite's rows.
func TestResultsNameOfALabRun(t *testing.T) {
	for _, c := range []struct{ lab, want string }{
		{"", "results-6.1.0.json"},
		{"handmade", "results-lab-handmade-6.1.0.json"},
		{"/etc/labs/kind calico.yaml", "results-lab-kind_calico-6.1.0.json"},
	} {
		if got := resultsName("6.1.0", c.lab); got != c.want {
			t.Errorf("lab %q: %s, want %s", c.lab, got, c.want)
		}
	}
}
