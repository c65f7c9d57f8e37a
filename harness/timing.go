package harness

import (
	"time"

	"github.com/birdcage/birdcage/dataplane/programmer"
	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/internal/env"
)

// RestartProfile is the programmer's share of the model.
func RestartProfile(m timing.Model) programmer.RestartProfile {
	return programmer.RestartProfile{StartupDelay: m.ProgrammerStartupDelay, ResyncDelayPerRoute: m.ProgrammerResyncPerRoute}
}

// programmerEnv is what the supervisor adds to the programmer's
// environment to give it the restart profile (see dataplane/programmer).
func programmerEnv(m timing.Model) []string {
	return []string{
		env.Set(env.ProgrammerStartupDelay, m.ProgrammerStartupDelay.String()),
		env.Set(env.ProgrammerResyncDelayPerRoute, m.ProgrammerResyncPerRoute.String()),
	}
}

// Timing is the timing model the cluster runs under.
func (c *Cluster) Timing() timing.Model { return c.timing }

// resolveTiming settles the model for a start: Options.Timing, else the
// environment's, with BIRD's scan time agreeing with the renderer's timers
// (an explicit Options.Timers.ScanTime wins; otherwise the model's is
// rendered).
func resolveTiming(opts *Options) (timing.Model, error) {
	var m timing.Model
	if opts.Timing != nil {
		m = *opts.Timing
	} else {
		m = timing.Realistic()
	}
	if err := m.Validate(); err != nil {
		return m, err
	}
	switch {
	case opts.Timers.ScanTime > 0:
		m.BIRDScanTime = time.Duration(opts.Timers.ScanTime) * time.Second
	case m.BIRDScanTime > 0:
		opts.Timers.ScanTime = int(m.BIRDScanTime / time.Second)
	default:
		m.BIRDScanTime = timing.Realistic().BIRDScanTime
	}
	return m, nil
}
