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

	"github.com/spf13/cobra"

	"github.com/birdcage/birdcage/harness"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/shard"
	"github.com/birdcage/birdcage/report/results"
)

// suiteRun is how runScenarios runs the suite: Repeat times one after
// another into one results file, each time only the specs Focus selects
// (a shard's; "" every spec the filter selects).
type suiteRun struct {
	Repeat int
	Focus  string
	Shard  string // "i/n", for what is printed
}

// runScenarios runs the suite with progress, then prints the summary and
// writes the HTML report.
func runScenarios(filter string, sr suiteRun, vars ...string) error {
	// Where the suite writes its results (results.ResultsPath, which a lab
	// run changes) is where we read them: the knobs the suite will load.
	vars = append([]string{env.Set(env.Progress, "1")}, vars...)
	if sr.Repeat > 1 {
		// The runs write one results file together: each run's rows are
		// every scenario's samples (compare judges their distributions).
		if cur, err := env.Load(env.Overlay(vars, os.LookupEnv)); err == nil && cur.ResultsJoin == "" {
			vars = append(vars, env.Set(env.ResultsJoin, fmt.Sprintf("run-%d-%d", os.Getpid(), time.Now().UnixNano())))
		}
	}
	suite, err := env.Load(env.Overlay(vars, os.LookupEnv))
	if err != nil {
		return err
	}
	art := results.ArtifactsDir(suite.Artifacts)
	if err := os.MkdirAll(art, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(art, "run.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"test", "-count=1", "-v", "./scenarios", "-run", "^TestScenarios$", "-args", "-ginkgo.label-filter=" + filter}
	if sr.Focus != "" {
		args = append(args, "-ginkgo.focus="+sr.Focus)
	}
	suiteEnv := append(os.Environ(), vars...)
	var runErr error
	var kept []string
	for i := 1; i <= max(sr.Repeat, 1); i++ {
		if sr.Repeat > 1 || sr.Shard != "" {
			fmt.Printf("== run %d of %d%s\n", i, max(sr.Repeat, 1), shardNote(sr.Shard))
		}
		p, err := runSuiteOnce(args, suiteEnv, logf)
		if err != nil && runErr == nil {
			runErr = err
		}
		kept = append(kept, p.kept...)
	}
	fmt.Printf("\nsuite output: %s\n", logPath)
	doc, rerr := results.ReadResults(results.ResultsPath(suite.Artifacts, suite.Lab))
	if rerr == nil {
		runSummary(os.Stdout, doc)
		html := filepath.Join(art, "report.html")
		if err := writeReports([]string{results.ResultsPath(suite.Artifacts, suite.Lab)}, html, false); err != nil {
			fmt.Fprintln(os.Stderr, "birdcage run:", err)
		}
	} else {
		fmt.Fprintln(os.Stderr, "birdcage run: no results to summarise:", rerr)
	}
	if len(kept) > 0 {
		// Last, where a person looks: how to get into the kept cluster.
		fmt.Println("\nkept for debugging:")
		for _, l := range kept {
			fmt.Println(l)
		}
	}
	if runErr != nil {
		return fmt.Errorf("scenarios failed: %w (diagnostics: %s)", runErr, art)
	}
	return nil
}

func shardNote(s string) string {
	if s == "" {
		return ""
	}
	return ", shard " + s
}

// runSuiteOnce runs go test with args once in environment vars, showing
// progress.
func runSuiteOnce(args, vars []string, logf io.Writer) (*runProgress, error) {
	cmd := exec.Command("go", args...)
	cmd.Env = vars
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return &runProgress{}, err
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
	return p, runErr
}

// runSummary is the closing table: one row per scenario.
func runSummary(w io.Writer, f *results.ResultsFile) {
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

// programmerRun is what `birdcage run --programmer OLD --upgrade-programmer
// NEW` adds to the suite's environment: the run's programmer (every node,
// from the start) and the build the headline upgrade's node switches to.
// Each must be an executable file; a flag names itself in the error. A lab
// picks its own programmer, so NEW is refused with --lab.
func programmerRun(old, upgrade string, lab bool) ([]string, error) {
	var vars []string
	for _, f := range []struct{ flag, path, key string }{
		{"--programmer", old, env.Programmer},
		{"--upgrade-programmer", upgrade, env.UpgradeProgrammer},
	} {
		if f.path == "" {
			continue
		}
		if f.key == env.UpgradeProgrammer && lab {
			return nil, fmt.Errorf("%s: a lab's upgrade action installs its own programmer; leave it out with --lab", f.flag)
		}
		abs, err := filepath.Abs(f.path)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
		if err := harness.CheckExecutable(abs); err != nil {
			return nil, fmt.Errorf("%s: %w (a route programmer binary under the process contract of dataplane/programmer)", f.flag, err)
		}
		vars = append(vars, env.Set(f.key, abs))
	}
	return vars, nil
}

func runCmd() *cobra.Command {
	var label, labPath, programmer, upgradeProgrammer string
	var keepOnFail, pcap bool
	var repeat int
	var shardSpec, durations string
	c := &cobra.Command{
		Use:         "run [--lab MANIFEST] [LABEL-FILTER]",
		Annotations: map[string]string{needsRootKey: "yes"},
		Short:       "Run scenarios (go test ./scenarios with a Ginkgo label filter) from a birdcage checkout, with progress and a summary",
		Long: "Run scenarios from the root of a birdcage checkout. On a terminal it shows the running spec, its elapsed\n" +
			"time and probes sent / lost so far on one line (the suite's full output goes to artifacts/run.log); not on\n" +
			"a terminal it prints the suite's lines as they come. It ends with a summary table and writes the HTML\n" +
			"report (artifacts/report.html), printing its path.\n\n" +
			"With --lab MANIFEST only the lab specs run (label lab, narrowed by the filter if one is given), against\n" +
			"the nodes the manifest describes (harness/lab); specs whose actions it lacks skip, naming them.\n\n" +
			"With --repeat N the suite runs N times into one results file: every run's figures are samples that\n" +
			"birdcage compare judges as distributions. With --shard i/n only the i-th of n shards of the specs the\n" +
			"filter selects runs (birdcage shard; balanced by --durations); birdcage results merge joins the shards'\n" +
			"results files into the run's.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cc *cobra.Command, args []string) error {
			if len(args) == 1 {
				label = args[0]
			}
			if _, err := os.Stat("scenarios"); err != nil {
				return fmt.Errorf("run from the root of a birdcage checkout (no ./scenarios here); or use ci/demo")
			}
			vars, filter, err := labRun(labPath, label, cc.Flags().Changed("label") || len(args) == 1)
			if err != nil {
				return err
			}
			progEnv, err := programmerRun(programmer, upgradeProgrammer, labPath != "")
			if err != nil {
				return err
			}
			vars = append(vars, progEnv...)
			if keepOnFail {
				vars = append(vars, env.Set(env.KeepOnFail, "1"))
			}
			if pcap {
				vars = append(vars, env.Set(env.Pcap, "1"))
			}
			if !cc.Flags().Changed("repeat") {
				// $BIRDCAGE_REPEAT is --repeat's default: one repeat
				// mechanism, the suite run N times, every run kept.
				cur, err := env.Load(env.Overlay(vars, os.LookupEnv))
				if err != nil {
					return err
				}
				repeat = max(cur.Repeat, 1)
			}
			if repeat < 1 {
				return fmt.Errorf("--repeat %d: want 1 or more runs", repeat)
			}
			// The suite itself does not repeat (the sweep would take it as
			// its sample count, N runs of N samples).
			vars = append(vars, env.Set(env.Repeat, ""))
			sr := suiteRun{Repeat: repeat}
			if shardSpec != "" {
				w, err := shard.Parse("--shard", shardSpec)
				if err != nil {
					return err
				}
				specs, err := shardOf(w, filter, "", durationsDefault(durations))
				if err != nil {
					return err
				}
				if len(specs) == 0 {
					return fmt.Errorf("--shard %s: the shard has no spec (the filter %q selects fewer specs than shards)", w, filter)
				}
				sr.Focus, sr.Shard = shard.Focus(suiteDescription, specs), w.String()
				fmt.Printf("shard %s: %d specs\n", w, len(specs))
			}
			return runScenarios(filter, sr, vars...)
		},
	}
	c.Flags().StringVarP(&label, "label", "l", "headline", "Ginkgo label filter (headline, ipip, noencap, upgrade, ...); the argument wins")
	c.Flags().StringVar(&labPath, "lab", "", "run the lab scenarios against the lab this manifest describes (harness/lab; \"handmade\": a lab built per spec with ip commands, \"handmade-runc\": one whose nodes are runc containers)")
	c.Flags().BoolVar(&keepOnFail, "keep-on-fail", false, "leave the first failed spec's cluster up and print how to get in (birdcage exec/routes/down); sets $"+env.KeepOnFail)
	c.Flags().StringVar(&programmer, "programmer", "", "run this route programmer binary on every node (your own build, under the process contract of dataplane/programmer); sets $"+env.Programmer)
	c.Flags().StringVar(&upgradeProgrammer, "upgrade-programmer", "", "the headline upgrade's node runs this programmer binary from its upgrade on (old build → new build in one run, judged by the claim); sets $"+env.UpgradeProgrammer)
	c.Flags().IntVar(&repeat, "repeat", 1, "run the suite this many times into one results file (each run's figures are samples for compare, a failed run's too) (default $"+env.Repeat+", else 1)")
	c.Flags().StringVar(&shardSpec, "shard", "", "run only shard i/n of the specs the filter selects (i of n machines; birdcage results merge joins them)")
	c.Flags().StringVar(&durations, "durations", "", "recorded durations that balance the shards: a results file or a directory of them (default $"+env.ShardDurations+")")
	c.Flags().BoolVar(&pcap, "pcap", false, "capture the probes on every node's uplinks (and tunl0) during the probe window into the artifacts, linked from the report; sets $"+env.Pcap)
	return c
}
