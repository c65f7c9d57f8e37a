package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/report/results"
)

// resultsCommands are the commands that drive or read whole scenario runs.
func resultsCommands(jsonOut *bool) []*cobra.Command {
	return []*cobra.Command{reportCmd(jsonOut), runCmd(), compareCmd(jsonOut), resultsCmd(), shardCmd()}
}

func reportCmd(jsonOut *bool) *cobra.Command {
	var brief, markdown bool
	var htmlOut string
	c := &cobra.Command{
		Use:   "report [RESULTS.json...]",
		Short: "Print the verdicts and figures of scenario runs (default: every results-*.json in the artifacts directory)",
		Long: "Print the verdicts and figures of scenario runs. Without arguments it reads every results-*.json in the\n" +
			"artifacts directory: $" + env.Artifacts + ", else artifacts/ at the root of the birdcage checkout\n" +
			"the working directory is in (where go test ./scenarios writes them), else ./artifacts. It names each file it reads.",
		RunE: func(_ *cobra.Command, args []string) error {
			paths := args
			if len(paths) == 0 {
				paths, _ = filepath.Glob(filepath.Join(results.ArtifactsDir(cfg.Artifacts), "results-*.json"))
				sort.Strings(paths)
				if len(paths) == 0 {
					return fmt.Errorf("no results in %s: scenario runs write them (sudo ci/demo, or go test ./scenarios)", results.ArtifactsDir(cfg.Artifacts))
				}
			}
			if htmlOut != "" || markdown {
				return writeReports(paths, htmlOut, markdown)
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
	c.Flags().StringVarP(&htmlOut, "output", "o", "", "write one self-contained HTML report (charts of delivery, route owners and events per scenario) to this file")
	c.Flags().BoolVar(&markdown, "markdown", false, "print a Markdown summary (appended to $GITHUB_STEP_SUMMARY too when it is set)")
	return c
}

func printResults(path string, asJSON, brief bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("results %q: %w", path, err)
	}
	var doc struct {
		Kernel    string                           `json:"kernel"`
		Scenarios []results.ScenarioResult         `json:"scenarios"`
		Repeats   map[string]results.RepeatSummary `json:"repeats"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("results %q: %w", path, err)
	}
	if asJSON {
		_, err := os.Stdout.Write(append(b, '\n'))
		return err
	}
	counts := map[results.Verdict]int{}
	for _, s := range doc.Scenarios {
		counts[s.VerdictOf()]++
	}
	fmt.Printf("== read %s\n== kernel %s: %d scenarios: %d passed, %d failed, %d skipped\n", path, doc.Kernel, len(doc.Scenarios),
		counts[results.VerdictPass], counts[results.VerdictFail], counts[results.VerdictSkip])
	for _, s := range doc.Scenarios {
		verdict := strings.ToUpper(string(s.VerdictOf()))
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
			fmt.Println(strings.TrimRight(line, " "))
			if s.VerdictOf() != results.VerdictPass {
				fmt.Println(reason(s, 4, 6))
			}
			continue
		}
		fmt.Printf("\n%s  %s  [%s]  %.1fs\n", verdict, s.Name, s.Topology, s.Duration)
		if s.Spec != "" && s.Spec != s.Name {
			fmt.Printf("  spec: %s\n", s.Spec)
		}
		if s.VerdictOf() != results.VerdictPass {
			fmt.Println(reason(s, 2, 0))
		}
		if !s.Registered && s.Verdict != "" {
			fmt.Println("  (ended before registering its figures)")
		}
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
			fmt.Println(results.GapTable(s.Probes))
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

// reason is a failed or skipped row's message and location, indented;
// maxLines > 0 keeps that many lines of the message.
func reason(s results.ScenarioResult, indent, maxLines int) string {
	pad := strings.Repeat(" ", indent)
	msg := strings.TrimSpace(s.Failure)
	if msg == "" {
		if s.VerdictOf() == results.VerdictFail {
			msg = "(no failure message recorded)"
		} else {
			msg = "(no reason recorded)"
		}
	}
	lines := strings.Split(msg, "\n")
	if maxLines > 0 && len(lines) > maxLines {
		lines = append(lines[:maxLines], fmt.Sprintf("... (%d more lines: birdcage report without --brief)", len(lines)-maxLines))
	}
	what := "reason"
	if s.VerdictOf() == results.VerdictFail {
		what = "failure"
	}
	out := pad + what + ": " + strings.Join(lines, "\n"+pad+"  ")
	if s.FailureLocation != "" {
		out += "\n" + pad + "at " + s.FailureLocation
	}
	return out
}
