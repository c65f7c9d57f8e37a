// Command testsummary reads `go test -json` events on stdin, prints each
// package's result and every failing test's output as they happen, and ends
// with a table of what ran, what was skipped and why, and the closing line
// "N passed, N failed, N skipped". It exits 1 when anything failed.
//
//	go test -json ./... | go run ./ci/testsummary -where native
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/birdcage/birdcage/ci/testlist"
)

func main() {
	where := flag.String("where", "native", "label for the summary (native, vm)")
	out := flag.String("o", "", "also append the summary to this file")
	verbose := flag.Bool("v", false, "echo all test output")
	expectFile := flag.String("expect", "", "a file of `PACKAGE TEST` lines (./pkg TestName[/sub]) that must each have run (passed or failed); one that did not is a failure")
	requireTests := flag.Bool("require-tests", false, "a package that ran no test at all is a failure (a selection that a rename emptied)")
	allowEmpty := flag.Bool("allow-empty", false, "a stream in which nothing ran is not a failure")
	skipsFile := flag.String("skips", "", "the stage's declared skips (`FILE` of \"STAGE REGEXP # why\" lines); any other skip is a failure, named")
	flag.Parse()
	o := Options{Where: *where, Verbose: *verbose, RequireTests: *requireTests, AllowEmpty: *allowEmpty, ExpectFile: *expectFile}
	var err error
	if o.Expected, err = readExpected(*expectFile); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if *skipsFile != "" {
		if o.Skips, err = ReadSkipList(*skipsFile); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
	}
	text, nfail := run(os.Stdin, os.Stdout, o)
	fmt.Print(text)
	if *out != "" {
		if f, err := os.OpenFile(*out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.WriteString(text)
			f.Close()
		}
	}
	if nfail > 0 {
		os.Exit(1)
	}
}

const modulePrefix = "github.com/birdcage/birdcage/"

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
