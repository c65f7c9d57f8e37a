package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (test2json), build events included.
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Output      string
	Elapsed     float64
	ImportPath  string // build-output, build-fail
	FailedBuild string // a package's fail event when its build failed
}

var (
	skipReason = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)
	// testMessage is a line t.Log, t.Error or t.Fatal wrote: the file and
	// line of the call, then the message, indented by the test's depth.
	testMessage = regexp.MustCompile(`^(\s+)(\S+\.go:\d+: .*)$`)
	ginkgoTail  = regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)
	ginkgoFail  = regexp.MustCompile(`^FAIL! *-+ *(.*)$`)
	specLine    = regexp.MustCompile(`^\[birdcage\] spec (\S+)\s+[\d.]+s\s+(.*)$`)
	specWhy     = regexp.MustCompile(`^\[birdcage\] spec skipped because: (.*)$`)
	// Ginkgo's closing "Summarizing N Failures" list: one line per spec
	// that did not pass, "[FAIL] Container [It] spec".
	ginkgoFailed = regexp.MustCompile(`^\s*\[(FAIL|PANICKED!|TIMEDOUT|INTERRUPTED|ABORTED)\] (.*)$`)
	ansi         = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

// Options say what a stage promised.
type Options struct {
	Where   string
	Verbose bool
	// Expected tests must each have run (passed or failed).
	Expected []expectedTest
	// RequireTests: a package whose selection matched no test fails.
	RequireTests bool
	// AllowEmpty: a stream in which no test and no spec ran at all is not
	// a failure (without it, it is: a stage exists to run something).
	AllowEmpty bool
	// Skips are the skips this stage declares it expects; any other skip
	// fails the stage and is named. Nil: skips are listed, not judged.
	Skips *SkipList
	// ExpectFile names Expected's file in messages.
	ExpectFile string
}

type key struct{ pkg, test string }

// summary is the state built from the stream.
type summary struct {
	o   Options
	out io.Writer

	outputs map[key][]string
	parents map[key]bool
	// suites are Go tests that hosted a Ginkgo suite: their specs count
	// instead of them, and their own failure counts only when no spec
	// failure explains it.
	suites map[key]*suiteRun

	passed, failed, skipped []key
	reasons                 map[key]string

	pkgStarted map[string]bool
	pkgEnded   map[string]bool
	pkgFailed  map[string]string // package -> why (build failed, crashed, ...)
	ranIn      map[string]int    // package -> tests that passed or failed
	buildFails map[string]bool   // import paths whose build failed

	specs       [4]int // Ginkgo passed, failed, pending, skipped-or-filtered over all suite runs
	specSkipped []string
	specWhy     map[string]string
	lastSpec    string
	// specFailed are the specs Ginkgo's closing summary lists as not
	// passed, "package: [state] spec", in stream order.
	specFailed []string
}

type suiteRun struct {
	failedSpecs int
	// ranSpecs counts the specs that passed, failed or skipped in their
	// body: 0 in a suite that passed is a selection that matched nothing.
	ranSpecs int
	failLine string // Ginkgo's "FAIL! - ..." line: why the suite failed
}

func newSummary(out io.Writer, o Options) *summary {
	return &summary{o: o, out: out,
		outputs: map[key][]string{}, parents: map[key]bool{}, suites: map[key]*suiteRun{},
		reasons: map[key]string{}, pkgStarted: map[string]bool{}, pkgEnded: map[string]bool{},
		pkgFailed: map[string]string{}, ranIn: map[string]int{}, buildFails: map[string]bool{},
		specWhy: map[string]string{}}
}

// run reads the whole stream and returns the summary text and the number of
// failures in it (0: the stage passed).
func run(in io.Reader, out io.Writer, o Options) (string, int) {
	s := newSummary(out, o)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		s.line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		s.pkgFailed["(the stream)"] = "reading the test stream: " + err.Error()
	}
	return s.finish()
}

