// Command soakrun runs the same tests N times and prints a per-test
// failure-rate table (test, runs, failures, rate, first failure message), the
// table routing projects keep to triage flakes. ci/soak is its front door:
//
//	ci/soak [-n N] [-p P] [PACKAGES...]         go test -json -count=1 PACKAGES, N times
//	ci/soak [-n N] -l LABEL-FILTER [PACKAGES...] the Ginkgo scenarios (default ./scenarios) with that label filter
//	ci/soak -exec ci/vm/run -l ipip ...          the same inside the VM (go test -exec)
//	ci/soak -lock /tmp/birdcage-heavy.lock ...   hold that flock for each run, not for the whole soak
//
// Go tests are read from `go test -json`; a Ginkgo suite's specs from a
// --ginkgo.json-report per run, so each flaky spec is named on its own. The
// table goes to stdout (failing rows, then a count of the clean ones) and, in
// full, to $BIRDCAGE_ARTIFACTS (default ./artifacts)/soak-<timestamp>.txt and
// .json, with every run's raw output beside it in soak-<timestamp>/. It
// exits 1 when any run of anything failed.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/birdcage/birdcage/internal/env"
)

// Summary is the .json artifact.
type Summary struct {
	Started     time.Time `json:"started"`
	Runs        int       `json:"runs"`
	Packages    []string  `json:"packages"`
	LabelFilter string    `json:"labelFilter,omitempty"`
	Exec        string    `json:"exec,omitempty"`
	// RunWallSeconds is each run's wall time, all its go test invocations.
	RunWallSeconds []float64 `json:"runWallSeconds"`
	Failures       int       `json:"failures"`
	Tests          []Row     `json:"tests"`
}

func main() {
	n := flag.Int("n", 5, "how many runs")
	label := flag.String("l", "", "Ginkgo label filter: soak the scenario specs that match (packages default to ./scenarios)")
	par := flag.Int("p", 0, "go test -p (packages in parallel); 0 = go's default")
	timeout := flag.String("timeout", "", "go test -timeout per run (go's default when empty)")
	execCmd := flag.String("exec", "", "go test -exec: run the test binaries under this program (ci/vm/run for the VM)")
	lock := flag.String("lock", "", "flock this file for each run (released between runs, so other heavy work can interleave)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: ci/soak [-n N] [-p P] [-timeout D] [-exec CMD] [-lock FILE] [PACKAGES... | -l LABEL-FILTER [PACKAGES...]]")
		flag.PrintDefaults()
	}
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		if *label != "" {
			pkgs = []string{"./scenarios"}
		} else {
			flag.Usage()
			os.Exit(2)
		}
	}
	if *n < 1 {
		fmt.Fprintln(os.Stderr, "soak: -n must be at least 1")
		os.Exit(2)
	}
	cfg, err := env.LoadOS() // the tool's edge
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakrun:", err)
		os.Exit(2)
	}
	if err := soak(cfg, *n, pkgs, *label, *par, *timeout, *execCmd, *lock); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		var fe failedError
		if errors.As(err, &fe) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

type failedError struct{ n int }

func (e failedError) Error() string {
	if e.n == 0 {
		return "no test ran"
	}
	return fmt.Sprintf("%d failed outcomes", e.n)
}

