package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/birdcage/birdcage/report/compare"
	"github.com/birdcage/birdcage/report/htmlreport"
	"github.com/birdcage/birdcage/report/results"
)

// stepSummaryEnv is where GitHub Actions reads a job's Markdown summary.
const stepSummaryEnv = "GITHUB_STEP_SUMMARY"

// writeReports renders results files as an HTML report (htmlOut) and/or a
// Markdown summary on stdout, appended to $GITHUB_STEP_SUMMARY when set.
func writeReports(paths []string, htmlOut string, markdown bool) error {
	var runs []htmlreport.Run
	for _, p := range paths {
		f, err := results.ReadResults(p)
		if err != nil {
			return err
		}
		runs = append(runs, htmlreport.Run{Name: filepath.Base(p), File: f})
	}
	if htmlOut != "" {
		var b bytes.Buffer
		title := "birdcage handover report"
		if len(runs) == 1 {
			title += ": " + runs[0].Name
		}
		if err := htmlreport.Render(&b, title, runs); err != nil {
			return err
		}
		if err := os.WriteFile(htmlOut, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("html report: %w", err)
		}
		abs, _ := filepath.Abs(htmlOut)
		fmt.Fprintf(os.Stderr, "HTML report: %s\n", abs)
	}
	if markdown {
		var b bytes.Buffer
		if err := htmlreport.Markdown(&b, runs); err != nil {
			return err
		}
		os.Stdout.Write(b.Bytes())
		if p := os.Getenv(stepSummaryEnv); p != "" {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return fmt.Errorf("$%s: %w", stepSummaryEnv, err)
			}
			_, err = f.Write(b.Bytes())
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("$%s: %w", stepSummaryEnv, err)
			}
		}
	}
	return nil
}

// compareRenderer writes two runs and their comparison side by side.
type compareRenderer func(w io.Writer, base, nw htmlreport.Run, r *compare.Report) error

// writeCompare renders the comparison into path; flag names the option
// in an error.
func writeCompare(path, flag string, render compareRenderer, baseName string, base *results.ResultsFile, newName string, nw *results.ResultsFile, r *compare.Report) error {
	var b bytes.Buffer
	if err := render(&b, htmlreport.Run{Name: baseName, File: base}, htmlreport.Run{Name: newName, File: nw}, r); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}
