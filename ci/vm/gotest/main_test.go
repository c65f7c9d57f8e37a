package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/env"
)

const fakePkg = "github.com/birdcage/birdcage/ci/vm/gotest/testdata/fake"

// runFake runs the command under testdata/fakevm with GOTEST_FAKE=mode,
// against groups (by default one: testdata/fake), and returns its exit
// status and the events it wrote.
func runFake(t *testing.T, mode string, groups ...string) (int, []event) {
	t.Helper()
	if len(groups) == 0 {
		groups = []string{"./testdata/fake", "-test.run=^TestOne$|^TestTwo$"}
	}
	cmd := exec.Command("go", append([]string{"run", ".", "-exec", "testdata/fakevm", "-timeout", "1m", "--"}, groups...)...)
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "GOTEST_FAKE="+mode, "TMPDIR="+tmp)
	defer func() {
		// Its build directory (test binaries, the guest script) goes too.
		if left, _ := filepath.Glob(filepath.Join(tmp, "birdcage-vmtests.*")); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var evs []event
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("not a JSON event on stdout: %q", sc.Text())
		}
		evs = append(evs, e)
	}
	t.Logf("%s: exit %d, %d events, stderr:\n%s", mode, code, len(evs), stderr.String())
	return code, evs
}

func final(evs []event, test string) string {
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Package == fakePkg && e.Test == test && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
			return e.Action
		}
	}
	return ""
}

func TestStreamsEventsAsGoTestDoes(t *testing.T) {
	for _, c := range []struct {
		mode     string
		code     int
		want     map[string]string // test -> final action ("" package)
		reasonIn string            // output of TestOne/sub must contain this
	}{
		{"pass", 0, map[string]string{"": "pass", "TestOne": "pass", "TestOne/sub": "pass", "TestTwo": "pass"}, ""},
		{"fail", 1, map[string]string{"": "fail", "TestOne": "fail", "TestOne/sub": "fail", "TestTwo": "pass"}, "failed on purpose"},
		// The "VM" ends mid-test: the running test and its parent fail,
		// named, with the reason; the test that never ran has no verdict.
		{"crash", 1, map[string]string{"": "fail", "TestOne": "fail", "TestOne/sub": "fail", "TestTwo": ""}, "before this package finished: the guest crashed"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			code, evs := runFake(t, c.mode)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			for test, want := range c.want {
				if got := final(evs, test); got != want {
					t.Errorf("%q: final action %q, want %q", test, got, want)
				}
			}
			if c.reasonIn != "" {
				var out strings.Builder
				for _, e := range evs {
					if e.Test == "TestOne/sub" && e.Action == "output" {
						out.WriteString(e.Output)
					}
				}
				if !strings.Contains(out.String(), c.reasonIn) {
					t.Errorf("TestOne/sub's output lacks %q:\n%s", c.reasonIn, out.String())
				}
			}
		})
	}
}

// One package run three times, each with its own variables: the second run
// crashes the "VM". Each run has its own verdict: the first passes, the
// second fails naming the test it was in, and the third, which never began,
// fails as a package that never started — not taken for ended because an
// earlier run of the same package ended.
func TestRunsOfOnePackageAreTrackedApart(t *testing.T) {
	code, evs := runFake(t, "crash",
		"GOTEST_FAKE=pass", "./testdata/fake", "--",
		"./testdata/fake", "--",
		"GOTEST_FAKE=pass", "IGNORED_HERE=1", "./testdata/fake")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var runs []string // each run's package-level verdict, in order
	var subOut strings.Builder
	for _, e := range evs {
		if e.Package != fakePkg {
			continue
		}
		if e.Test == "" && (e.Action == "pass" || e.Action == "fail") {
			runs = append(runs, e.Action)
		}
		if e.Test == "TestOne/sub" && e.Action == "output" && len(runs) == 1 {
			subOut.WriteString(e.Output)
		}
	}
	if strings.Join(runs, ",") != "pass,fail,fail" {
		t.Errorf("package verdicts per run %q, want pass,fail,fail", runs)
	}
	if !strings.Contains(subOut.String(), "(TestOne/sub was running)") {
		t.Errorf("the crashed run's TestOne/sub output lacks the reason:\n%s", subOut.String())
	}
	starts := 0
	for _, e := range evs {
		if e.Package == fakePkg && e.Action == "start" {
			starts++
		}
	}
	if starts != 3 {
		t.Errorf("%d start events, want 3 (two runs began, the third is closed out as never started)", starts)
	}
}

func TestPlanGroupVariables(t *testing.T) {
	es, err := plan("", []string{"A=1", "B_2=x=y", "./testdata/fake", "-x", "--", "./testdata/fake"})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || strings.Join(es[0].env, " ") != "A=1 B_2=x=y" || strings.Join(es[0].args, " ") != "-x" || es[1].env != nil {
		t.Errorf("entries %+v %+v: want env [A=1 B_2=x=y] and args [-x], then no env", *es[0], *es[1])
	}
	for _, bad := range [][]string{{"A=1", "--", "./testdata/fake"}, {"./testdata/fake", "--", "A=1"}, {"1A=x", "./testdata/fake"}} {
		if _, err := plan("", bad); err == nil {
			t.Errorf("plan(%q): want an error", bad)
		}
	}
	if s := guestScript([]*entry{{dir: "/d", importPath: "p", bin: "/b", env: []string{env.Set(env.Lab, "hand made's")}}}, "/t2j", "1m"); !strings.Contains(s, env.Lab+`='hand made'\''s' '/t2j' -t -p 'p'`) {
		t.Errorf("guest script does not set the entry's variable for its run only:\n%s", s)
	}
}

// A package that does not build is a package-level failure with the
// compiler's output, and the others still run.
func TestBuildFailureIsAPackageFailure(t *testing.T) {
	dir := filepath.Join("testdata", "broken")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package broken\nfunc TestX(t *testing.T) { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", ".", "-exec", "testdata/fakevm", "--", "./testdata/broken", "--", "./testdata/fake")
	cmd.Env = append(os.Environ(), "GOTEST_FAKE=pass")
	out, _ := cmd.Output()
	s := string(out)
	if !strings.Contains(s, `"Action":"fail","Package":"github.com/birdcage/birdcage/ci/vm/gotest/testdata/broken"`) ||
		!strings.Contains(s, "build failed") {
		t.Errorf("want a package-level fail with the build output for testdata/broken:\n%s", s)
	}
	if !strings.Contains(s, `"Action":"pass","Package":"`+fakePkg+`"`) {
		t.Errorf("the package that builds should still run and pass:\n%s", s)
	}
}

func TestFromList(t *testing.T) {
	f := filepath.Join(t.TempDir(), "list")
	os.WriteFile(f, []byte("# c\n./b TestZ\n./a TestX/ipip\n./a TestY\n./a TestX/v6\n"), 0o644)
	es, err := fromList(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.pkg+" "+strings.Join(e.args, " "))
	}
	want := []string{"./a -test.run=^(TestX|TestY)$/^(ipip|v6)$", "./b -test.run=^(TestZ)$"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q, want %q", got, want)
	}
	os.WriteFile(f, []byte("./a NotATest\n"), 0o644)
	if _, err := fromList(f); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("a bad line: want an error naming the line, got %v", err)
	}
}
