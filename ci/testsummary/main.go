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

	"github.com/birdcage/birdcage/ci/testlist"
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
	ginkgoTail = regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)
	ansi       = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

func main() {
	where := flag.String("where", "native", "label for the summary (native, vm)")
	out := flag.String("o", "", "also append the summary to this file")
	verbose := flag.Bool("v", false, "echo all test output")
	expectFile := flag.String("expect", "", "a file of `PACKAGE TEST` lines (./pkg TestName[/sub]) that must each have run (passed or failed); one that did not is a failure")
	requireTests := flag.Bool("require-tests", false, "a package that ran no test at all is a failure (a selection that a rename emptied)")
	flag.Parse()
	expected, err := readExpected(*expectFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	ranIn := map[string]int{} // package -> tests that passed or failed
	pkgsSeen := map[string]bool{}

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
				pkgsSeen[e.Package] = true
				fmt.Printf("ok   %-60s %6.1fs\n", e.Package, e.Elapsed)
			} else {
				passed = append(passed, k)
				ranIn[e.Package]++
				progress("pass", k, e.Elapsed, parents[k] || suites[k])
			}
		case "skip":
			if e.Test == "" {
				pkgsSeen[e.Package] = true
				continue
			}
			skipped = append(skipped, k)
			for _, o := range outputs[k] {
				if m := skipReason.FindStringSubmatch(strings.TrimRight(o, "\n")); m != nil {
					reasons[k] = m[1]
				}
			}
			progress("skip", k, e.Elapsed, parents[k] || strings.HasPrefix(k.test, "TestHelper"))
		case "fail":
			if e.Test == "" {
				pkgsSeen[e.Package] = true
				pkgFailed[e.Package] = true
				fmt.Printf("FAIL %-60s %6.1fs\n", e.Package, e.Elapsed)
				continue
			}
			failed = append(failed, k)
			ranIn[e.Package]++
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
		// Ginkgo's "Skipped" counts the specs a run's label filter left
		// out with those that skipped, once per run of the suite (the
		// native stage runs it in several shards).
		fmt.Fprintf(&b, "; Ginkgo specs: %d passed, %d failed, %d pending, %d skipped or filtered out (summed over the suite's runs)", specs[0], specs[1], specs[2], specs[3])
	}
	b.WriteString("\n")
	var skipLines []string
	for _, k := range skipped {
		if parents[k] || strings.HasPrefix(k.test, "TestHelper") {
			continue
		}
		skipLines = append(skipLines, fmt.Sprintf("   skip %s %s: %s", strings.TrimPrefix(k.pkg, modulePrefix), k.test, reasons[k]))
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
	// Selections that ran nothing: an expected test that is not in the
	// stream (renamed, or its -run pattern no longer matches), or with
	// -require-tests a package whose selection matched no test.
	ran := map[key]bool{}
	for _, k := range append(append([]key(nil), passed...), failed...) {
		ran[k] = true
	}
	var missing []string
	for _, x := range expected {
		if !ran[key{x.pkg, x.test}] {
			missing = append(missing, fmt.Sprintf("   expected test did not run: %s %s (renamed? see %s)", strings.TrimPrefix(x.pkg, modulePrefix), x.test, *expectFile))
		}
	}
	if *requireTests {
		for p := range pkgsSeen {
			if ranIn[p] == 0 && !pkgFailed[p] {
				missing = append(missing, fmt.Sprintf("   package ran no test: %s (its selection matched nothing)", strings.TrimPrefix(p, modulePrefix)))
			}
		}
	}
	sort.Strings(missing)
	for _, l := range missing {
		b.WriteString(l + "\n")
	}
	nfail += len(missing)
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

const modulePrefix = "github.com/birdcage/birdcage/"

// progress prints one line as each leaf test finishes, so a person watching
// a long stage (the VM's above all) sees life within seconds and a hang as a
// hang. Parents and Go tests that only host a Ginkgo suite are not leaves;
// the suite prints a line per spec itself ("[birdcage] spec ...").
func progress(verdict string, k struct{ pkg, test string }, elapsed float64, notLeaf bool) {
	if notLeaf {
		return
	}
	fmt.Printf("  %-4s %-28s %-60s %6.1fs\n", verdict, strings.TrimPrefix(k.pkg, modulePrefix), k.test, elapsed)
}

type expectedTest struct{ pkg, test string }

// readExpected reads `./pkg TestName[/subtest]` lines (blank lines and
// #-comments ignored) as full package import paths.
func readExpected(path string) ([]expectedTest, error) {
	if path == "" {
		return nil, nil
	}
	es, err := testlist.Read(path)
	if err != nil {
		return nil, err
	}
	var out []expectedTest
	for _, e := range es {
		out = append(out, expectedTest{modulePrefix + strings.TrimPrefix(e.Package, "./"), e.Test})
	}
	return out, nil
}
