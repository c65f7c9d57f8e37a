package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/report/results"
)

// resultsCmd groups the verbs on results files that are not a report or a
// comparison.
func resultsCmd() *cobra.Command {
	c := &cobra.Command{Use: "results", Short: "Work on results files (merge shards or runs into one)"}
	c.AddCommand(mergeCmd())
	return c
}

func mergeCmd() *cobra.Command {
	var out string
	var history bool
	c := &cobra.Command{
		Use:   "merge -o MERGED.json RESULTS.json...",
		Short: "Join results files: the shards of one run (default), or runs of one suite (--history)",
		Long: "Join results files into one, the rows of each in the order given. By default the files are the shards\n" +
			"of one run (birdcage run --shard i/n, ci/test --shard i/n, on n machines): the merge refuses a scenario\n" +
			"whose rows are in two files (a shard run twice), files of different builds (env.build: $" + env.Build + ",\n" +
			"else the checkout's commit) and files of different kernels or platforms, each with an error naming both\n" +
			"files. With --history the files are whole runs one after another (a baseline's last K runs): every\n" +
			"scenario's rows from every file become its samples, builds may differ, kernels may not.\n" +
			"Exit status: 0 merged, 2 refused or bad input.",
		Args: cobra.MinimumNArgs(1),
		Run: func(_ *cobra.Command, args []string) {
			fail := func(err error) {
				// Merge's errors begin "results merge:" already.
				msg := err.Error()
				if !strings.HasPrefix(msg, "results merge:") {
					msg = "results merge: " + msg
				}
				fmt.Fprintln(os.Stderr, "birdcage "+msg)
				os.Exit(exitBadInput)
			}
			if out == "" {
				fail(fmt.Errorf("-o: name the merged file to write"))
			}
			var files []results.Named
			for _, p := range args {
				f, err := results.ReadResults(p)
				if err != nil {
					fail(err)
				}
				files = append(files, results.Named{Path: p, File: f})
			}
			mode := results.Shards
			if history {
				mode = results.History
			}
			merged, err := results.Merge(files, mode)
			if err != nil {
				fail(err)
			}
			b, err := json.MarshalIndent(merged, "", "  ")
			if err != nil {
				fail(err)
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				fail(fmt.Errorf("-o %s: %w", out, err))
			}
			fmt.Printf("merged %d files, %d scenario rows: %s\n", len(files), len(merged.Scenarios), out)
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "the merged results file to write")
	c.Flags().BoolVar(&history, "history", false, "the files are whole runs one after another, not shards of one run")
	return c
}
