package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
	"github.com/spf13/cobra"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/shard"
	"github.com/birdcage/birdcage/report/results"
)

// suiteDescription is what scenarios/suite_test.go passes to RunSpecs:
// Ginkgo matches a focus against it and the spec's full text.
const suiteDescription = "birdcage scenarios"

// listSuite lists the specs the label filter selects ("": every spec) by
// a dry run of the suite from the checkout's root: no spec body runs.
func listSuite(filter string) ([]shard.Spec, error) {
	dir, err := os.MkdirTemp("", "birdcage-dry-run")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	report := filepath.Join(dir, "dry.json")
	args := []string{"test", "-count=1", "./scenarios", "-run", "^TestScenarios$", "-args", "-ginkgo.dry-run", "-ginkgo.no-color", "-ginkgo.json-report=" + report}
	if filter != "" {
		args = append(args, "-ginkgo.label-filter="+filter)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env.Set(env.Artifacts, dir))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("listing the suite (a dry run of go test ./scenarios, label filter %q): %v\n%s", filter, err, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		return nil, err
	}
	var reports []types.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, fmt.Errorf("the dry run's report %s: %w", report, err)
	}
	var specs []shard.Spec
	for _, r := range reports {
		for _, sr := range r.SpecReports {
			if sr.LeafNodeType == types.NodeTypeIt && sr.State == types.SpecStatePassed {
				sp := shard.Spec{Text: sr.FullText(), Labels: sr.Labels()}
				if sr.IsInOrderedContainer {
					// The container path names the Ordered container
					// (the suite nests none inside another).
					sp.Ordered = strings.Join(sr.ContainerHierarchyTexts, " ")
				}
				specs = append(specs, sp)
			}
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("label filter %q selects no spec of the suite", filter)
	}
	return specs, nil
}

// withDurations sets each spec's seconds from the recorded runs at path (a
// results file or a directory of them): the median of its rows'
// durations. path "" leaves them unknown (the split is then by count).
func withDurations(specs []shard.Spec, path string) ([]shard.Spec, error) {
	if path == "" {
		return specs, nil
	}
	f, _, err := results.ReadSide(path)
	if err != nil {
		return nil, fmt.Errorf("--durations: %w", err)
	}
	byKey := map[string][]float64{}
	for _, r := range f.Scenarios {
		if r.Duration > 0 {
			byKey[r.Key()] = append(byKey[r.Key()], r.Duration)
		}
	}
	out := append([]shard.Spec{}, specs...)
	for i, s := range out {
		if d := byKey[s.Text]; len(d) > 0 {
			sort.Float64s(d)
			out[i].Seconds = d[len(d)/2]
		}
	}
	return out, nil
}

// shardOf is the specs of shard w of the suite the universe filter selects,
// narrowed to those the phase filter selects ("": all).
func shardOf(w shard.Which, universe, phase, durations string) ([]shard.Spec, error) {
	specs, err := listSuite(universe)
	if err != nil {
		return nil, err
	}
	if specs, err = withDurations(specs, durations); err != nil {
		return nil, err
	}
	mine := shard.Split(specs, w.N)[w.I-1]
	if phase == "" {
		return mine, nil
	}
	f, err := types.ParseLabelFilter(phase)
	if err != nil {
		return nil, fmt.Errorf("--label-filter %q: %w", phase, err)
	}
	var out []shard.Spec
	for _, s := range mine {
		if f(s.Labels) {
			out = append(out, s)
		}
	}
	return out, nil
}

func durationsDefault(flag string) string {
	switch {
	case flag != "":
		return flag
	case cfg.ShardDurations != "":
		return cfg.ShardDurations
	}
	if _, err := os.Stat(committedDurations); err == nil {
		return committedDurations
	}
	return ""
}

// committedDurations is the checkout's recorded durations (a full native
// ci/test run's results, each row's spec text and duration only), so a
// fresh clone's shards split by duration, not by count. Refresh it from a
// recent full run's artifacts/results-*.json (ci/shard-durations.md).
const committedDurations = "ci/shard-durations.json"

func shardCmd() *cobra.Command {
	var suite, phase, durations string
	var focus bool
	c := &cobra.Command{
		Use:   "shard i/n [--suite LABEL-FILTER] [--label-filter LABEL-FILTER] [--focus]",
		Short: "List the specs of one of n shards of the suite (what birdcage run --shard and ci/test --shard run)",
		Long: "Split the suite (the specs --suite selects; default every spec) into n shards, deterministically and\n" +
			"evenly by recorded duration (--durations RESULTS, a results file or a directory of them, else $" + env.ShardDurations + ";\n" +
			"without one, by count): the `timing` specs, which run alone, and the others, which run side by side, are\n" +
			"each balanced by longest time first. Print the i-th shard's specs (narrowed to --label-filter) with their\n" +
			"seconds, or with --focus the Ginkgo focus that selects exactly them (an empty line: none).\n" +
			"Run it from the root of a birdcage checkout: it lists the suite by a dry run of go test ./scenarios.",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			w, err := shard.Parse("shard", args[0])
			if err != nil {
				return err
			}
			specs, err := shardOf(w, suite, phase, durationsDefault(durations))
			if err != nil {
				return err
			}
			if focus {
				fmt.Println(shard.Focus(suiteDescription, specs))
				return nil
			}
			tm, other := shard.Seconds(specs)
			fmt.Printf("shard %s: %d specs; timing %.0f s (one at a time), others %.0f s (side by side)\n", w, len(specs), tm, other)
			for _, s := range specs {
				fmt.Printf("%7.1f s  %s\n", s.Seconds, s.Text)
			}
			return nil
		},
	}
	c.Flags().StringVar(&suite, "suite", "", "the label filter whose specs are split (default: every spec)")
	c.Flags().StringVar(&phase, "label-filter", "", "print only the shard's specs this label filter selects")
	c.Flags().StringVar(&durations, "durations", "", "recorded durations: a results file or a directory of them (default $"+env.ShardDurations+")")
	c.Flags().BoolVar(&focus, "focus", false, "print the Ginkgo focus that selects the shard's specs")
	return c
}