func soak(cfg env.Config, n int, pkgs []string, label string, par int, timeout, execCmd, lock string) error {
	plain, suites, err := splitSuites(pkgs)
	if err != nil {
		return err
	}
	art := cfg.Artifacts
	if art == "" {
		art = "artifacts"
	}
	if art, err = filepath.Abs(art); err != nil {
		return err
	}
	started := time.Now()
	stamp := started.UTC().Format("20060102T150405Z")
	rawDir := filepath.Join(art, "soak-"+stamp)
	if err := os.MkdirAll(rawDir, 0o755); err != nil {
		return err
	}
	base := []string{"test", "-json", "-count=1"}
	if par > 0 {
		base = append(base, fmt.Sprintf("-p=%d", par))
	}
	if timeout != "" {
		base = append(base, "-timeout="+timeout)
	}
	if execCmd != "" {
		abs, err := filepath.Abs(execCmd)
		if err != nil {
			return err
		}
		base = append(base, "-exec", abs)
		// The per-run report files are written by the test binary; in the VM
		// only the directories ci/vm/run is told about are writable.
		// The go test processes inherit it.
		if cfg.VMWritable == "" {
			os.Setenv(env.VMWritable, art)
		}
	}

	tbl := NewTable()
	sum := Summary{Started: started, Runs: n, Packages: pkgs, LabelFilter: label, Exec: execCmd}
	for run := 1; run <= n; run++ {
		unlock, err := flockFile(lock)
		if err != nil {
			return err
		}
		t0 := time.Now()
		// Plain packages in one go test; each Ginkgo suite in its own, with
		// its own report file (-args applies to every package of a go test).
		if len(plain) > 0 {
			if err := goTest(run, tbl, append(slices.Clone(base), plain...), filepath.Join(rawDir, fmt.Sprintf("run%02d-go.jsonl", run)), nil); err != nil {
				return err
			}
		}
		for i, s := range suites {
			report := filepath.Join(rawDir, fmt.Sprintf("run%02d-suite%d-ginkgo.json", run, i+1))
			args := append(slices.Clone(base), s.dir, "-args", "-ginkgo.json-report="+report)
			if label != "" {
				args = append(args, "-ginkgo.label-filter="+label)
			}
			if err := goTest(run, tbl, args, filepath.Join(rawDir, fmt.Sprintf("run%02d-suite%d-go.jsonl", run, i+1)), &suiteReport{pkg: s.importPath, path: report}); err != nil {
				return err
			}
		}
		wall := time.Since(t0).Seconds()
		unlock()
		sum.RunWallSeconds = append(sum.RunWallSeconds, wall)
		fmt.Printf("soak: run %d/%d took %.0f s; %d failed outcomes so far\n", run, n, wall, tbl.Failures())
		// Written after every run: a soak stopped early still has its table.
		if err := writeTables(art, stamp, run, tbl, &sum); err != nil {
			return err
		}
	}

	rows := tbl.Rows()
	txt := filepath.Join(art, "soak-"+stamp+".txt")

	// stdout: the failing rows in full, the clean ones counted.
	var failing []Row
	clean, skipped := 0, 0
	for _, r := range rows {
		switch {
		case r.Failures > 0:
			failing = append(failing, r)
		case r.Runs == 0:
			skipped++
		default:
			clean++
		}
	}
	fmt.Println()
	header(os.Stdout, sum)
	if len(failing) > 0 {
		Format(os.Stdout, failing)
	}
	fmt.Printf("%d tests ran and never failed, %d were only skipped (full table: %s)\n", clean, skipped, txt)
	if sum.Failures > 0 {
		return failedError{sum.Failures}
	}
	if clean == 0 {
		// A soak in which nothing ran proves nothing.
		return failedError{0}
	}
	return nil
}

// flockFile takes an exclusive flock on path (none when path is empty) and
// returns its release.
func flockFile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("-lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("-lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// writeTables writes the full table after `done` runs to soak-<stamp>.txt
// and .json.
func writeTables(art, stamp string, done int, tbl *Table, sum *Summary) error {
	sum.Runs = done
	sum.Failures, sum.Tests = tbl.Failures(), tbl.Rows()
	var full bytes.Buffer
	header(&full, *sum)
	Format(&full, sum.Tests)
	js, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(art, "soak-"+stamp+".txt"), full.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(art, "soak-"+stamp+".json"), append(js, '\n'), 0o644)
}

func header(w io.Writer, s Summary) {
	what := strings.Join(s.Packages, " ")
	if s.LabelFilter != "" {
		what += " (label filter " + s.LabelFilter + ")"
	}
	if s.Exec != "" {
		what += " under " + s.Exec
	}
	var total, worst float64
	for _, x := range s.RunWallSeconds {
		total += x
		worst = max(worst, x)
	}
	fmt.Fprintf(w, "soak of %s: %d runs, started %s; wall per run mean %.0f s, max %.0f s; %d failed outcomes\n",
		what, s.Runs, s.Started.UTC().Format(time.RFC3339), total/float64(max(1, len(s.RunWallSeconds))), worst, s.Failures)
}

type suite struct{ dir, importPath string }

type suiteReport struct{ pkg, path string }

// splitSuites expands the patterns and sorts the packages into plain ones
// and Ginkgo suites (a test that imports ginkgo).
func splitSuites(patterns []string) (plain []string, suites []suite, err error) {
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}"}, patterns...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go list %s: %w", strings.Join(patterns, " "), err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) < 3 {
			continue
		}
		if slices.Contains(strings.Fields(f[2]), "github.com/onsi/ginkgo/v2") {
			suites = append(suites, suite{dir: f[1], importPath: f[0]})
		} else {
			plain = append(plain, f[0])
		}
	}
	return plain, suites, nil
}

// goTest runs one go test, keeps its raw output in raw, and adds its results
// to the table: Go tests from the event stream, a suite's specs from its
// report (when the suite got far enough to write one).
func goTest(run int, tbl *Table, args []string, raw string, sr *suiteReport) error {
	f, err := os.Create(raw)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = f, f
	runErr := cmd.Run()
	var ee *exec.ExitError
	if runErr != nil && !errors.As(runErr, &ee) {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), runErr)
	}
	suites := map[string]bool{}
	var report []byte
	if sr != nil {
		if b, err := os.ReadFile(sr.path); err == nil && len(b) > 0 {
			report, suites[sr.pkg] = b, true
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := tbl.AddGoTestJSON(run, f, suites); err != nil {
		return fmt.Errorf("read %s: %w", raw, err)
	}
	if report != nil {
		if err := tbl.AddGinkgoReport(run, sr.pkg, bytes.NewReader(report)); err != nil {
			return fmt.Errorf("%s: %w", sr.path, err)
		}
	}
	return nil
}
