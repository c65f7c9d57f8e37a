package machine_test

// A profile built from the environment's knobs (internal/env, the edges'
// Load): each knob reaches its field, and a bad value is refused naming the
// variable.

import (
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/env"
)

func fromEnv(vars map[string]string) (env.Config, error) { return env.Load(env.Map(vars)) }

func TestProfileFromEnv(t *testing.T) {
	for _, c := range []struct {
		scale, rate, accel string
		wait               time.Duration // of 30 s
		probes             int
		where              string
	}{
		{"", "", "", 30 * time.Second, 1000, "native"},
		{"3", "", "", 90 * time.Second, 1000, "native"},
		{"2", "200", "tcg", 60 * time.Second, 200, "vm"},
		{"2.5", "", "kvm", 75 * time.Second, 1000, "vm"},
	} {
		cfg, err := fromEnv(map[string]string{env.TimeoutScale: c.scale, env.ProbeRate: c.rate, env.VMAccelUsed: c.accel})
		p := cfg.Machine()
		if err != nil {
			t.Fatalf("scale %q rate %q: %v", c.scale, c.rate, err)
		}
		if got := p.Wait(30 * time.Second); got != c.wait {
			t.Errorf("scale %q: Wait(30s) = %v, want %v", c.scale, got, c.wait)
		}
		if p.Rate() != c.probes || p.ProbeRateSet != (c.rate != "") || p.Where() != c.where {
			t.Errorf("rate %q accel %q: %+v, want rate %d, where %s", c.rate, c.accel, p, c.probes, c.where)
		}
	}
}

func TestProfileFromEnvRefusesBadValuesNamingTheVariable(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{env.TimeoutScale, "0.5"}, {env.TimeoutScale, "x"}, {env.TimeoutScale, "21"},
		{env.ProbeRate, "0"}, {env.ProbeRate, "fast"}, {env.ProbeRate, "-5"},
	} {
		if _, err := fromEnv(map[string]string{c.name: c.value}); err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.value) {
			t.Errorf("%s=%q: %v, want an error naming the variable and the value", c.name, c.value, err)
		}
	}
}
