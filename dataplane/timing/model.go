// Package timing builds the timing model a run is under: the realistic
// estimates of how long Felix and confd take, the zero model, and the model
// the environment's knobs (internal/env) ask for. The model itself is
// Model (modeltype.go), which every results row records.
package timing

import (
	"fmt"
	"strings"
	"time"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/internal/env"
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

// Realistic is the default model: the estimates above, one confd per
// node, BIRD's scan time as the renderer sets it (Calico's 2 s).
func Realistic() Model {
	return Model{
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
func Zero() Model {
	m := Realistic()
	m.Name = "zero"
	m.ProgrammerStartupDelay, m.ProgrammerResyncPerRoute, m.ConfdLatency = 0, 0, 0
	return m
}

// FromEnv is the model a run's environment asked for (internal/env's
// timing knobs, read at the process's edge): $BIRDCAGE_TIMING (realistic or
// zero) with the per-field overrides applied on top, named <model>+env.
func FromEnv(c env.Config) (Model, error) {
	m := Realistic()
	if c.Timing == "zero" {
		m = Zero()
	}
	set := false
	for _, k := range []struct {
		v   *time.Duration
		dst *time.Duration
	}{
		{c.RestartDelay, &m.ProgrammerStartupDelay},
		{c.RestartDelayPerRoute, &m.ProgrammerResyncPerRoute},
		{c.ConfdLatency, &m.ConfdLatency},
		{c.BIRDScanTime, &m.BIRDScanTime},
	} {
		if k.v != nil {
			*k.dst, set = *k.v, true
		}
	}
	if c.ConfdSerial != nil {
		m.ConfdConcurrent, set = !*c.ConfdSerial, true
	}
	if set {
		m.Name += "+env"
	}
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("%s and its overrides: %w", env.Timing, err)
	}
	return m, nil
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
