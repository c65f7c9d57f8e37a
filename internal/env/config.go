package env

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/birdcage/birdcage/internal/machine"
)

// Config is every knob's value as Load read it; the zero Config is an
// empty environment. Optional overrides are pointers: nil is unset.
type Config struct {
	// Machine.
	TimeoutScale float64
	ProbeRate    int
	VMAccelUsed  string

	// Cluster.
	Programmer        string
	UpgradeProgrammer string
	Tunnel            string
	RenderKnobs       []string
	RaiseNeighLimits  bool
	BIRDCache         string
	Calico            string
	CalicoFrom        string

	// Timing model.
	Timing               string
	RestartDelay         *time.Duration
	RestartDelayPerRoute *time.Duration
	ConfdLatency         *time.Duration
	ConfdSerial          *bool
	BIRDScanTime         *time.Duration

	// The programmer process.
	ProgrammerStartupDelay        time.Duration
	ProgrammerResyncDelayPerRoute time.Duration
	ProgrammerWriteOrder          string
	ProgrammerDeleteNamesProtocol bool
	ProgrammerWriteWindow         int
	ProgrammerIPv4Metric          int
	ProgrammerNoTunnelMTU         bool
	ProgrammerTakeoverGap         time.Duration
	ProgrammerNoBIRDCleanup       bool

	// Results and artifacts.
	Artifacts   string
	ResultsJoin string
	Lab         string
	Repeat      int
	Build       string

	// Scenario runs.
	Depth          []string
	SweepDelays    []time.Duration
	ScaleNodes     []int
	Selftest       string
	ShardDurations string
	Progress       bool
	KeepOnFail     bool
	Pcap           bool
	WhatIf         bool
	Require        []string
	Perf           bool
	CLI            string

	// The kernel VM runner.
	VMTests            bool
	KernelCache        string
	VMTimeout          string
	VMAccel            string
	VMBootDeadline     string
	VMKVMProbeDeadline string
	VMAccelCache       string
	VMKVMDevice        string
	VMMemory           string
	VMCPUs             string
	VMModules          string
	VMWritable         string
	VMConsole          bool
	VMAppend           string
	VMFastBoot         string
	DemoVM             bool
	GoTimeout          string

	// Internal.
	SupervisorReadyFD int
	SupervisorLog     string
	TestHelper        string
	ResultsJoinHelper string
	VMInside          bool
	VMProbe           string
}

// The depth families: BIRDCAGE_DEPTH=full runs each in its full form, or a
// list names the ones to run fully.
const (
	DepthReduced     = "reduced"
	DepthFull        = "full"
	DepthReleases    = "releases"     // the whole cross-release family
	DepthCollision   = "collision"    // the collision spec both ways, every restart
	DepthCleanupLate = "cleanup-late" // a late stray at 125 s too
	DepthHoldTimer   = "hold-timer"   // BIRD's default 240 s hold time
	DepthSweep       = "sweep"        // the restart-delay sweep at 4 delays, 5 runs each
)

// Full says whether family runs in its full form.
func (c Config) Full(family string) bool {
	return slices.Contains(c.Depth, DepthFull) || slices.Contains(c.Depth, family)
}

// Machine is the machine profile these knobs describe.
func (c Config) Machine() machine.Profile {
	return machine.Profile{TimeoutScale: c.TimeoutScale, ProbeRate: c.ProbeRate, ProbeRateSet: c.ProbeRate != 0, Accel: c.VMAccelUsed}
}

// Required says whether the run promised feature (BIRDCAGE_REQUIRE).
func (c Config) Required(feature string) bool { return slices.Contains(c.Require, feature) }

// A Lookup is os.LookupEnv, or a map standing in for it in a test.
type Lookup func(name string) (string, bool)

// Map is a Lookup over m.
func Map(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// LoadOS is Load(os.LookupEnv), for the edges.
func LoadOS() (Config, error) { return Load(os.LookupEnv) }

// Load reads every knob through lookup. An empty value is unset. The first
// bad value is an error naming the variable, the value and what is valid;
// a retired name is an error naming its replacement.
func Load(lookup Lookup) (Config, error) {
	for _, old := range slices.Sorted(mapsKeys(Retired)) {
		if v, ok := lookup(old); ok && v != "" {
			return Config{}, fmt.Errorf("%s=%s: this variable is gone; set %s", old, v, Retired[old])
		}
	}
	var c Config
	for _, k := range c.knobs() {
		v, ok := lookup(k.Name)
		if v = strings.TrimSpace(v); !ok || v == "" {
			continue
		}
		if err := k.set(v); err != nil {
			return Config{}, fmt.Errorf("%s=%q: want %s", k.Name, v, k.Valid)
		}
	}
	return c, nil
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// parsers for the knobs' kinds; each returns false on a bad value.

func duration(v string) (time.Duration, bool) {
	if v == "0" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	return d, err == nil && d >= 0
}

func setDuration(dst *time.Duration) func(string) error {
	return func(v string) error {
		d, ok := duration(v)
		if !ok {
			return errBad
		}
		*dst = d
		return nil
	}
}

func setOptDuration(dst **time.Duration) func(string) error {
	return func(v string) error {
		d, ok := duration(v)
		if !ok {
			return errBad
		}
		*dst = &d
		return nil
	}
}

func parseBool(v string) (bool, bool) {
	switch v {
	case "1", "true", "yes", "on":
		return true, true
	case "0", "false", "no", "off":
		return false, true
	}
	return false, false
}

func setBool(dst *bool) func(string) error {
	return func(v string) error {
		b, ok := parseBool(v)
		if !ok {
			return errBad
		}
		*dst = b
		return nil
	}
}

func setOptBool(dst **bool) func(string) error {
	return func(v string) error {
		b, ok := parseBool(v)
		if !ok {
			return errBad
		}
		*dst = &b
		return nil
	}
}

func setInt(dst *int, lo, hi int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return errBad
		}
		*dst = n
		return nil
	}
}

func setFloat(dst *float64, lo, hi float64) func(string) error {
	return func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < lo || f > hi {
			return errBad
		}
		*dst = f
		return nil
	}
}

func setString(dst *string) func(string) error {
	return func(v string) error { *dst = v; return nil }
}

func setOneOf(dst *string, valid ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(valid, v) {
			return errBad
		}
		*dst = v
		return nil
	}
}

// setList splits a comma-separated list; valid (if any) bounds each item.
func setList(dst *[]string, valid ...string) func(string) error {
	return func(v string) error {
		var out []string
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			if len(valid) > 0 && !slices.Contains(valid, f) {
				return errBad
			}
			out = append(out, f)
		}
		*dst = out
		return nil
	}
}

func setDurations(dst *[]time.Duration) func(string) error {
	return func(v string) error {
		var out []time.Duration
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			d, ok := duration(f)
			if !ok {
				return errBad
			}
			out = append(out, d)
		}
		*dst = out
		return nil
	}
}

func setInts(dst *[]int, lo, hi int) func(string) error {
	return func(v string) error {
		var out []int
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			n, err := strconv.Atoi(f)
			if err != nil || n < lo || n > hi {
				return errBad
			}
			out = append(out, n)
		}
		*dst = out
		return nil
	}
}

var errBad = fmt.Errorf("bad value")

// Overlay is a Lookup that finds vars (NAME=value entries, as a child
// process's environment adds them) before base: what a child started with
// them will Load.
func Overlay(vars []string, base Lookup) Lookup {
	return func(name string) (string, bool) {
		for i := len(vars) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(vars[i], "="); ok && k == name {
				return v, true
			}
		}
		return base(name)
	}
}