func (s *summary) line(line []byte) {
	var e event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
		fmt.Fprintln(s.out, string(line)) // plain text from a tool in the pipeline
		return
	}
	k := key{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
	case "build-fail":
		s.buildFails[e.ImportPath] = true
	case "start":
		s.pkgStarted[e.Package] = true
	case "output":
		s.output(k, e.Output)
	case "pass":
		if e.Test == "" {
			s.pkgEnded[e.Package] = true
			fmt.Fprintf(s.out, "ok   %-60s %6.1fs\n", e.Package, e.Elapsed)
			return
		}
		s.passed = append(s.passed, k)
		s.ranIn[e.Package]++
		s.progress("pass", k, e.Elapsed)
	case "skip":
		if e.Test == "" {
			s.pkgEnded[e.Package] = true
			return
		}
		s.skipped = append(s.skipped, k)
		for _, o := range s.outputs[k] {
			if m := skipReason.FindStringSubmatch(strings.TrimRight(o, "\n")); m != nil {
				s.reasons[k] = m[1]
			}
		}
		s.progress("skip", k, e.Elapsed)
	case "fail":
		if e.Test == "" {
			s.pkgEnded[e.Package] = true
			why := "it failed outside any test (a crash, a panic in a goroutine, a timeout, TestMain)"
			if e.FailedBuild != "" {
				why = "its build failed"
			}
			s.pkgFailed[e.Package] = why
			fmt.Fprintf(s.out, "FAIL %-60s %6.1fs\n", e.Package, e.Elapsed)
			return
		}
		s.failed = append(s.failed, k)
		s.ranIn[e.Package]++
		if !s.o.Verbose {
			fmt.Fprintf(s.out, "--- FAIL: %s (%s)\n%s", e.Test, e.Package, strings.Join(s.outputs[k], ""))
		}
	}
}

func (s *summary) output(k key, out string) {
	// Scenario tables and diagnostics pointers are for people: always shown.
	if s.o.Verbose || strings.HasPrefix(out, "[birdcage] ") {
		fmt.Fprint(s.out, out)
	}
	if k.test == "" {
		if strings.HasPrefix(out, "FAIL") || strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]") || strings.HasPrefix(out, "panic:") {
			fmt.Fprint(s.out, out)
		}
		return
	}
	s.outputs[k] = append(s.outputs[k], out)
	if i := strings.LastIndex(k.test, "/"); i > 0 {
		s.parents[key{k.pkg, k.test[:i]}] = true
	}
	plain := strings.TrimRight(ansi.ReplaceAllString(out, ""), "\n")
	if m := ginkgoTail.FindStringSubmatch(plain); m != nil {
		sr := s.suite(k)
		for i := range 4 {
			var v int
			fmt.Sscan(m[i+1], &v)
			s.specs[i] += v
			if i == 1 {
				sr.failedSpecs += v
			}
			if i <= 1 {
				sr.ranSpecs += v
			}
		}
	}
	if m := ginkgoFail.FindStringSubmatch(strings.TrimSpace(plain)); m != nil {
		s.suite(k).failLine = strings.TrimSpace(m[1])
	}
	if m := ginkgoFailed.FindStringSubmatch(plain); m != nil {
		state := ""
		if m[1] != "FAIL" {
			state = " [" + strings.TrimSuffix(m[1], "!") + "]"
		}
		s.specFailed = append(s.specFailed, fmt.Sprintf("%s%s: %s", short(k.pkg), state, strings.Replace(m[2], "[It] ", "", 1)))
	}
	// Ginkgo's progress marks (•, S) may stand before a line the suite
	// printed: read from the suite's own prefix.
	if i := strings.Index(plain, "[birdcage] "); i > 0 {
		plain = plain[i:]
	}
	if m := specLine.FindStringSubmatch(plain); m != nil {
		sr := s.suite(k)
		s.lastSpec = m[2]
		if m[1] == "skipped" {
			s.specSkipped = append(s.specSkipped, m[2])
			sr.ranSpecs++
		}
	}
	if m := specWhy.FindStringSubmatch(plain); m != nil && s.lastSpec != "" {
		s.specWhy[s.lastSpec] = m[1]
	}
}

func (s *summary) suite(k key) *suiteRun {
	sr := s.suites[k]
	if sr == nil {
		sr = &suiteRun{}
		s.suites[k] = sr
	}
	return sr
}

// leaf reports whether k counts as a test of its own: not a parent of
// subtests, not a Go test hosting a Ginkgo suite (its specs count), not a
// helper process (TestHelper*, which skips when not re-executed).
func (s *summary) leaf(k key) bool {
	return !s.parents[k] && s.suites[k] == nil && !strings.HasPrefix(k.test, "TestHelper")
}

