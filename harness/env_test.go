package harness

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/birdcage/birdcage/dataplane/confd"
	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/machine"
	"github.com/birdcage/birdcage/internal/testenv"
	"github.com/birdcage/birdcage/topo"
)

// forceTunnelOnce hands the test process's $BIRDCAGE_TUNNEL to topo once.
var forceTunnelOnce sync.Once

// withTestEnv is o with this test process's environment (testenv.Env, the
// edge of the harness's own tests), as the scenario suite's Start gets it.
func withTestEnv(o Options) Options {
	c := testenv.Env()
	forceTunnelOnce.Do(func() { topo.ForceTunnel(c.Tunnel) })
	o, err := WithEnv(c, o)
	if err != nil {
		panic(err)
	}
	return o
}

// WithEnv carries every knob a cluster honours into its options, the
// options' own values winning where they set one; nothing is read from the
// process's environment.
func TestWithEnvCarriesTheRunsKnobs(t *testing.T) {
	c, err := env.Load(env.Map(map[string]string{
		env.TimeoutScale: "3", env.ProbeRate: "200", env.Timing: "zero",
		env.RenderKnobs: "no-passive", env.RaiseNeighLimits: "1",
		env.Programmer: "/opt/p", env.BIRDCache: "/opt/bird",
	}))
	if err != nil {
		t.Fatal(err)
	}
	o, err := WithEnv(c, Options{Knobs: confd.Knobs{DirectPeers: true}})
	if err != nil {
		t.Fatal(err)
	}
	if m := resolveMachine(o); m.Scale() != 3 || m.Rate() != 200 || convergeTimeout(o, m) != 180*time.Second {
		t.Errorf("machine %+v: want waits ×3 and 200 probes/s", m)
	}
	if o.Timing == nil || o.Timing.Name != "zero" {
		t.Errorf("timing %+v: want the zero model", o.Timing)
	}
	if !reflect.DeepEqual(o.Knobs, confd.Knobs{NoPassive: true, DirectPeers: true}) || !o.RaiseNeighbourLimits {
		t.Errorf("knobs %+v, raise %v: want the options' departure and the environment's", o.Knobs, o.RaiseNeighbourLimits)
	}
	if o.Programmer != "/opt/p" || o.BIRDCache != "/opt/bird" {
		t.Errorf("programmer %q, BIRD cache %q", o.Programmer, o.BIRDCache)
	}
	// The options win; an empty environment adds nothing but the zero
	// profile and the realistic model.
	tcg := machine.Profile{TimeoutScale: 2, Accel: "tcg"}
	if o, _ := WithEnv(c, Options{Machine: &tcg, Programmer: "/mine"}); *o.Machine != tcg || o.Programmer != "/mine" {
		t.Errorf("the options' machine and programmer lost to the environment: %+v %q", *o.Machine, o.Programmer)
	}
	o, err = WithEnv(env.Config{}, Options{})
	if err != nil || *o.Machine != (machine.Profile{}) || o.Timing.Name != "realistic" || o.Knobs != (confd.Knobs{}) || o.Programmer != "" {
		t.Errorf("empty environment: %+v %v", o, err)
	}
}
