// Command testsummary reads `go test -json` events on stdin, prints each
// package's result and every failing test's output as they happen, and ends
// with a table of what ran, what was skipped and why, and the closing line
// "N passed, N failed, N skipped". It exits 1 when anything failed.
//
//	go test -json ./... | go run ./ci/testsummary -where native
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

var (
	skipReason = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)
	ginkgoRan  = regexp.MustCompile(`Ran (\d+) of (\d+) Specs`)
	ginkgoTail = regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)
	ansi       = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

func main() {
	where := flag.String("where", "native", "label for the summary (native, vm)")
	out := flag.String("o", "", "also append the summary to this file")
	verbose := flag.Bool("v", false, "echo all test output")
	flag.Parse()

	type key struct{ pkg, test string }
	outputs := map[key][]string{}
	parents := map[key]bool{}
	var passed, failed, skipped []key
	reasons := map[key]string{}
	pkgFailed := map[string]bool{}
	specs := [4]int{}
	suites := map[key]bool{} // Go tests that ran a Ginkgo suite; their specs count instead

	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil {
			fmt.Println(string(line)) // build errors and such come as plain text
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			// Scenario tables and diagnostics pointers are for people:
			// always shown.
			if *verbose || strings.HasPrefix(e.Output, "[birdcage] ") {
				fmt.Print(e.Output)
			}
			if e.Test != "" {
				outputs[k] = append(outputs[k], e.Output)
				if i := strings.LastIndex(e.Test, "/"); i > 0 {
					parents[key{e.Package, e.Test[:i]}] = true
				}
			} else if strings.HasPrefix(e.Output, "FAIL") || strings.Contains(e.Output, "[build failed]") || strings.Contains(e.Output, "[setup failed]") {
				fmt.Print(e.Output)
			}
			if m := ginkgoTail.FindStringSubmatch(ansi.ReplaceAllString(e.Output, "")); m != nil {
				suites[k] = true
				for i := range 4 {
					var v int
					fmt.Sscan(m[i+1], &v)
					specs[i] += v
				}
			}
		case "pass":
			if e.Test == "" {
				fmt.Printf("ok   %-60s %6.1fs\n", e.Package, e.Elapsed)
			} else {
				passed = append(passed, k)
			}
		case "skip":
			if e.Test == "" {
				continue
			}
			skipped = append(skipped, k)
			for _, o := range outputs[k] {
				if m := skipReason.FindStringSubmatch(strings.TrimRight(o, "\n")); m != nil {
					reasons[k] = m[1]
				}
			}
		case "fail":
			if e.Test == "" {
				pkgFailed[e.Package] = true
				fmt.Printf("FAIL %-60s %6.1fs\n", e.Package, e.Elapsed)
				continue
			}
			failed = append(failed, k)
			if !*verbose {
				fmt.Printf("--- FAIL: %s (%s)\n%s", e.Test, e.Package, strings.Join(outputs[k], ""))
			}
		}
	}
	// Parent tests only aggregate their subtests; count leaves. Helper
	// processes (TestHelper*) skip when not re-executed; not a test. A Go
	// test that ran a Ginkgo suite is counted as its specs, not once more.
	count := func(ks []key) (n int) {
		for _, k := range ks {
			if !parents[k] && !suites[k] && !strings.HasPrefix(k.test, "TestHelper") {
				n++
			}
		}
		return n
	}
	testFailedIn := map[string]bool{}
	for _, k := range failed {
		testFailedIn[k.pkg] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n== %s: %d Go tests passed, %d failed, %d skipped", *where, count(passed), count(failed), count(skipped))
	if specs != [4]int{} {
		fmt.Fprintf(&b, "; Ginkgo specs: %d passed, %d failed, %d pending, %d skipped", specs[0], specs[1], specs[2], specs[3])
	}
	b.WriteString("\n")
	var skipLines []string
	for _, k := range skipped {
		if parents[k] || strings.HasPrefix(k.test, "TestHelper") {
			continue
		}
		skipLines = append(skipLines, fmt.Sprintf("   skip %s %s: %s", strings.TrimPrefix(k.pkg, "github.com/birdcage/birdcage/"), k.test, reasons[k]))
	}
	sort.Strings(skipLines)
	for _, l := range skipLines {
		b.WriteString(l + "\n")
	}
	nfail := count(failed) + specs[1]
	for p := range pkgFailed {
		if !testFailedIn[p] {
			nfail++ // a package that failed to build or crashed outside a test
		}
	}
	// The closing line counts Go tests and Ginkgo specs together.
	fmt.Fprintf(&b, "%s: %d passed, %d failed, %d skipped\n", *where, count(passed)+specs[0], nfail, count(skipped)+specs[2]+specs[3])
	fmt.Print(b.String())
	if *out != "" {
		if f, err := os.OpenFile(*out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.WriteString(b.String())
			f.Close()
		}
	}
	if nfail > 0 {
		os.Exit(1)
	}
}