func (s *summary) count(ks []key) (n int) {
	for _, k := range ks {
		if s.leaf(k) {
			n++
		}
	}
	return n
}

// progress prints one line as each leaf test finishes, so a person watching
// a long stage (the VM's above all) sees life within seconds and a hang as a
// hang. The suite prints a line per spec itself ("[birdcage] spec ...").
func (s *summary) progress(verdict string, k key, elapsed float64) {
	if !s.leaf(k) || (verdict == "pass" && s.parents[k]) {
		return
	}
	fmt.Fprintf(s.out, "  %-4s %-28s %-60s %6.1fs\n", verdict, strings.TrimPrefix(k.pkg, modulePrefix), k.test, elapsed)
}

// finish judges the whole stream. Every way a stage can fail counts once
// and is named: a failed leaf test, a failed spec, a suite that failed with
// no failed spec to show for it (BeforeSuite, ReportAfterEach,
// fail-on-empty, a panic between specs), a package that failed with no
// failed test in it (build failure, crash outside a test), a package that
// started and never ended (a killed run), an expected test that did not
// run, a selection that ran nothing, and a skip the stage did not declare.
func (s *summary) finish() (string, int) {
	var problems []string
	counted := map[string]int{} // package -> failures counted in it
	for _, k := range s.failed {
		if s.leaf(k) {
			counted[k.pkg]++
		}
	}
	for k, sr := range s.suites {
		counted[k.pkg] += sr.failedSpecs
	}
	for _, k := range s.failed {
		sr := s.suites[k]
		if sr == nil || sr.failedSpecs > 0 {
			continue
		}
		why := sr.failLine
		if why == "" {
			why = "no spec failed; see its output above"
		}
		problems = append(problems, fmt.Sprintf("   suite failed outside its specs: %s %s: %s", short(k.pkg), k.test, why))
		counted[k.pkg]++
	}
	for p, why := range s.pkgFailed {
		if counted[p] == 0 {
			problems = append(problems, fmt.Sprintf("   package failed: %s: %s", short(p), why))
			counted[p]++
		}
	}
	for ip := range s.buildFails {
		p, _, _ := strings.Cut(ip, " ")
		if _, ok := s.pkgFailed[p]; !ok {
			problems = append(problems, fmt.Sprintf("   build failed: %s", short(ip)))
		}
	}
	for p := range s.pkgStarted {
		if !s.pkgEnded[p] {
			problems = append(problems, fmt.Sprintf("   package did not finish: %s (killed, or its output was cut off)", short(p)))
		}
	}
	// A Ginkgo suite that passed having run no spec: its label filter or
	// focus matched nothing (a rename, a label typo, a shard that came out
	// empty). go test calls that a pass; without -ginkgo.fail-on-empty
	// nothing else would say so, and other packages' tests passing beside
	// it would keep "nothing ran" below from firing.
	for _, k := range s.passed {
		if sr := s.suites[k]; sr != nil && sr.ranSpecs == 0 {
			problems = append(problems, fmt.Sprintf("   suite ran no spec: %s %s (its selection matched nothing; every spec was filtered out)", short(k.pkg), k.test))
		}
	}
	ran := map[key]bool{}
	for _, k := range append(append([]key(nil), s.passed...), s.failed...) {
		ran[k] = true
	}
	for _, x := range s.o.Expected {
		if !ran[key{x.pkg, x.test}] {
			problems = append(problems, fmt.Sprintf("   expected test did not run: %s %s (renamed? see %s)", short(x.pkg), x.test, s.o.ExpectFile))
		}
	}
	if s.o.RequireTests {
		for p := range s.pkgEnded {
			if s.ranIn[p] == 0 && s.pkgFailed[p] == "" {
				problems = append(problems, fmt.Sprintf("   package ran no test: %s (its selection matched nothing)", short(p)))
			}
		}
	}
	npassed := s.count(s.passed) + s.specs[0]
	if !s.o.AllowEmpty && npassed+s.count(s.failed)+s.specs[1] == 0 && len(problems) == 0 {
		problems = append(problems, "   nothing ran: no test and no spec passed or failed in this stage")
	}

	var skipLines []string
	for _, k := range s.skipped {
		if !s.leaf(k) {
			continue
		}
		d := fmt.Sprintf("%s %s: %s", short(k.pkg), k.test, s.reasons[k])
		skipLines = append(skipLines, s.judgeSkip(d, &problems))
	}
	for _, spec := range s.specSkipped {
		d := fmt.Sprintf("spec %s: %s", spec, s.specWhy[spec])
		skipLines = append(skipLines, s.judgeSkip(d, &problems))
	}
	sort.Strings(skipLines)
	sort.Strings(problems)
	// What failed, named last, just above the closing count: the part of
	// a long stage's output a reader (or a CI page showing its tail) sees.
	var failLines []string
	for _, k := range s.failed {
		if s.leaf(k) {
			line := fmt.Sprintf("   FAIL %s %s", short(k.pkg), k.test)
			if m := lastMessage(s.outputs[k]); m != "" {
				line += " — " + m
			}
			failLines = append(failLines, line)
		}
	}
	sort.Strings(failLines)
	for _, f := range s.specFailed {
		failLines = append(failLines, "   FAIL spec "+f)
	}

	// Every problem is one failure on top of the failed tests and specs.
	nfail := s.count(s.failed) + s.specs[1] + len(problems)

	var b strings.Builder
	fmt.Fprintf(&b, "\n== %s: %d Go tests passed, %d failed, %d skipped", s.o.Where, s.count(s.passed), s.count(s.failed), s.count(s.skipped))
	if s.specs != [4]int{} {
		// Ginkgo's "Skipped" counts the specs a run's label filter left
		// out with those that skipped, once per run of the suite (the
		// native stage runs it in several shards).
		fmt.Fprintf(&b, "; Ginkgo specs: %d passed, %d failed, %d pending, %d skipped or filtered out (summed over the suite's runs; %d skipped in their body)",
			s.specs[0], s.specs[1], s.specs[2], s.specs[3], len(s.specSkipped))
	}
	b.WriteString("\n")
	for _, l := range skipLines {
		b.WriteString(l + "\n")
	}
	for _, l := range problems {
		b.WriteString(l + "\n")
	}
	for _, l := range failLines {
		b.WriteString(l + "\n")
	}
	// The closing line counts Go tests and Ginkgo specs together; skipped
	// counts what skipped, not what a label filter left out.
	fmt.Fprintf(&b, "%s: %d passed, %d failed, %d skipped\n", s.o.Where, npassed, nfail, s.count(s.skipped)+len(s.specSkipped)+s.specs[2])
	return b.String(), nfail
}

