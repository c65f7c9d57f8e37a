package results

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDependsOnUpstreamBIRD: a marked row carries the dependence as a
// field (kept through the results file's JSON) and as a note naming the
// fork's commit, so a reader of the notes alone sees it too.
func TestDependsOnUpstreamBIRD(t *testing.T) {
	var s ScenarioResult
	if b, _ := json.Marshal(s); strings.Contains(string(b), "upstreamBIRD") {
		t.Fatalf("an unmarked row carries upstreamBIRD: %s", b)
	}
	d := BIRDDependence{Behaviour: "replace", Fork: "deletes then adds", Differs: "a window", OnBIRD16: true}
	s.DependsOnUpstreamBIRD(d)
	if len(s.UpstreamBIRD) != 1 || s.UpstreamBIRD[0] != d {
		t.Fatalf("UpstreamBIRD = %+v, want [%+v]", s.UpstreamBIRD, d)
	}
	if len(s.Notes) != 1 || !strings.Contains(s.Notes[0], ForkCommit) || !strings.Contains(s.Notes[0], "deletes then adds") {
		t.Fatalf("notes %q: want one naming the fork's commit %s and its behaviour", s.Notes, ForkCommit)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back ScenarioResult
	if err := json.Unmarshal(b, &back); err != nil || len(back.UpstreamBIRD) != 1 || back.UpstreamBIRD[0] != d {
		t.Fatalf("round trip: %+v %v", back.UpstreamBIRD, err)
	}
}
