// Package timing builds the timing model a run is under: the realistic
// estimates of how long Felix and confd take, the zero model, and the
// environment knobs that override one field each. The model itself is
// results.results.TimingModel, which every results row records.
package timing

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/birdcage/birdcage/harness/confd"
	"github.com/birdcage/birdcage/harness/results"
)

// Sources of the realistic defaults. None of them was measured against a
// real Felix or confd here; they are estimates, stated so a reader can
// replace them with figures from their own cluster.
const (
	// A Felix restart is a process start (Go binary, config load from
	// env/file and the datastore), a connection to the datastore (Typha or
	// the API server) and a full resync: Felix programs nothing until its
	// calculation graph is in sync with a complete snapshot. On a small
	// cluster that is on the order of a second (estimate; birdcage's own
	// programmer, reading a local directory, is back in ~70 ms).
	RealisticProgrammerStartupDelay = time.Second
	// The resync part grows with the cluster: estimated at 100 µs per
	// route (10k routes ≈ 1 s more). It is small on birdcage's 3-node
	// topologies and is there so a large-cluster restart can be modelled.
	RealisticProgrammerResyncPerRoute = 100 * time.Microsecond
	// confd watches the datastore through the same client Felix uses,
	// renders its templates and runs `birdc configure`; estimated at
	// 100 ms from the change to the configure (the harness's own render
	// and configure, 20–60 ms, come on top).
	RealisticConfdLatency = 100 * time.Millisecond
)

// Environment knobs; each overrides one field of the model.
const (
	ModelEnv           = "BIRDCAGE_TIMING"                  // realistic (default) | zero
	RestartDelayEnv    = "BIRDCAGE_RESTART_DELAY"           // ProgrammerStartupDelay, e.g. 1s
	RestartPerRouteEnv = "BIRDCAGE_RESTART_DELAY_PER_ROUTE" // ProgrammerResyncPerRoute, e.g. 100us
	ConfdLatencyEnv    = "BIRDCAGE_CONFD_LATENCY"           // ConfdLatency, e.g. 100ms
	ConfdSerialEnv     = "BIRDCAGE_CONFD_SERIAL"            // 1: ConfdConcurrent false
	ScanTimeEnv        = "BIRDCAGE_BIRD_SCAN_TIME"          // BIRDScanTime, whole seconds, e.g. 2s
)

// Realistic is the default model: the estimates above, one confd per
// node, BIRD's scan time as the renderer sets it (Calico's 2 s).
func Realistic() results.TimingModel {
	return results.TimingModel{
		Name:                     "realistic",
		ProgrammerStartupDelay:   RealisticProgrammerStartupDelay,
		ProgrammerResyncPerRoute: RealisticProgrammerResyncPerRoute,
		ConfdLatency:             RealisticConfdLatency,
		ConfdConcurrent:          true,
		BIRDScanTime:             time.Duration(confd.DefaultTimers.ScanTime) * time.Second,
	}
}

// Zero is the fastest possible case: no modelled delay anywhere, one
// confd per node. What remains is the processes' own speed.
func Zero() results.TimingModel {
	m := Realistic()
	m.Name = "zero"
	m.ProgrammerStartupDelay, m.ProgrammerResyncPerRoute, m.ConfdLatency = 0, 0, 0
	return m
}

// FromEnv is the model a run asked for: $BIRDCAGE_TIMING (realistic
// or zero) with the per-knob variables applied on top.
func FromEnv() (results.TimingModel, error) {
	var m results.TimingModel
	switch v := os.Getenv(ModelEnv); v {
	case "", "realistic":
		m = Realistic()
	case "zero":
		m = Zero()
	default:
		return m, fmt.Errorf("$%s=%q: valid models are realistic, zero", ModelEnv, v)
	}
	env := false
	for _, k := range []struct {
		name string
		dst  *time.Duration
	}{
		{RestartDelayEnv, &m.ProgrammerStartupDelay},
		{RestartPerRouteEnv, &m.ProgrammerResyncPerRoute},
		{ConfdLatencyEnv, &m.ConfdLatency},
		{ScanTimeEnv, &m.BIRDScanTime},
	} {
		v := os.Getenv(k.name)
		if v == "" {
			continue
		}
		d, err := parseDelay(v)
		if err != nil {
			return m, fmt.Errorf("$%s: %w", k.name, err)
		}
		*k.dst, env = d, true
	}
	if v := os.Getenv(ConfdSerialEnv); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return m, fmt.Errorf("$%s=%q: want 1 or 0", ConfdSerialEnv, v)
		}
		m.ConfdConcurrent, env = !b, true
	}
	if env {
		m.Name += "+env"
	}
	return m, m.Validate()
}

// parseDelay reads a Go duration; a bare "0" is zero.
func parseDelay(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want a non-negative Go duration such as 0, 200ms, 1s", v)
	}
	return d, nil
}

// ParseDelays reads a comma-separated list of delays ("0,200ms,1s,3s").
func ParseDelays(v string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(v, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		d, err := parseDelay(f)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q: no delays", v)
	}
	return out, nil
}