// judgeSkip is a skip's line in the summary; a skip the stage did not
// declare is also a problem.
func (s *summary) judgeSkip(d string, problems *[]string) string {
	if s.o.Skips == nil {
		return "   skip " + d
	}
	if why, ok := s.o.Skips.Match(s.o.Where, d); ok {
		return "   skip " + d + "  [expected: " + why + "]"
	}
	*problems = append(*problems, "   skip not declared for stage "+s.o.Where+": "+d+" (declare it in "+s.o.Skips.Path+" or make it run)")
	return "   skip " + d + "  [NOT EXPECTED]"
}

// lastMessage is a failed test's last message (t.Fatal's, as a rule: it
// ends the test), with up to two of its continuation lines, on one line and
// cut at 300 characters: so the summary's tail says why, not only what,
// when the stream above it is thousands of lines long.
func lastMessage(outputs []string) string {
	var lines []string
	for _, o := range outputs {
		lines = append(lines, strings.Split(strings.TrimRight(o, "\n"), "\n")...)
	}
	for i := len(lines) - 1; i >= 0; i-- {
		m := testMessage.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		parts := []string{m[2]}
		for _, c := range lines[i+1:] {
			// A continuation is indented deeper than the message line;
			// "--- FAIL" and the next message are not.
			if len(parts) == 3 || !strings.HasPrefix(c, m[1]+" ") || testMessage.MatchString(c) {
				break
			}
			parts = append(parts, strings.TrimSpace(c))
		}
		msg := strings.Join(parts, " / ")
		if r := []rune(msg); len(r) > 300 {
			msg = string(r[:300]) + "…"
		}
		return msg
	}
	return ""
}

func short(p string) string { return strings.TrimPrefix(p, modulePrefix) }
