// These tests hold ci/testsummary to one rule: any failing test, spec, suite
// or package fails the stage, whatever else the stream contains, and so does
// a stage that ran nothing or skipped what it did not declare. The streams in
// testdata/streams were recorded from the fixture suites in testdata/suites
// (go test -json, paths rewritten to /src/birdcage); TestLiveStreams runs the
// same fixtures for real, so a change in Go's or Ginkgo's output that the
// recordings no longer show cannot hide.
package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type streamCase struct {
	name string
	// args are go test's extra arguments for the live run.
	args []string
	// fails: the stage must fail; want are lines the summary must name.
	fails bool
	want  []string
}

var streamCases = []streamCase{
	{name: "passing", want: []string{"x: 2 passed, 0 failed, 0 skipped"}},
	{name: "specfail", fails: true, want: []string{"x: 1 passed, 1 failed", "   FAIL spec ci/testsummary/testdata/suites/specfail: fails\n"}},
	{name: "failonempty", args: []string{"-args", "-ginkgo.label-filter=selected", "-ginkgo.fail-on-empty"}, fails: true,
		want: []string{"suite failed outside its specs: ci/testsummary/testdata/suites/failonempty TestSuite: Detected no specs ran and --fail-on-empty is set"}},
	// The same empty selection without -ginkgo.fail-on-empty: go test
	// passes, the stage must not.
	{name: "emptyselection", args: []string{"-args", "-ginkgo.label-filter=selected"}, fails: true,
		want: []string{"suite ran no spec: ci/testsummary/testdata/suites/emptyselection TestSuite"}},
	{name: "beforesuite", fails: true, want: []string{"suite failed outside its specs", "A BeforeSuite node failed"}},
	{name: "reportaftereach", fails: true, want: []string{"x: 0 passed, 1 failed"}},
	{name: "panicoutside", fails: true, want: []string{"package failed: ci/testsummary/testdata/suites/panicoutside: it failed outside any test"}},
	{name: "buildfail", fails: true, want: []string{"package failed: ci/testsummary/testdata/suites/buildfail: its build failed"}},
	{name: "skipped", want: []string{
		"skip ci/testsummary/testdata/suites/skipped TestGoSkip: the kernel has no ipip",
		"skip spec skips in its body: BIRD release 1.6 is not installed",
		"x: 1 passed, 0 failed, 2 skipped"}},
}

func summarize(t *testing.T, stream []byte, o Options) (string, int) {
	t.Helper()
	if o.Where == "" {
		o.Where = "x"
	}
	var out bytes.Buffer
	text, n := run(bytes.NewReader(stream), &out, o)
	return out.String() + text, n
}

func judgeCase(t *testing.T, c streamCase, stream []byte) {
	t.Helper()
	text, n := summarize(t, stream, Options{})
	if c.fails != (n > 0) {
		t.Errorf("%s: %d failures, want the stage to fail=%v; summary:\n%s", c.name, n, c.fails, text)
	}
	for _, w := range c.want {
		if !strings.Contains(text, w) {
			t.Errorf("%s: the summary does not say %q:\n%s", c.name, w, text)
		}
	}
}

func recorded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "streams", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRecordedStreams(t *testing.T) {
	for _, c := range streamCases {
		t.Run(c.name, func(t *testing.T) { judgeCase(t, c, recorded(t, c.name)) })
	}
}

// The issue's own example: with -require-tests, fed the stream
// fail-on-empty produces, the stage used to print "0 passed, 0 failed" and
// exit 0.
func TestFailOnEmptyWithRequireTests(t *testing.T) {
	text, n := summarize(t, recorded(t, "failonempty"), Options{RequireTests: true, Where: "vm"})
	if n == 0 || strings.Contains(text, "vm: 0 passed, 0 failed") {
		t.Fatalf("a suite that selected nothing passed the stage:\n%s", text)
	}
}

// The closing summary names what failed, below the skips, so the tail of a
// long stage's output (all a CI page may show) says which test to look at,
// not only how many.
func TestSummaryNamesEveryFailure(t *testing.T) {
	goTests := []byte(`{"Action":"start","Package":"example.com/p"}
{"Action":"run","Package":"example.com/p","Test":"TestPasses"}
{"Action":"pass","Package":"example.com/p","Test":"TestPasses","Elapsed":0}
{"Action":"run","Package":"example.com/p","Test":"TestFails"}
{"Action":"output","Package":"example.com/p","Test":"TestFails","Output":"    p_test.go:7: a log line first\n"}
{"Action":"output","Package":"example.com/p","Test":"TestFails","Output":"    p_test.go:9: 3 flows lost 5 probes:\n"}
{"Action":"output","Package":"example.com/p","Test":"TestFails","Output":"        flow a→b lost 5\n"}
{"Action":"output","Package":"example.com/p","Test":"TestFails","Output":"--- FAIL: TestFails (0.00s)\n"}
{"Action":"fail","Package":"example.com/p","Test":"TestFails","Elapsed":0}
{"Action":"fail","Package":"example.com/p","Elapsed":0}
`)
	stream := append(append(recorded(t, "skipped"), recorded(t, "specfail")...), goTests...)
	text, n := run(bytes.NewReader(stream), io.Discard, Options{Where: "x"})
	if n != 2 {
		t.Errorf("%d failures, want 2 (one spec, one Go test):\n%s", n, text)
	}
	lines := strings.Split(text, "\n")
	lastSkip, fails := -1, map[string]int{}
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "   skip "):
			lastSkip = i
		case strings.HasPrefix(l, "   FAIL "):
			fails[strings.TrimPrefix(l, "   FAIL ")] = i
		}
	}
	if lastSkip < 0 {
		t.Fatalf("guard: the skipped stream's skips are not in the summary:\n%s", text)
	}
	for _, w := range []string{"example.com/p TestFails — p_test.go:9: 3 flows lost 5 probes: / flow a→b lost 5", "spec ci/testsummary/testdata/suites/specfail: fails"} {
		i, ok := fails[w]
		switch {
		case !ok:
			t.Errorf("the summary does not name %q:\n%s", w, text)
		case i < lastSkip:
			t.Errorf("%q is named above the skips (line %d, last skip %d): a tail would not show it", w, i, lastSkip)
		}
	}
	if len(fails) != 2 {
		t.Errorf("named %d failures, want exactly the two (no passing test or spec named): %v", len(fails), fails)
	}
	// Positive control: a passing stream names no failure.
	if text, _ := run(bytes.NewReader(recorded(t, "passing")), io.Discard, Options{Where: "x"}); strings.Contains(text, "FAIL") {
		t.Errorf("a passing stream's summary names a failure:\n%s", text)
	}
}

