package main

// Holds the gate's pairing in place: BASE has every scenario passing; a NEW
// in which (a) the headline upgrade fails before it registers its title, (b)
// a scenario is missing, or (c) a scenario skipped must exit 1 and name the
// scenario. Rows are written the way scenarios/suite_test.go writes them: Spec
// is the spec's full text, Name the title the spec registered (the full text
// again when it never got that far).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/report/results"
)

const (
	headlineSpec  = "Upgrade handover (IPIP) [ipip, claim2] SIGKILL of the old BIRD: no lost probe on routes the new programmer wants"
	headlineTitle = "upgrade handover on ipip (SIGKILL)"
	cleanupSpec   = "Persisted-route cleanup [ipip, claim4] removes a stray proto bird route via tunl0"
	matrixSpec    = "Ownership matrix [noencap, claim1] Enabled/Disabled: the programmer owns every remote block"
)

func gateRow(spec, title string, v results.Verdict, figs map[string]float64) results.ScenarioResult {
	return results.ScenarioResult{Spec: spec, Name: title, Verdict: v, Passed: v == results.VerdictPass,
		Registered: title != spec, Topology: "ipip", Figures: figs}
}

func allPassing() []results.ScenarioResult {
	return []results.ScenarioResult{
		gateRow(headlineSpec, headlineTitle, results.VerdictPass, map[string]float64{"lostProbes": 0, "longestProbeGapMs": 2}),
		gateRow(cleanupSpec, "stray cleanup via tunl0", results.VerdictPass, nil),
		gateRow(matrixSpec, "matrix Enabled/Disabled", results.VerdictPass, nil),
	}
}

func writeResults(t *testing.T, name string, rows []results.ScenarioResult) string {
	t.Helper()
	b, err := json.Marshal(results.ResultsFile{Kernel: "6.18", Scenarios: rows})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompareGateCatchesEveryBrokenClaim(t *testing.T) {
	base := writeResults(t, "base.json", allPassing())
	for _, tc := range []struct {
		name  string
		edit  func([]results.ScenarioResult) []results.ScenarioResult
		code  int
		names string // what the output must name: the title BASE registered
	}{
		{"identical (positive control)", func(rs []results.ScenarioResult) []results.ScenarioResult { return rs }, 0, "0 regressed"},
		{"headline fails before registering", func(rs []results.ScenarioResult) []results.ScenarioResult {
			rs[0] = gateRow(headlineSpec, headlineSpec, results.VerdictFail, nil)
			rs[0].Failure = "[FAILED in It] the programmer never took over node-2's blocks"
			return rs
		}, 1, headlineTitle},
		{"a scenario is missing", func(rs []results.ScenarioResult) []results.ScenarioResult { return rs[:2] }, 1, "matrix Enabled/Disabled"},
		{"a scenario skipped", func(rs []results.ScenarioResult) []results.ScenarioResult {
			rs[1] = gateRow(cleanupSpec, cleanupSpec, results.VerdictSkip, nil)
			rs[1].Failure = "missing kernel/host feature ipip: the kernel has no ipip"
			return rs
		}, 1, "stray cleanup via tunl0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nw := writeResults(t, "new.json", tc.edit(allPassing()))
			out, code := cli(t, nil, "compare", base, nw)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			if !strings.Contains(out, tc.names) {
				t.Fatalf("the output does not name %q:\n%s", tc.names, out)
			}
		})
	}
}

// --allow turns an expected absence or skip into a remark; a failure stays a
// regression whatever is allowed. --fail-on-fail makes a claim broken on both
// sides a regression.
func TestCompareGateAllowAndFailOnFail(t *testing.T) {
	base := writeResults(t, "base.json", allPassing())
	skipped := allPassing()
	skipped[1] = gateRow(cleanupSpec, cleanupSpec, results.VerdictSkip, nil)
	nw := writeResults(t, "new.json", skipped[:2])
	if out, code := cli(t, nil, "compare", "--allow", cleanupSpec, "--allow", "matrix Enabled/Disabled", base, nw); code != 0 {
		t.Fatalf("allowed skip and absence: exit %d:\n%s", code, out)
	}
	failing := allPassing()
	failing[0].Verdict, failing[0].Passed, failing[0].Failure = results.VerdictFail, false, "lost 40 probes"
	bothFail := writeResults(t, "fail.json", failing)
	if out, code := cli(t, nil, "compare", "--allow", headlineTitle, base, bothFail); code != 1 {
		t.Fatalf("an allowed scenario that fails must still regress: exit %d:\n%s", code, out)
	}
	if out, code := cli(t, nil, "compare", bothFail, bothFail); code != 0 {
		t.Fatalf("fail → fail without --fail-on-fail: exit %d:\n%s", code, out)
	}
	if out, code := cli(t, nil, "compare", "--fail-on-fail", bothFail, bothFail); code != 1 || !strings.Contains(out, headlineTitle) {
		t.Fatalf("fail → fail with --fail-on-fail: exit %d:\n%s", code, out)
	}
}
