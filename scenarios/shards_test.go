package scenarios_test

// ci/test runs the native suite in shards (ci/scenario-shards): concurrent
// processes for the specs not labelled `timing`, then the `timing` specs
// alone. A spec no shard selects would silently never run in CI, and one
// two shards select would run twice; this test lists the suite by a dry
// run of this very test binary and checks every spec lands in exactly one
// place.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"

	"github.com/birdcage/birdcage/internal/env"
)

// shardFile is the shard list, relative to this package's directory.
const shardFile = "../ci/scenario-shards"

// readShards returns the shard filters of path (comments and blank lines
// dropped), each checked to parse as a Ginkgo label filter.
func readShards(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if _, err := types.ParseLabelFilter(l); err != nil {
			return nil, fmt.Errorf("%s:%d: %q is not a Ginkgo label filter: %v", path, n, l, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// placesOf is where a spec with labels runs under the shards: the indices
// of the shards that select it (with "&& !timing" added, as ci/test does),
// and -1 for the timing run.
func placesOf(shards []types.LabelFilter, labels []string) []int {
	var at []int
	if slices.Contains(labels, "timing") {
		at = append(at, -1)
	}
	for i, f := range shards {
		if !slices.Contains(labels, "timing") && f(labels) {
			at = append(at, i)
		}
	}
	return at
}

func TestScenarioShardsPartitionTheSuite(t *testing.T) {
	lines, err := readShards(shardFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) < 2 {
		t.Fatalf("%s: %d shards; want at least 2 (else nothing runs at once)", shardFile, len(lines))
	}
	var shards []types.LabelFilter
	for _, l := range lines {
		shards = append(shards, types.MustParseLabelFilter(l))
	}

	reports := dryRun(t)
	perPlace := map[int]int{}
	specs := 0
	for _, sr := range reports {
		specs++
		at := placesOf(shards, sr.Labels())
		if len(at) != 1 {
			t.Errorf("spec %q (labels %v) runs in %d places under %s (%v), want exactly 1", sr.FullText(), sr.Labels(), len(at), shardFile, at)
			continue
		}
		perPlace[at[0]]++
	}
	// Guards: the dry run listed the suite, and every place has specs (a
	// shard that selects nothing would fail CI's -ginkgo.fail-on-empty).
	if specs < 50 {
		t.Fatalf("guard: the dry run listed %d specs; the suite has far more", specs)
	}
	for i := -1; i < len(shards); i++ {
		if perPlace[i] == 0 {
			name := "the timing run"
			if i >= 0 {
				name = fmt.Sprintf("shard %q", lines[i])
			}
			t.Errorf("%s selects no spec", name)
		}
	}
	t.Logf("%d specs: timing %d; shards %v", specs, perPlace[-1], perPlace)
}

// The check itself, on labels made up for it: a spec two shards select and
// one none selects are both caught; timing specs go to the timing run only.
func TestScenarioShardPlaces(t *testing.T) {
	shards := []types.LabelFilter{types.MustParseLabelFilter("matrix"), types.MustParseLabelFilter("!matrix && releases")}
	for _, tc := range []struct {
		labels []string
		want   []int
	}{
		{[]string{"matrix", "noencap"}, []int{0}},
		{[]string{"releases"}, []int{1}},
		{[]string{"releases", "timing"}, []int{-1}},
		{[]string{"noencap"}, nil},
	} {
		if got := placesOf(shards, tc.labels); !slices.Equal(got, tc.want) {
			t.Errorf("labels %v: places %v, want %v", tc.labels, got, tc.want)
		}
	}
	overlapping := []types.LabelFilter{types.MustParseLabelFilter("matrix"), types.MustParseLabelFilter("noencap")}
	if got := placesOf(overlapping, []string{"matrix", "noencap"}); len(got) != 2 {
		t.Errorf("overlapping shards: places %v, want 2", got)
	}
	if _, err := readShards(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing shard file read without error")
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("# c\nmatrix &&\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readShards(bad); err == nil || !strings.Contains(err.Error(), bad+":2") {
		t.Errorf("a bad filter: %v, want an error naming %s:2", err, bad)
	}
}

// dryRun lists the suite's specs (Its only) by a dry run of this very test
// binary: no spec body runs, no root is needed.
func dryRun(t *testing.T) []types.SpecReport {
	t.Helper()
	report := filepath.Join(t.TempDir(), "dry.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestScenarios$", "-ginkgo.dry-run", "-ginkgo.no-color", "-ginkgo.json-report="+report)
	cmd.Env = append(os.Environ(), env.Set(env.Artifacts, t.TempDir()))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dry run: %v\n%s", err, defuse(string(out)))
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var reports []types.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 {
		t.Fatalf("dry run: %d suite reports, want 1", len(reports))
	}
	var its []types.SpecReport
	for _, sr := range reports[0].SpecReports {
		if sr.LeafNodeType == types.NodeTypeIt {
			its = append(its, sr)
		}
	}
	return its
}

// claims is how many claims the verdicts issue (issue 11) numbered: one
// label each, claim1 … claim13, so that
// `-ginkgo.label-filter=claimN` runs the specs that hold claim N.
const claims = 13

func TestEveryClaimHasALabelledSpec(t *testing.T) {
	specs := dryRun(t)
	per := map[string][]string{}
	for _, sr := range specs {
		for _, l := range sr.Labels() {
			if strings.HasPrefix(l, "claim") {
				per[l] = append(per[l], sr.FullText())
			}
		}
	}
	for n := 1; n <= claims; n++ {
		l := fmt.Sprintf("claim%d", n)
		filter := types.MustParseLabelFilter(l)
		selected := 0
		for _, sr := range specs {
			if filter(sr.Labels()) {
				selected++
			}
		}
		if selected == 0 {
			t.Errorf("-ginkgo.label-filter=%s selects no spec: claim %d has no spec that can fail for it", l, n)
		}
	}
	for l := range per {
		var n int
		if _, err := fmt.Sscanf(l, "claim%d", &n); err != nil || n < 1 || n > claims || l != fmt.Sprintf("claim%d", n) {
			t.Errorf("label %q (on %q) names no claim: want claim1 … claim%d", l, per[l][0], claims)
		}
	}
	// Guard: the dry run listed the suite.
	if len(specs) < 50 {
		t.Fatalf("guard: the dry run listed %d specs", len(specs))
	}
}
