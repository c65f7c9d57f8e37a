package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// Result is one test's (or spec's) outcome in one run.
type Result int

const (
	Pass Result = iota
	Fail
	Skip
)

// Row is one test across all runs: the failure-rate table's line.
type Row struct {
	Package  string  `json:"package"`
	Test     string  `json:"test"` // Go test name, "[spec] ..." for a Ginkgo spec, "(package)" for the package itself
	Runs     int     `json:"runs"` // runs in which it ran (passed or failed); skips are counted apart
	Failures int     `json:"failures"`
	Skips    int     `json:"skips,omitempty"`
	Rate     float64 `json:"rate"` // failures / runs
	// FirstFailure is the first line that says why, from the first failing run.
	FirstFailure    string `json:"firstFailure,omitempty"`
	FirstFailureRun int    `json:"firstFailureRun,omitempty"` // 1-based
}

// Table accumulates runs.
type Table struct {
	rows map[[2]string]*Row
}

func NewTable() *Table { return &Table{rows: map[[2]string]*Row{}} }

// Add records one outcome; run is 1-based.
func (t *Table) Add(run int, pkg, test string, r Result, why string) {
	k := [2]string{pkg, test}
	row := t.rows[k]
	if row == nil {
		row = &Row{Package: pkg, Test: test}
		t.rows[k] = row
	}
	switch r {
	case Skip:
		row.Skips++
		return
	case Fail:
		row.Failures++
		if row.FirstFailureRun == 0 {
			row.FirstFailure, row.FirstFailureRun = why, run
		}
	}
	row.Runs++
	row.Rate = float64(row.Failures) / float64(row.Runs)
}

// Rows returns every row, failing ones first (highest rate, then most
// failures), then by package and name.
func (t *Table) Rows() []Row {
	out := make([]Row, 0, len(t.rows))
	for _, r := range t.rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Rate != b.Rate {
			return a.Rate > b.Rate
		}
		if a.Failures != b.Failures {
			return a.Failures > b.Failures
		}
		if a.Package != b.Package {
			return a.Package < b.Package
		}
		return a.Test < b.Test
	})
	return out
}

// Failures is the number of failed outcomes over all rows.
func (t *Table) Failures() int {
	n := 0
	for _, r := range t.rows {
		n += r.Failures
	}
	return n
}

// event is one line of `go test -json`.
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Output     string
}

var (
	// "    file_test.go:123: message": what t.Error/t.Fatal print.
	testLog = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)
	ansi    = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

// AddGoTestJSON reads one run's `go test -json` stream and records every test
// and every package that failed without a failing test (build failure, panic
// outside a test, timeout) as "(package)". Tests of the packages in suites
// (Ginkgo suites whose specs come from their own report) are left out,
// unless their package produced no spec report (reported, below, by the
// caller) — then they stand for the suite.
func (t *Table) AddGoTestJSON(run int, r io.Reader, suites map[string]bool) error {
	type key struct{ pkg, test string }
	out := map[key][]string{}
	testFailed := map[string]bool{}
	failedSub := map[key]string{} // parent test -> its first failing subtest
	buildOut := map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // plain text: go's own messages
		}
		switch e.Action {
		case "build-output":
			buildOut[e.ImportPath] = append(buildOut[e.ImportPath], strings.TrimRight(e.Output, "\n"))
			continue
		case "output":
			k := key{e.Package, e.Test}
			out[k] = append(out[k], strings.TrimRight(ansi.ReplaceAllString(e.Output, ""), "\n"))
			continue
		case "pass", "fail", "skip":
		default:
			continue
		}
		if e.Test == "" { // the package's own result
			if e.Action == "fail" && !testFailed[e.Package] {
				lines := out[key{e.Package, ""}]
				for ip, b := range buildOut {
					if ip == e.Package || strings.HasPrefix(ip, e.Package+" ") {
						lines = append(b, lines...)
					}
				}
				t.Add(run, e.Package, "(package)", Fail, firstReason(lines))
			}
			continue
		}
		if suites[e.Package] {
			if e.Action == "fail" {
				testFailed[e.Package] = true
			}
			continue
		}
		switch e.Action {
		case "pass":
			t.Add(run, e.Package, e.Test, Pass, "")
		case "skip":
			t.Add(run, e.Package, e.Test, Skip, "")
		case "fail":
			testFailed[e.Package] = true
			why := firstReason(out[key{e.Package, e.Test}])
			if why == "" && failedSub[key{e.Package, e.Test}] != "" {
				why = "subtest " + failedSub[key{e.Package, e.Test}] + " failed"
			}
			if i := strings.LastIndex(e.Test, "/"); i > 0 {
				if k := (key{e.Package, e.Test[:i]}); failedSub[k] == "" {
					failedSub[k] = e.Test[i+1:]
				}
			}
			t.Add(run, e.Package, e.Test, Fail, why)
		}
	}
	return sc.Err()
}

