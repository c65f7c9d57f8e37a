package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/birdcage/birdcage/harness/timeline"
	"github.com/birdcage/birdcage/internal/kroute"
	"github.com/birdcage/birdcage/topo"
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
}

// VMAccelEnv is set inside the VM by ci/vm/run to the accelerator in use.
const VMAccelEnv = "BIRDCAGE_VM_ACCEL_USED"

// CurrentRunEnv describes this process's environment.
func CurrentRunEnv() *RunEnv {
	e := &RunEnv{Where: "native", ProbeRate: DefaultProbeRate(), CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Tunnel: topo.ChosenTunnel()}
	if a := os.Getenv(VMAccelEnv); a != "" {
		e.Where, e.VMAccel = "vm", a
	}
	// BIRD prints its version on stderr: "BIRD version 2.0.12".
	if out, err := exec.Command("bird", "--version").CombinedOutput(); err == nil || len(out) > 0 {
		e.BIRDVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "BIRD version ")
	}
	return e
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

// maxRouteEventsPerNode bounds a scenario's route events in the results.
const maxRouteEventsPerNode = 4000

// clusterRouteEvents is every node's route timeline restricted to the
// main-table routes inside the topology's pools (the cluster routes a
// handover is about), for the report's swimlanes. Bounded per node; a node
// with more events keeps the first ones and says so in notes.
func (c *Cluster) clusterRouteEvents() (map[string][]timeline.Event, []string) {
	var pools []netip.Prefix
	for _, p := range c.Net.Topology.Pools {
		if pf, err := netip.ParsePrefix(p.CIDR); err == nil {
			pools = append(pools, pf.Masked())
		}
	}
	in := func(d netip.Prefix) bool {
		for _, p := range pools {
			if p.Bits() <= d.Bits() && p.Contains(d.Addr()) {
				return true
			}
		}
		return false
	}
	out := map[string][]timeline.Event{}
	var notes []string
	for _, n := range c.nodes {
		m := c.Timeline(n.Name)
		if m == nil {
			continue
		}
		var evs []timeline.Event
		total := 0
		for _, e := range m.Events() {
			if e.Route.Table != kroute.MainTable || !in(e.Route.Dst) {
				continue
			}
			total++
			if len(evs) < maxRouteEventsPerNode {
				evs = append(evs, e)
			}
		}
		if total > len(evs) {
			notes = append(notes, fmt.Sprintf("route events of %s: the first %d of %d kept in the results", n.Name, len(evs), total))
		}
		if len(evs) > 0 {
			out[n.Name] = evs
		}
	}
	return out, notes
}
