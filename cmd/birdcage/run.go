package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/birdcage/birdcage/harness"
)

// runScenarios runs the suite with progress, then prints the summary and
// writes the HTML report.
func runScenarios(filter string, env ...string) error {
	art := harness.ArtifactsDir()
	if err := os.MkdirAll(art, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(art, "run.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("go", "test", "-count=1", "-v", "./scenarios", "-args", "-ginkgo.label-filter="+filter)
	cmd.Env = append(append(os.Environ(), "BIRDCAGE_PROGRESS=1"), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); waited <- err }()
	p := &runProgress{out: os.Stdout, log: logf, tty: isTerminal(os.Stdout), now: time.Now}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for open := true; open; {
		select {
		case l, ok := <-lines:
			if !ok {
				open = false
				break
			}
			p.line(l)
		case <-tick.C:
			p.tick()
		}
	}
	runErr := <-waited
	p.finish()
	fmt.Printf("\nsuite output: %s\n", logPath)
	results, rerr := harness.ReadResults(harness.ResultsPath())
	if rerr == nil {
		runSummary(os.Stdout, results)
		html := filepath.Join(art, "report.html")
		if err := writeReports([]string{harness.ResultsPath()}, html, false); err != nil {
			fmt.Fprintln(os.Stderr, "birdcage run:", err)
		}
	} else {
		fmt.Fprintln(os.Stderr, "birdcage run: no results to summarise:", rerr)
	}
	if len(p.kept) > 0 {
		// Last, where a person looks: how to get into the kept cluster.
		fmt.Println("\nkept for debugging:")
		for _, l := range p.kept {
			fmt.Println(l)
		}
	}
	if runErr != nil {
		return fmt.Errorf("scenarios failed: %w (diagnostics: %s)", runErr, art)
	}
	return nil
}

// runSummary is the closing table: one row per scenario.
func runSummary(w io.Writer, f *harness.ResultsFile) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tverdict\tlost\tlongest gap ms\tduration s")
	for _, s := range f.Scenarios {
		lost, gap := "-", "-"
		if s.Probes != nil {
			lost = fmt.Sprintf("%d/%d", s.Probes.Total.Lost, s.Probes.Total.Sent)
			gap = fmt.Sprintf("%.1f", s.Probes.Total.LongestGapMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f\n", s.Name, s.VerdictOf(), lost, gap, s.Duration)
	}
	tw.Flush()
}
