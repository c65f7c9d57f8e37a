package main

// The failure-rate table from recorded input: testdata/ holds the real
// `go test -json` output and Ginkgo JSON reports of three runs of a fake
// package set (recorded once, with the fakes deleted afterwards):
//   - plain: TestSteady always passes; TestFlaky fails in run 2 (t.Errorf
//     after a t.Logf); TestTable/sometimes fails in run 2 (t.Fatal), which
//     fails its parent too; TestNeedsRoot always skips; TestPanics panics in
//     run 3;
//   - broken: does not build;
//   - suite: a Ginkgo suite (Go test TestSuite) whose spec "handover loses no
//     probes" fails in run 2, "keeps the route" passes, "needs ipip" skips.

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

const fake = module + "/ci/soakrun/fake/"

func load(t *testing.T, withReports bool) *Table {
	t.Helper()
	tbl := NewTable()
	for run := 1; run <= 3; run++ {
		open := func(name string) *os.File {
			f, err := os.Open(fmt.Sprintf("testdata/run%d-%s", run, name))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}
		if err := tbl.AddGoTestJSON(run, open("go.jsonl"), nil); err != nil {
			t.Fatal(err)
		}
		suites := map[string]bool{}
		if withReports {
			suites[fake+"suite"] = true
		}
		if err := tbl.AddGoTestJSON(run, open("suite.jsonl"), suites); err != nil {
			t.Fatal(err)
		}
		if withReports {
			if err := tbl.AddGinkgoReport(run, fake+"suite", open("ginkgo.json")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tbl
}

func TestTableFromRecordedRuns(t *testing.T) {
	tbl := load(t, true)
	type want struct {
		runs, failures, skips, firstRun int
		first                           string // substring of the first failure message
	}
	wants := map[string]want{
		"plain TestSteady":                      {runs: 3},
		"plain TestFlaky":                       {runs: 3, failures: 1, firstRun: 2, first: "gap [10, 20] does not cover the outage [11, 21]"},
		"plain TestTable":                       {runs: 3, failures: 1, firstRun: 2, first: "subtest sometimes failed"},
		"plain TestTable/ok":                    {runs: 3},
		"plain TestTable/sometimes":             {runs: 3, failures: 1, firstRun: 2, first: "subscription errors: [results may be incomplete or inconsistent]"},
		"plain TestNeedsRoot":                   {skips: 3},
		"plain TestPanics":                      {runs: 3, failures: 1, firstRun: 3, first: "panic: boom"},
		"broken (package)":                      {runs: 3, failures: 3, firstRun: 1, first: "undefined: undefinedThing"},
		"suite [spec] handover keeps the route": {runs: 3},
		"suite [spec] handover loses no probes": {runs: 3, failures: 1, firstRun: 2, first: "node-2 lost 3 probes"},
		"suite [spec] handover needs ipip":      {skips: 3},
	}
	rows := tbl.Rows()
	got := map[string]Row{}
	for _, r := range rows {
		got[strings.TrimPrefix(r.Package, fake)+" "+r.Test] = r
	}
	for name, w := range wants {
		r, ok := got[name]
		if !ok {
			t.Errorf("no row %q; rows: %v", name, keys(got))
			continue
		}
		if r.Runs != w.runs || r.Failures != w.failures || r.Skips != w.skips || r.FirstFailureRun != w.firstRun {
			t.Errorf("%s: runs %d failures %d skips %d first failure in run %d; want %d %d %d %d",
				name, r.Runs, r.Failures, r.Skips, r.FirstFailureRun, w.runs, w.failures, w.skips, w.firstRun)
		}
		if !strings.Contains(r.FirstFailure, w.first) || (w.first == "" && r.FirstFailure != "") {
			t.Errorf("%s: first failure %q, want it to contain %q", name, r.FirstFailure, w.first)
		}
		if w.runs > 0 && r.Rate != float64(w.failures)/float64(w.runs) {
			t.Errorf("%s: rate %v, want %d/%d", name, r.Rate, w.failures, w.runs)
		}
	}
	for name := range got {
		if _, ok := wants[name]; !ok {
			t.Errorf("unexpected row %q (a suite's Go test must not count beside its specs)", name)
		}
	}
	// The spec's failure names where it failed.
	if r := got["suite [spec] handover loses no probes"]; !strings.Contains(r.FirstFailure, "s_test.go:") {
		t.Errorf("spec failure %q does not say where", r.FirstFailure)
	}
	if n := tbl.Failures(); n != 3+1+1+1+1+1 {
		t.Errorf("failed outcomes %d, want 8 (broken x3, TestFlaky, TestTable, TestTable/sometimes, TestPanics, the spec)", n)
	}
	// Order: the always-failing package first, clean rows last.
	if rows[0].Test != "(package)" || rows[len(rows)-1].Failures != 0 {
		t.Errorf("rows not ordered by failure rate: first %+v, last %+v", rows[0], rows[len(rows)-1])
	}

	var b bytes.Buffer
	Format(&b, rows)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(rows)+1 || !strings.HasPrefix(lines[0], "test ") || !strings.Contains(lines[0], "first failure") {
		t.Fatalf("table:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "33%  (run 2) gap [10, 20]") {
		t.Errorf("TestFlaky's line lacks its rate and first failure:\n%s", b.String())
	}
	t.Logf("\n%s", b.String())
}

// A suite that wrote no report (it crashed or did not build) still counts,
// through its Go test.
func TestSuiteWithoutReportCountsItsGoTest(t *testing.T) {
	tbl := load(t, false)
	for _, r := range tbl.Rows() {
		if r.Package == fake+"suite" {
			if r.Test != "TestSuite" || r.Runs != 3 || r.Failures != 1 {
				t.Errorf("suite without reports: row %+v, want TestSuite with 1 failure in 3 runs", r)
			}
			return
		}
	}
	t.Error("suite without reports: no row at all")
}

func keys(m map[string]Row) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
