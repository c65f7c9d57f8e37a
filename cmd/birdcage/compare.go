package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/birdcage/birdcage/report/compare"
	"github.com/birdcage/birdcage/report/htmlreport"
	"github.com/birdcage/birdcage/report/results"
)

// Exit statuses of `birdcage compare`.
const (
	exitRegression = 1
	exitBadInput   = 2
)

func compareCmd(jsonOut *bool) *cobra.Command {
	th := compare.DefaultThresholds()
	var budgetFile, htmlOut, mdOut string
	var maxGapPerFlow time.Duration
	var allowedDisruptions int
	var maxLost int64
	var failOnFail bool
	var allow []string
	var label string
	var alpha float64
	var minSamples int
	var gate []string
	c := &cobra.Command{
		Use:   "compare BASE NEW  (each a results file, or a directory of runs' results files)",
		Short: "Compare two runs' results (release A, release B): exit 1 on any regression past the thresholds",
		Long: "Compare two results files scenario by scenario (matched by the spec's full text, so a spec that failed\n" +
			"before registering its title still pairs) and figure by figure, and per probe flow where both have\n" +
			"probe reports. Every run of a scenario is a sample (birdcage run --repeat N). Each scenario is gated on a\n" +
			"few figures (--gate; default lostProbes and longestNoRouteWindowMs: what the dataplane did, not the\n" +
			"harness's own pace). A gated figure regresses when NEW's median is worse than BASE's by more than the\n" +
			"minimum effect of its kind (gap: --max-gap-increase; loss: --max-lost-increase; count:\n" +
			"--max-count-increase; with a non-zero base also --max-ratio when given), or for a bimodal figure more of\n" +
			"NEW's runs fell in its slow mode, AND a one-sided Mann–Whitney U test of the runs, Holm-adjusted over the\n" +
			"scenario's gated figures, gives p < --alpha: --alpha is the chance that one scenario of two runs of one\n" +
			"build regresses (default 0.01). With 2 gated figures that needs 5 runs a side (the smallest one-sided p\n" +
			"is 1/252); with 4 or fewer a gated figure past its minimum effect is \"not enough samples to judge\":\n" +
			"counted in the summary, an error with --min-samples. Every other figure, and each flow's gap and loss,\n" +
			"is informational (printed with its test, \"~\"), never a regression. A count 0 in every BASE run must stay\n" +
			"0 and is judged on any number of runs, gated or not.\n" +
			"A scenario regresses when it passed in BASE and fails in NEW, ran in BASE\n" +
			"and skipped in NEW, skipped in BASE and fails in NEW, is missing from NEW, is new and fails, or\n" +
			"(--fail-on-fail) fails on both sides; --allow NAME turns its absence or skip into a remark.\n" +
			"A budget (--budget FILE, or the flags below, else the scenario's own) judges every flow of NEW.\n" +
			"BASE or NEW may be a directory: every *.json in it is a run of the suite (the last K accepted runs of a\n" +
			"baseline, or NEW's repeats), joined as one history whose rows are each scenario's samples.\n" +
			"Exit status: 0 no regression, 1 a regression, 2 bad input.",
		Args: cobra.ExactArgs(2),
		Run: func(cmd *cobra.Command, args []string) {
			var budgets *compare.Budgets
			if budgetFile != "" {
				b, err := compare.ReadBudgets(budgetFile)
				if err != nil {
					badInput(err)
				}
				budgets = b
			}
			flagBudget := results.Budget{}
			if cmd.Flags().Changed("max-gap-per-flow") {
				ms := float64(maxGapPerFlow) / float64(time.Millisecond)
				flagBudget.MaxGapMs = &ms
			}
			if cmd.Flags().Changed("allowed-disruptions") {
				flagBudget.AllowedDisruptions = &allowedDisruptions
			}
			if cmd.Flags().Changed("max-lost") {
				flagBudget.MaxLost = &maxLost
			}
			if !flagBudget.IsZero() {
				if budgets == nil {
					budgets = &compare.Budgets{}
				}
				// Flags override the file's default for every scenario.
				budgets.Default = budgets.Default.Merge(flagBudget)
				for n, b := range budgets.Scenarios {
					budgets.Scenarios[n] = b.Merge(flagBudget)
				}
			}
			if th.MaxRatio != 0 && th.MaxRatio <= 1 {
				badInput(fmt.Errorf("--max-ratio %g: want a ratio above 1 (1.5 = new may be 1.5× base), or 0 for none", th.MaxRatio))
			}
			base, baseLabel, err := results.ReadSide(args[0])
			if err != nil {
				badInput(err)
			}
			nw, newLabel, err := results.ReadSide(args[1])
			if err != nil {
				badInput(err)
			}
			if label != "" {
				for i, side := range []**results.ResultsFile{&base, &nw} {
					sel, err := results.SelectLabels(*side, label)
					if err != nil {
						badInput(fmt.Errorf("--label: %w", err))
					}
					if len(sel.Scenarios) == 0 {
						badInput(fmt.Errorf("--label %q selects no scenario of %s (%d rows): a filter of the spec labels (headline, ipip, noencap, upgrade, liveconfig, ...)", label, args[i], len((*side).Scenarios)))
					}
					*side = sel
				}
			}
			if budgets != nil {
				if unknown := budgets.UnknownScenarios(nw); len(unknown) > 0 {
					badInput(fmt.Errorf("budget %s: scenarios %q are not in %s", budgetFile, unknown, args[1]))
				}
			}
			if alpha <= 0 || alpha >= 1 {
				badInput(fmt.Errorf("--alpha %g: want a significance between 0 and 1 (0.01: one scenario in 100 of two runs of one build regresses by chance)", alpha))
			}
			if cmd.Flags().Changed("min-samples") && minSamples < 1 {
				badInput(fmt.Errorf("--min-samples %d: want 1 or more runs a side", minSamples))
			}
			gated, err := gateFlag(gate)
			if err != nil {
				badInput(err)
			}
			opts := compare.Options{Thresholds: th, Budgets: budgets, FailOnFail: failOnFail, Allow: allow,
				Alpha: alpha, MinSamples: minSamples, StrictSamples: cmd.Flags().Changed("min-samples"), Gated: gated}
			r := compare.Compare(baseLabel, base, newLabel, nw, opts)
			if *jsonOut {
				b, _ := json.MarshalIndent(r, "", "  ")
				fmt.Println(string(b))
			} else {
				fmt.Print(r.Text())
			}
			if htmlOut != "" {
				if err := writeCompare(htmlOut, "--html", htmlreport.RenderCompare, args[0], base, args[1], nw, r); err != nil {
					fmt.Fprintln(os.Stderr, "birdcage compare:", err)
					os.Exit(exitBadInput)
				}
				fmt.Fprintf(os.Stderr, "side-by-side report: %s\n", htmlOut)
			}
			if mdOut != "" {
				if err := writeCompare(mdOut, "--markdown", htmlreport.CompareMarkdown, args[0], base, args[1], nw, r); err != nil {
					fmt.Fprintln(os.Stderr, "birdcage compare:", err)
					os.Exit(exitBadInput)
				}
				fmt.Fprintf(os.Stderr, "side-by-side table: %s\n", mdOut)
			}
			if r.Regressions > 0 {
				os.Exit(exitRegression)
			}
		},
	}
	f := c.Flags()
	f.DurationVar(&th.MaxGapIncrease, "max-gap-increase", th.MaxGapIncrease, "how much longer a gap (figure or per flow) may get; negative: not judged")
	f.Int64Var(&th.MaxLostIncrease, "max-lost-increase", th.MaxLostIncrease, "how many more probes may be lost (figure or per flow); negative: not judged")
	f.Int64Var(&th.MaxCountIncrease, "max-count-increase", th.MaxCountIncrease, "how much a count figure (deletes, flaps, refused writes, prefixes with two routes) may grow; 0: not at all; negative: not judged")
	f.Float64Var(&th.MaxRatio, "max-ratio", 0, "how many times its base a gap, loss, count or duration figure may become (e.g. 1.5); 0: not judged")
	f.Float64Var(&alpha, "alpha", compare.DefaultAlpha, "family-wise significance per scenario: its gated figures' one-sided Mann–Whitney p-values, Holm-adjusted together, must fall below it to regress")
	f.StringSliceVar(&gate, "gate", nil, "the figures a scenario can regress on by a test, comma-separated (default "+strings.Join(compare.DefaultGated, ",")+"); all: every judged figure and every flow's gap and loss, sharing α")
	f.IntVar(&minSamples, "min-samples", 0, "fewest runs a side a noisy figure is judged on; given, a figure with too few runs to judge is an error (exit 1), not a counted note")
	f.StringVar(&budgetFile, "budget", "", "budget file (YAML: default and per-scenario maxGapMs, allowedDisruptions, maxLost), judged per flow of NEW")
	f.DurationVar(&maxGapPerFlow, "max-gap-per-flow", 0, "budget: longest gap any flow of NEW may have")
	f.IntVar(&allowedDisruptions, "allowed-disruptions", 0, "budget: distinct gaps (runs of lost probes) any flow of NEW may have")
	f.Int64Var(&maxLost, "max-lost", 0, "budget: probes any flow of NEW may lose")
	f.BoolVar(&failOnFail, "fail-on-fail", false, "a scenario that fails in BASE and again in NEW is a regression")
	f.StringVar(&label, "label", "", "compare only the scenarios this Ginkgo label filter selects, on both sides (\"upgrade && ipip\": a run of the upgrades against the same scenarios of a whole headline run)")
	f.StringArrayVar(&allow, "allow", nil, "a scenario (title or spec text) whose absence from NEW or skip in NEW is expected; repeatable")
	f.StringVar(&htmlOut, "html", "", "also write the two runs side by side as one self-contained HTML file")
	f.StringVar(&mdOut, "markdown", "", "also write the two runs side by side as one Markdown table, a row per scenario: verdict, lost of sent, longest gap, no-route windows, route shapes")
	return c
}

func badInput(err error) {
	fmt.Fprintln(os.Stderr, "birdcage compare:", err)
	os.Exit(exitBadInput)
}

// gateFlag is --gate's figures: nil (the default gate) when not given,
// compare.AllGated for "all".
func gateFlag(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "all" && len(names) == 1:
			return compare.AllGated, nil
		case n == "" || n == "all" || strings.ContainsAny(n, " *"):
			return nil, fmt.Errorf("--gate %q: want figure names separated by commas (e.g. %s), or all alone", strings.Join(names, ","), strings.Join(compare.DefaultGated, ","))
		}
		out = append(out, n)
	}
	return out, nil
}