// firstReason picks the line that says why. go test prints t.Log and
// t.Error alike ("    file_test.go:12: text"), so among those it takes the
// first that reads like a verdict (want/got/not/no/never/missing/...), else
// the last one (t.Fatal ends a test); failing that a panic or timeout, else
// the first line that is not go test's own bookkeeping.
func firstReason(lines []string) string {
	var msgs []string
	for _, l := range lines {
		if m := testLog.FindStringSubmatch(l); m != nil {
			msgs = append(msgs, m[1])
		}
	}
	for _, m := range msgs {
		if verdict.MatchString(m) {
			return clip(m)
		}
	}
	if len(msgs) > 0 {
		return clip(msgs[len(msgs)-1])
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "panic:") || strings.Contains(l, "test timed out") {
			return clip(l)
		}
	}
	for _, l := range lines {
		s := strings.TrimSpace(l)
		if s == "" || strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- ") || s == "FAIL" || s == "PASS" ||
			strings.HasPrefix(s, "FAIL\t") || strings.HasPrefix(s, "ok ") || strings.HasPrefix(s, "# ") {
			continue
		}
		return clip(s)
	}
	return ""
}

var verdict = regexp.MustCompile(`(?i)\b(want|wanted|got|expected|not|no|never|missing|unexpected|failed|cannot|can't|too)\b`)

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// AddGinkgoReport records every spec of a Ginkgo JSON report (written with
// --ginkgo.json-report) as "[spec] container texts leaf text", and failed
// suite-level nodes (BeforeSuite and the like) under their node type.
func (t *Table) AddGinkgoReport(run int, pkg string, r io.Reader) error {
	var reports []types.Report
	if err := json.NewDecoder(r).Decode(&reports); err != nil {
		return fmt.Errorf("ginkgo report: %w", err)
	}
	for _, rep := range reports {
		for _, s := range rep.SpecReports {
			name := strings.TrimSpace(strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " "))
			if s.LeafNodeType != types.NodeTypeIt {
				if !s.State.Is(types.SpecStateFailureStates) {
					continue // a suite node that did its job is not a test
				}
				name = strings.TrimSpace(s.LeafNodeType.String() + " " + name)
			}
			name = "[spec] " + name
			switch {
			case s.State.Is(types.SpecStateFailureStates):
				why := s.Failure.Message
				if why == "" {
					why = s.State.String()
				}
				if loc := s.Failure.Location; loc.FileName != "" {
					why = fmt.Sprintf("%s:%d: %s", shortFile(loc.FileName), loc.LineNumber, why)
				}
				t.Add(run, pkg, name, Fail, clip(why))
			case s.State.Is(types.SpecStatePassed):
				t.Add(run, pkg, name, Pass, "")
			default: // skipped, pending
				t.Add(run, pkg, name, Skip, "")
			}
		}
	}
	return nil
}

func shortFile(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

// Format renders rows as a fixed-width table.
func Format(w io.Writer, rows []Row) {
	tw := 0
	for _, r := range rows {
		tw = max(tw, len(displayName(r)))
	}
	tw = min(max(tw, len("test")), 90)
	fmt.Fprintf(w, "%-*s %5s %8s %6s  %s\n", tw, "test", "runs", "failures", "rate", "first failure")
	for _, r := range rows {
		name := displayName(r)
		if len(name) > tw {
			name = name[:tw-3] + "..."
		}
		first := r.FirstFailure
		if r.FirstFailureRun > 0 {
			first = fmt.Sprintf("(run %d) %s", r.FirstFailureRun, first)
		}
		fmt.Fprintf(w, "%-*s %5d %8d %5.0f%%  %s\n", tw, name, r.Runs, r.Failures, 100*r.Rate, first)
	}
}

// displayName is package-relative: "instrument/probe TestGapAccuracyBlackhole".
func displayName(r Row) string {
	return strings.TrimPrefix(r.Package, module+"/") + " " + r.Test
}

const module = "github.com/birdcage/birdcage"
