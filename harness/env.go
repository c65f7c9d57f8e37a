package harness

import (
	"github.com/birdcage/birdcage/dataplane/timing"
	"github.com/birdcage/birdcage/internal/env"
)

// WithEnv is o with what the run's environment asks of every cluster (c,
// loaded at the process's edge: the scenario suite's setup, the CLI's root
// command): the machine profile and the timing model where o sets none,
// the render departures of $BIRDCAGE_RENDER_KNOBS added to o.Knobs, the
// neighbour-limit raise, the programmer binary and the BIRD release cache
// where o sets none. Start itself reads no environment. ($BIRDCAGE_TUNNEL
// is the process's, not a cluster's: the edge hands it to topo.ForceTunnel.)
func WithEnv(c env.Config, o Options) (Options, error) {
	if o.Machine == nil {
		m := c.Machine()
		o.Machine = &m
	}
	if o.Timing == nil {
		m, err := timing.FromEnv(c)
		if err != nil {
			return o, err
		}
		o.Timing = &m
	}
	for _, k := range c.RenderKnobs {
		switch k {
		case "no-passive":
			o.Knobs.NoPassive = true
		case "direct-peers":
			o.Knobs.DirectPeers = true
		}
	}
	o.RaiseNeighbourLimits = o.RaiseNeighbourLimits || c.RaiseNeighLimits
	if o.Programmer == "" {
		o.Programmer = c.Programmer
	}
	if o.BIRDCache == "" {
		o.BIRDCache = c.BIRDCache
	}
	return o, nil
}
