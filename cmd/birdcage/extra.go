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
	return &cobra.Command{
		Use:   "report [RESULTS.json]",
		Short: "Print the figures of a scenario run (default: artifacts/results.json)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			path := filepath.Join(harness.ArtifactsDir(), "results.json")
			if len(args) == 1 {
				path = args[0]
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("results %q: %w (scenario runs write it; see birdcage run)", path, err)
			}
			var doc struct {
				Kernel    string                   `json:"kernel"`
				Scenarios []harness.ScenarioResult `json:"scenarios"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				return fmt.Errorf("results %q: %w", path, err)
			}
			if *jsonOut {
				_, err := os.Stdout.Write(b)
				return err
			}
			fmt.Printf("results %s (kernel %s): %d scenarios\n", path, doc.Kernel, len(doc.Scenarios))
			for _, s := range doc.Scenarios {
				verdict := "PASS"
				if !s.Passed {
					verdict = "FAIL"
				}
				fmt.Printf("\n%s  %s  [%s]  %.1fs\n", verdict, s.Name, s.Topology, s.Duration)
				keys := make([]string, 0, len(s.Figures))
				for k := range s.Figures {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					fmt.Printf("  %-32s %g\n", k, s.Figures[k])
				}
				for _, n := range s.Notes {
					fmt.Printf("  note: %s\n", n)
				}
				if s.Probes != nil {
					fmt.Println(harness.GapTable(s.Probes))
				}
			}
			return nil
		},
	}
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
