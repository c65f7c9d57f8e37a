package main

// Holds `birdcage compare` and `birdcage report` in place as CI uses them:
// two recorded results files (testdata/results at the root: a real native
// run, and the same run with one flow's gap made worse) give exit 0 when
// identical and exit 1 naming the regression when worse; bad input exits 2
// naming the file and field; a budget judges every flow; --html and
// --markdown write their files.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/testenv"
)

const (
	recorded  = "../../testdata/results/liveconfig-noencap.json"
	worseGap  = "../../testdata/results/liveconfig-noencap-worse-gap.json"
	worseFlow = "node-1-w0->node-2-w0" // the flow worse-gap.json changed (README)
)

// birdcageBin is the CLI every test of the package runs; builtHere says
// TestMain built it, with birdcage-programmer next to it.
var (
	birdcageBin string
	builtHere   bool
)

// TestMain builds the CLI (and the programmer beside it, where `up` finds
// it) once for the package's tests, unless CLIEnv names a prebuilt one:
// ci/test builds it on the host, and in the VM a go build under software
// emulation took 28 of the package's 44 s.
func TestMain(m *testing.M) {
	if cli := testenv.Env().CLI; cli != "" {
		birdcageBin = cli
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "birdcage-cli-test")
	if err != nil {
		panic(err)
	}
	birdcageBin, builtHere = filepath.Join(dir, "birdcage"), true
	for out, pkg := range map[string]string{birdcageBin: ".", filepath.Join(dir, "birdcage-programmer"): "../birdcage-programmer"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			panic("go build " + pkg + ": " + err.Error() + "\n" + string(b))
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs birdcage and returns its output and exit status.
func cli(t *testing.T, vars []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(birdcageBin, args...)
	cmd.Env = append(os.Environ(), vars...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("birdcage %v: %v", args, err)
	return "", -1
}

func TestCompareIdenticalRuns(t *testing.T) {
	out, code := cli(t, nil, "compare", recorded, recorded)
	if code != 0 {
		t.Fatalf("identical runs: exit %d, want 0\n%s", code, out)
	}
	if !strings.Contains(out, "regressed") || strings.Contains(out, "REGRESSION") {
		t.Errorf("identical runs should compare with no regression:\n%s", out)
	}
	// Guard: the comparison compared something.
	if strings.Contains(out, " 0 scenarios compared") {
		t.Errorf("nothing compared:\n%s", out)
	}
}

func TestCompareWorseGap(t *testing.T) {
	// The worse gap is 300 ms more on one flow with nothing more lost and
	// no route window: what a sender's stall looks like. Under the default
	// gate (lost probes, the no-route window) it is informational: printed,
	// neither a regression nor an undecided figure.
	out, code := cli(t, nil, "compare", recorded, worseGap)
	squeezed := strings.Join(strings.Fields(out), " ")
	if code != 0 || strings.Contains(out, "not enough samples to judge") || !strings.Contains(squeezed, "longestProbeGapMs 906.4 1205.4 +299") {
		t.Fatalf("worse gap, default gate: exit %d, want 0, the figure printed and nothing undecided\n%s", code, out)
	}
	// Gated on every figure and flow (--gate all), one run a side: the
	// worse gap cannot be told from noise, and the gate says so instead
	// of crying wolf or passing in silence.
	out, code = cli(t, nil, "compare", "--gate", "all", recorded, worseGap)
	if code != 0 || !strings.Contains(out, "not enough samples to judge: 2 figures in 1 scenarios") {
		t.Fatalf("worse gap, --gate all, one run a side: exit %d, want 0 and the undecided figures counted\n%s", code, out)
	}
	// --min-samples makes it an error.
	out, code = cli(t, nil, "compare", "--gate", "all", "--min-samples", "1", recorded, worseGap)
	if code != 1 {
		t.Fatalf("worse gap: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"REGRESSION", "longestProbeGapMs", "flow " + worseFlow + " longest gap ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// --gate names figures; a bad list is refused naming the flag.
	if out, code := cli(t, nil, "compare", "--gate", "longestProbeGapMs", "--min-samples", "1", recorded, worseGap); code != 1 || strings.Contains(out, "flow "+worseFlow+" longest gap ms: not enough") {
		t.Errorf("--gate longestProbeGapMs: exit %d (want 1, the flow not gated)\n%s", code, out)
	}
	if out, code := cli(t, nil, "compare", "--gate", "all,lostProbes", recorded, worseGap); code != 2 || !strings.Contains(out, "--gate") {
		t.Errorf("--gate all,lostProbes: exit %d, want 2 naming --gate\n%s", code, out)
	}
	// A looser threshold lets the same change through.
	if out, code := cli(t, nil, "compare", "--gate", "all", "--min-samples", "1", "--max-gap-increase", "10s", recorded, worseGap); code != 0 {
		t.Errorf("with --max-gap-increase 10s: exit %d, want 0\n%s", code, out)
	}
	html := filepath.Join(t.TempDir(), "compare.html")
	if out, code := cli(t, nil, "compare", "--gate", "all", "--min-samples", "1", "--html", html, recorded, worseGap); code != 1 {
		t.Errorf("with --html: exit %d, want 1\n%s", code, out)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `class="scenario"`); n < 4 || !strings.Contains(string(b), "REGRESSION") {
		t.Errorf("side-by-side page has %d scenario panels (want both sides of each) or no REGRESSION", n)
	}
}

// TestCompareMarkdownTable: --markdown writes one row per paired scenario,
// a cell with two values where the runs differ (worse-gap.json changed
// the first scenario's longest gap from 906 ms to 1205 ms, nothing else),
// and the exit status still judges the comparison.
func TestCompareMarkdownTable(t *testing.T) {
	md := filepath.Join(t.TempDir(), "compare.md")
	out, code := cli(t, nil, "compare", "--gate", "all", "--min-samples", "1", "--markdown", md, recorded, worseGap)
	if code != 1 || !strings.Contains(out, "side-by-side table: "+md) {
		t.Fatalf("with --markdown: exit %d (want 1) or no line naming the table\n%s", code, out)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| live change on noencap") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("want a row for each of the 2 paired scenarios, got %d:\n%s", len(rows), b)
	}
	if !strings.Contains(rows[0], "| 906 / 1205 |") {
		t.Errorf("the changed scenario's gap cell should carry both values:\n%s", rows[0])
	}
	// Positive control: the unchanged scenario has one value per cell.
	if strings.Contains(rows[1], " / ") {
		t.Errorf("the unchanged scenario should have one value per figure:\n%s", rows[1])
	}
	// A file that cannot be written is bad input naming the option.
	bad := filepath.Join(t.TempDir(), "no-such-dir", "compare.md")
	if out, code := cli(t, nil, "compare", "--markdown", bad, recorded, recorded); code != 2 || !strings.Contains(out, "--markdown") {
		t.Errorf("unwritable --markdown: exit %d (want 2) naming the option\n%s", code, out)
	}
}

func TestCompareBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"scenarios":[{"name":"x","figures":{"lostProbes":"many"}}]}`), 0o644)
	notResults := filepath.Join(dir, "other.json")
	os.WriteFile(notResults, []byte(`{"hello":1}`), 0o644)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"compare", recorded, bad}, []string{bad, "scenarios.figures"}},
		{[]string{"compare", notResults, recorded}, []string{notResults, "field scenarios"}},
		{[]string{"compare", recorded, filepath.Join(dir, "missing.json")}, []string{"missing.json"}},
		{[]string{"compare", "--max-ratio", "0.5", recorded, recorded}, []string{"--max-ratio"}},
		{[]string{"compare", "--alpha", "0", recorded, recorded}, []string{"--alpha"}},
		{[]string{"compare", "--min-samples", "0", recorded, recorded}, []string{"--min-samples"}},
	} {
		out, code := cli(t, nil, tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", tc.args, code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: error lacks %q: %s", tc.args, w, out)
			}
		}
	}
}

func TestCompareBudget(t *testing.T) {
	// The live change loses probes on every flow: a budget allowing no
	// disruption fails the identical run, one allowing a few passes it.
	out, code := cli(t, nil, "compare", "--allowed-disruptions", "0", recorded, recorded)
	if code != 1 || !strings.Contains(out, "over budget: flow") || !strings.Contains(out, "allowedDisruptions") {
		t.Errorf("--allowed-disruptions 0: exit %d, want 1 naming the flows over budget\n%s", code, out)
	}
	budget := filepath.Join(t.TempDir(), "budget.yaml")
	os.WriteFile(budget, []byte("default:\n  maxGapMs: 100000\n  allowedDisruptions: 1000\n"), 0o644)
	if out, code := cli(t, nil, "compare", "--budget", budget, recorded, recorded); code != 0 || !strings.Contains(out, "within budget") {
		t.Errorf("generous budget: exit %d, want 0 and within budget\n%s", code, out)
	}
	os.WriteFile(budget, []byte("default:\n  maxGap: 1\n"), 0o644)
	if out, code := cli(t, nil, "compare", "--budget", budget, recorded, recorded); code != 2 || !strings.Contains(out, budget) {
		t.Errorf("bad budget file: exit %d, want 2 naming it\n%s", code, out)
	}
}

func TestReportHTMLAndMarkdown(t *testing.T) {
	dir := t.TempDir()
	html := filepath.Join(dir, "report.html")
	summary := filepath.Join(dir, "summary.md")
	os.WriteFile(summary, []byte("earlier step\n"), 0o644)
	out, code := cli(t, []string{"GITHUB_STEP_SUMMARY=" + summary}, "report", recorded, "-o", html, "--markdown")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "| verdict | scenario |") || !strings.Contains(out, "HTML report: "+html) {
		t.Errorf("report output lacks the Markdown table or the report's path:\n%s", out)
	}
	md, _ := os.ReadFile(summary)
	if !strings.HasPrefix(string(md), "earlier step\n") || !strings.Contains(string(md), "| verdict | scenario |") {
		t.Errorf("$GITHUB_STEP_SUMMARY not appended to:\n%s", md)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("HTML report not written (%v)", err)
	}
}

// `birdcage results merge` refuses a scenario in two shards with exit 2
// naming both files, joins them as a history, and compare takes a
// directory of runs as a side: the recorded run twice is two samples of
// each scenario, still no regression against the one run.
func TestResultsMergeAndDirectorySide(t *testing.T) {
	dir := t.TempDir()
	merged := filepath.Join(dir, "merged.json")
	out, code := cli(t, nil, "results", "merge", "-o", merged, recorded, recorded)
	if code != 2 || !strings.Contains(out, "duplicate scenario") || !strings.Contains(out, "liveconfig-noencap.json") {
		t.Fatalf("merging a run with itself as shards: exit %d, want 2 naming the duplicate\n%s", code, out)
	}
	if out, code := cli(t, nil, "results", "merge", "--history", "-o", merged, recorded, recorded); code != 0 || !strings.Contains(out, "merged 2 files, 4 scenario rows") {
		t.Fatalf("--history: exit %d\n%s", code, out)
	}
	runs := filepath.Join(dir, "runs")
	os.Mkdir(runs, 0o755)
	b, _ := os.ReadFile(recorded)
	os.WriteFile(filepath.Join(runs, "1.json"), b, 0o644)
	os.WriteFile(filepath.Join(runs, "2.json"), b, 0o644)
	out, code = cli(t, nil, "compare", runs, recorded)
	if code != 0 || !strings.Contains(out, "(2 runs: 1.json, 2.json)") || !strings.Contains(out, "repeated: 2 runs in BASE, 1 in NEW") {
		t.Fatalf("a directory as BASE: exit %d\n%s", code, out)
	}
}

// Distributions from real runs (testdata/results/README.md): five runs of
// the headline SIGKILL upgrade against five of a build with the
// gatecheck's 100 ms takeover window. compare exits 1 naming the scenario,
// the figure, its effect and the p-value; the clean runs against
// themselves pass; an α five runs a side cannot reach leaves the figures
// undecided and the verdict judged.
func TestCompareRepeatedRealRuns(t *testing.T) {
	const (
		clean    = "../../testdata/results/headline-upgrade-killed-5runs.json"
		injected = "../../testdata/results/headline-upgrade-killed-takeover-gap-5runs.json"
	)
	out, code := cli(t, nil, "compare", clean, injected)
	if code != 1 {
		t.Fatalf("clean vs injected window: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"REGRESSION  upgrade handover IPIP (killed)",
		"longestNoRouteWindowMs: median 0 → 100.7 (+100.7; +20 ms allowed); Mann–Whitney p=0.00397 one-sided, Holm-adjusted over 2 gated figures 0.00794 < α 0.01 (n=5 vs 5)",
		"failed in 5 of 5 runs in NEW, 0 of 5 in BASE"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Positive control: the same runs on both sides.
	if out, code := cli(t, nil, "compare", clean, clean); code != 0 || !strings.Contains(out, "1 scenarios compared, 0 regressed") {
		t.Errorf("clean vs clean: exit %d\n%s", code, out)
	}
	// A stricter α than five runs a side can reach (Holm asks α/2 =
	// 0.0025 of the smaller p; the smallest is 1/252 ≈ 0.0040): the
	// figures are not enough samples; the verdict still is judged.
	out, code = cli(t, nil, "compare", "--alpha", "0.005", clean, injected)
	if code != 1 || !strings.Contains(out, "not enough samples to judge") || !strings.Contains(out, "failed in 5 of 5 runs") {
		t.Errorf("--alpha 0.005: exit %d\n%s", code, out)
	}
}
