package results

import (
	"encoding/json"
	"strings"
	"testing"
)

// A run's environment names the timeout scale it waited with, when it
// stretched anything, and keeps it through the results file.
func TestRunEnvRecordsTheTimeoutScale(t *testing.T) {
	plain := &RunEnv{Where: "native", ProbeRate: 1000, CPUs: 2, GoVersion: "go1.26", TimeoutScale: 1}
	if s := plain.String(); strings.Contains(s, "waits") {
		t.Errorf("scale 1 stretches nothing, yet the environment says %q", s)
	}
	slow := &RunEnv{Where: "vm", VMAccel: "tcg", ProbeRate: 200, CPUs: 2, GoVersion: "go1.26", TimeoutScale: 3}
	if s := slow.String(); !strings.Contains(s, "waits ×3") {
		t.Errorf("scale 3: want %q in %q", "waits ×3", s)
	}
	b, err := json.Marshal(slow)
	if err != nil {
		t.Fatal(err)
	}
	var back RunEnv
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.TimeoutScale != 3 {
		t.Errorf("the results file lost the timeout scale: %s", b)
	}
}
