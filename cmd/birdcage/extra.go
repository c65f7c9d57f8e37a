package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/birdcage/birdcage/harness"
)

// extraCommands are the commands that drive or read whole scenario runs.
func extraCommands(jsonOut *bool) []*cobra.Command {
	return []*cobra.Command{reportCmd(jsonOut), runCmd()}
}

func reportCmd(jsonOut *bool) *cobra.Command {
	var brief bool
	c := &cobra.Command{
		Use:   "report [RESULTS.json...]",
		Short: "Print the figures of scenario runs (default: every artifacts/results-*.json)",
		RunE: func(_ *cobra.Command, args []string) error {
			paths := args
			if len(paths) == 0 {
				paths, _ = filepath.Glob(filepath.Join(harness.ArtifactsDir(), "results-*.json"))
				if len(paths) == 0 {
					return fmt.Errorf("no results in %s: scenario runs write them (sudo ci/demo, or go test ./scenarios)", harness.ArtifactsDir())
				}
			}
			for _, p := range paths {
				if err := printResults(p, *jsonOut, brief); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&brief, "brief", false, "one line per scenario")
	return c
}

func printResults(path string, asJSON, brief bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("results %q: %w", path, err)
	}
	var doc struct {
		Kernel    string                           `json:"kernel"`
		Scenarios []harness.ScenarioResult         `json:"scenarios"`
		Repeats   map[string]harness.RepeatSummary `json:"repeats"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("results %q: %w", path, err)
	}
	if asJSON {
		_, err := os.Stdout.Write(append(b, '\n'))
		return err
	}
	fmt.Printf("== kernel %s: %d scenarios (%s)\n", doc.Kernel, len(doc.Scenarios), path)
	for _, s := range doc.Scenarios {
		verdict := "PASS"
		if !s.Passed {
			verdict = "FAIL"
		}
		keys := make([]string, 0, len(s.Figures))
		for k := range s.Figures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if brief {
			line := fmt.Sprintf("%s  %-60s", verdict, s.Name)
			if s.Probes != nil {
				line += fmt.Sprintf("  lost %d/%d, longest gap %.0f ms @%d/s", s.Probes.Total.Lost, s.Probes.Total.Sent, s.Probes.Total.LongestGapMs, s.Probes.Rate)
			}
			fmt.Println(line)
			continue
		}
		fmt.Printf("\n%s  %s  [%s]  %.1fs\n", verdict, s.Name, s.Topology, s.Duration)
		if s.Timing != nil {
			fmt.Printf("  timing model: %s\n", s.Timing)
		}
		for _, k := range keys {
			fmt.Printf("  %-32s %g\n", k, s.Figures[k])
		}
		for _, n := range s.Notes {
			fmt.Printf("  note: %s\n", n)
		}
		if s.Probes != nil {
			fmt.Println(harness.GapTable(s.Probes))
		}
		if s.Sweep != nil {
			fmt.Println(s.Sweep.Table(s.Sweep.Fitted))
		}
	}
	if len(doc.Repeats) > 0 && !brief {
		names := make([]string, 0, len(doc.Repeats))
		for n := range doc.Repeats {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Printf("\n== scenarios run more than once\n")
		for _, n := range names {
			r := doc.Repeats[n]
			fmt.Printf("\n%s: %d runs, %d passed\n", n, r.Runs, r.Passed)
			figs := make([]string, 0, len(r.Figures))
			for f := range r.Figures {
				figs = append(figs, f)
			}
			sort.Strings(figs)
			for _, f := range figs {
				fmt.Printf("  %-32s %s\n", f, r.Figures[f])
			}
		}
	}
	return nil
}

func runCmd() *cobra.Command {
	var label string
	c := &cobra.Command{
		Use:   "run",
		Short: "Run scenarios (go test ./scenarios with a Ginkgo label filter) from a birdcage checkout",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if err := needRoot(); err != nil {
				return err
			}
			if _, err := os.Stat("scenarios"); err != nil {
				return fmt.Errorf("run from the root of a birdcage checkout (no ./scenarios here); or use ci/demo")
			}
			cmd := exec.Command("go", "test", "-count=1", "-v", "./scenarios", "-args", "-ginkgo.label-filter="+label)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("scenarios failed: %w (diagnostics: %s)", err, harness.ArtifactsDir())
			}
			return nil
		},
	}
	c.Flags().StringVarP(&label, "label", "l", "headline", "Ginkgo label filter (headline, ipip, noencap, upgrade, ...)")
	return c
}