func TestCutStreamFails(t *testing.T) {
	full := recorded(t, "passing")
	lines := bytes.SplitAfter(full, []byte("\n"))
	// Everything up to, not including, the package's own end: the runner
	// was killed after its tests passed.
	var cut []byte
	for _, l := range lines {
		if bytes.Contains(l, []byte(`"Action":"pass"`)) && !bytes.Contains(l, []byte(`"Test"`)) {
			break
		}
		cut = append(cut, l...)
	}
	if text, n := summarize(t, cut, Options{}); n == 0 || !strings.Contains(text, "package did not finish") {
		t.Fatalf("a stream cut before its package ended passed:\n%s", text)
	}
	if text, n := summarize(t, full, Options{}); n != 0 {
		t.Fatalf("positive control: the whole stream failed:\n%s", text)
	}
}

func TestEmptyStreamFails(t *testing.T) {
	if text, n := summarize(t, nil, Options{}); n == 0 || !strings.Contains(text, "nothing ran") {
		t.Fatalf("an empty stream passed:\n%s", text)
	}
	if _, n := summarize(t, nil, Options{AllowEmpty: true}); n != 0 {
		t.Fatal("-allow-empty: an empty stream failed")
	}
}

// A suite that passed having run no spec fails the stage even beside
// packages whose tests passed, where "nothing ran" cannot fire; the passing
// stream alone is the control.
func TestEmptySuiteBesidePassingTestsFails(t *testing.T) {
	stream := append(recorded(t, "passing"), recorded(t, "emptyselection")...)
	text, n := summarize(t, stream, Options{})
	if n != 1 || !strings.Contains(text, "suite ran no spec: ci/testsummary/testdata/suites/emptyselection TestSuite") {
		t.Fatalf("an empty suite beside passing tests: %d failures, want 1 naming the suite:\n%s", n, text)
	}
	if text, n := summarize(t, recorded(t, "passing"), Options{}); n != 0 {
		t.Fatalf("control: the passing stream alone failed:\n%s", text)
	}
}

func TestUndeclaredSkipsFail(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) *SkipList {
		p := filepath.Join(dir, "skips")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := ReadSkipList(p)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	stream := recorded(t, "skipped")
	// Only the Go test's skip is declared: the spec's is named and fails.
	text, n := summarize(t, stream, Options{Where: "native", Skips: write("native TestGoSkip: the kernel has no ipip  # the VM stage runs it\n")})
	if n != 1 || !strings.Contains(text, "skip not declared for stage native: spec skips in its body: BIRD release 1.6 is not installed") {
		t.Fatalf("want exactly the spec's skip to fail, named; got %d:\n%s", n, text)
	}
	// Declared for another stage only: both fail.
	if _, n := summarize(t, stream, Options{Where: "vm", Skips: write("native .  # everything, natively\n")}); n != 2 {
		t.Fatalf("skips declared for native only passed in vm: %d failures", n)
	}
	// Positive control: both declared.
	if text, n := summarize(t, stream, Options{Where: "native", Skips: write("native TestGoSkip  # the VM runs it\n* ^spec skips in its body: BIRD release  # a BIRD release is not installed\n")}); n != 0 {
		t.Fatalf("declared skips failed:\n%s", text)
	}
}

func TestSkipListErrorsNameTheLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "skips")
	for body, want := range map[string]string{
		"native TestX\n":     `skips:1: want "STAGE REGEXP  # why"`,
		"native (  # why\n":  "skips:1: field REGEXP",
		"\n\nnative # why\n": `skips:3: want "STAGE REGEXP  # why"`,
	} {
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := ReadSkipList(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to say %q", body, err, want)
		}
	}
}

// The same fixtures, run for real now.
func TestLiveStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go test on eight fixture packages")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain: %v", err)
	}
	for _, c := range streamCases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"test", "-json", "-count=1", "./testdata/suites/" + c.name}, c.args...)
			cmd := exec.Command(goBin, args...)
			out, _ := cmd.CombinedOutput() // its exit status is what is being judged
			judgeCase(t, c, bytes.ReplaceAll(out, []byte(mustAbs(t, "../..")), []byte("/src/birdcage")))
		})
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
