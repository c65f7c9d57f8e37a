package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/report/htmlreport"
	"github.com/birdcage/birdcage/report/results"
)

func conformanceCmd(jsonOut *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "conformance MODEL REAL  (each a results file, or a directory of runs' results files)",
		Short: "The model held against real Calico: a Markdown table, a line per conformance case and flavour",
		Long: "Pair the rows of a run on the model flavour (MODEL) with those of a run on real Calico (REAL) by the\n" +
			"conformance case each row records (the real-Calico specs, label calico, record one on either flavour:\n" +
			env.Calico + "=model:3.33 " + env.CalicoFrom + "=model:3.32 runs them on the model), and print per case\n" +
			"each side's verdict, lost of sent, longest probe gap, no-route windows, the route shapes at the case's\n" +
			"node before and after as the kernel held them, and the order of the route requests its components sent\n" +
			"(netlink trace), naming the columns that differ. A cell over several runs counts each value.\n" +
			"Exit status: 0 the table was written, 2 bad input.",
		Args: cobra.ExactArgs(2),
		Run: func(cmd *cobra.Command, args []string) {
			model, mLabel, err := results.ReadSide(args[0])
			if err != nil {
				conformanceBadInput(err)
			}
			real, rLabel, err := results.ReadSide(args[1])
			if err != nil {
				conformanceBadInput(err)
			}
			if *jsonOut {
				rows, err := htmlreport.Conformance(model, real)
				if err != nil {
					conformanceBadInput(err)
				}
				b, _ := json.MarshalIndent(rows, "", "  ")
				fmt.Println(string(b))
				return
			}
			if err := htmlreport.ConformanceMarkdown(os.Stdout, htmlreport.Run{Name: mLabel, File: model}, htmlreport.Run{Name: rLabel, File: real}); err != nil {
				conformanceBadInput(err)
			}
		},
	}
}

func conformanceBadInput(err error) {
	fmt.Fprintln(os.Stderr, "birdcage conformance:", err)
	os.Exit(exitBadInput)
}
