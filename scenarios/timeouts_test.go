package scenarios_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// literalWaits lists the lines of src where an Eventually's limit is a
// literal duration rather than scaled(...). A Consistently's duration is
// the claim itself ("holds through two resyncs") and stays literal.
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

// Every scenario wait goes through scaled(), so BIRDCAGE_TIMEOUT_SCALE
// (2 under QEMU TCG) reaches it: a literal limit in a new spec is how a
// family that passes natively times out in the VM.
func TestScenarioWaitsAreScaled(t *testing.T) {
	// Positive control: the check finds literal limits and nothing else.
	control := "Eventually(f).WithTimeout(30 * time.Second)\nEventually(f).WithTimeout(time.Minute)\n" +
		"Eventually(f).WithTimeout(scaled(30 * time.Second))\nConsistently(f).WithTimeout(3 * time.Second)\n"
	if got := literalWaits(control); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("control: literal waits at lines %v, want [1 2]", got)
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
			t.Errorf("%s:%d: a literal wait limit; write WithTimeout(scaled(...))", f, line)
		}
	}
}
