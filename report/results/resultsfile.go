package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// ResultsFile is the results file as written (Results) and as read back by
// `birdcage report` and `birdcage compare`.
type ResultsFile struct {
	Started time.Time `json:"started"`
	Kernel  string    `json:"kernel"`
	// Env is where the run happened (native or VM, accelerator, probe
	// rate, BIRD version); absent in files written before it existed.
	Env       *RunEnv          `json:"env,omitempty"`
	Scenarios []ScenarioResult `json:"scenarios"`
	// Repeats summarises scenarios that ran more than once.
	Repeats map[string]RepeatSummary `json:"repeats,omitempty"`
	// Join is the token of the run whose processes write this file
	// together ($BIRDCAGE_RESULTS_JOIN), if any.
	Join string `json:"join,omitempty"`
}

// RunEnv is what a reader of a run's figures needs to know about where it
// ran: the same scenario gives other figures in a TCG VM at 200 Hz.
type RunEnv struct {
	// Where is "native" or "vm"; VMAccel the VM's accelerator (kvm, tcg)
	// from $BIRDCAGE_VM_ACCEL_USED, which ci/vm/run sets in the guest.
	Where   string `json:"where"`
	VMAccel string `json:"vmAccel,omitempty"`
	// ProbeRate is the default probe rate (per flow per second) the run
	// used ($BIRDCAGE_PROBE_RATE or 1000); each probe report carries its own.
	ProbeRate   int    `json:"probeRate"`
	BIRDVersion string `json:"birdVersion,omitempty"`
	CPUs        int    `json:"cpus"`
	GoVersion   string `json:"goVersion"`
	// Tunnel is how this run's nodes had tunl0: "kernel" (the ipip
	// module) or "ebpf" (the emulation, topo.TunnelEBPF); empty where no
	// scenario needed one.
	Tunnel string `json:"tunnel,omitempty"`
	// Build is the build the run tested (CurrentBuild: $BIRDCAGE_BUILD,
	// else the checkout's commit); absent in files written before it was
	// recorded. Shards of one run must agree on it.
	Build string `json:"build,omitempty"`
	// TimeoutScale is $BIRDCAGE_TIMEOUT_SCALE as the run used it: how many
	// times longer the harness and the scenarios waited (0 in files
	// written before it was recorded, read as 1).
	TimeoutScale float64 `json:"timeoutScale,omitempty"`
}

func (e *RunEnv) String() string {
	if e == nil {
		return "unknown (written before runs recorded their environment)"
	}
	where := e.Where
	if e.VMAccel != "" {
		where += " (" + e.VMAccel + ")"
	}
	s := fmt.Sprintf("%s, probes %d/s per flow, BIRD %s, %d CPUs, %s", where, e.ProbeRate, e.BIRDVersion, e.CPUs, e.GoVersion)
	if e.Tunnel != "" {
		s += ", tunl0 " + e.Tunnel
	}
	if e.TimeoutScale > 1 {
		s += fmt.Sprintf(", waits ×%g", e.TimeoutScale)
	}
	if e.Build != "" {
		s += ", build " + e.Build
	}
	return s
}

// ReadResults reads a results file; errors name the file and, for a file
// that is not one, the field.
func ReadResults(path string) (*ResultsFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results %s: %w", path, err)
	}
	var f ResultsFile
	if err := json.Unmarshal(b, &f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("results %s: field %s: %s is not a valid %s", path, te.Field, te.Value, te.Type)
		}
		return nil, fmt.Errorf("results %s: not a results file: %w", path, err)
	}
	if f.Scenarios == nil {
		return nil, fmt.Errorf("results %s: field scenarios: missing (is this a birdcage results file?)", path)
	}
	for i, s := range f.Scenarios {
		if s.Name == "" {
			return nil, fmt.Errorf("results %s: field scenarios[%d].name: empty", path, i)
		}
	}
	return &f, nil
}
