package scenarios_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/birdcage/birdcage/internal/env"
)

// literalWaits lists the lines of src where an Eventually's limit is a
// literal duration rather than the machine's (scenariotest.Machine.Wait(...), or no
// limit: the suite's default, scenariotest.Machine.Wait(30 s)). A Consistently's
// duration is the claim itself ("holds through two resyncs") and stays
// literal.
func literalWaits(src string) []int {
	var lines []int
	for _, loc := range regexp.MustCompile(`WithTimeout\((?:[0-9]|time\.)`).FindAllStringIndex(src, -1) {
		before := src[max(0, loc[0]-400):loc[0]]
		if strings.LastIndex(before, "Consistently(") > strings.LastIndex(before, "Eventually(") {
			continue
		}
		lines = append(lines, strings.Count(src[:loc[0]], "\n")+1)
	}
	return lines
}

// Every scenario wait takes its limit from the machine profile the suite's
// clusters start on (scenariotest.Machine.Profile, Cluster.Machine), so BIRDCAGE_TIMEOUT_SCALE (2 under
// QEMU TCG) reaches it: a literal limit in a new spec is how a family that
// passes natively times out in the VM. No spec names the scale itself.
// scaleNamed is how a spec would name the scale: it has no business to.
var scaleNamed = regexp.MustCompile(`TimeoutScale|env\.TimeoutScale|` + env.TimeoutScale + `|\bscaled\(`)

func TestScenarioWaitsAreTheMachines(t *testing.T) {
	// Positive control: the check finds literal limits and nothing else.
	control := "Eventually(f).WithTimeout(30 * time.Second)\nEventually(f).WithTimeout(time.Minute)\n" +
		"Eventually(f).WithTimeout(scenariotest.Machine.Wait(30 * time.Second))\nConsistently(f).WithTimeout(3 * time.Second)\nEventually(f).Should(Succeed())\n"
	if got := literalWaits(control); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("control: literal waits at lines %v, want [1 2]", got)
	}
	if !scaleNamed.MatchString("wait := scaled(d)") || scaleNamed.MatchString("scenariotest.Machine.Wait(d)") {
		t.Fatal("control: the scale check does not tell scaled() from scenariotest.Machine.Wait()")
	}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("read %d spec files: not the scenarios directory?", len(files))
	}
	for _, f := range files {
		if f == "timeouts_test.go" { // its control is literal on purpose
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range literalWaits(string(b)) {
			t.Errorf("%s:%d: a literal wait limit; write WithTimeout(scenariotest.Machine.Wait(...)), or leave the suite's default", f, line)
		}
		if loc := scaleNamed.FindIndex(b); loc != nil {
			t.Errorf("%s:%d: names the timeout scale; take limits from scenariotest.Machine.Wait", f, strings.Count(string(b[:loc[0]]), "\n")+1)
		}
	}
}
