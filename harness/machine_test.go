package harness

// The machine profile reaches the harness's own waits, not only the
// scenarios': Start's convergence wait is 60 s stretched by
// $BIRDCAGE_TIMEOUT_SCALE (through WithEnv; Options.Machine wins over the
// environment), an explicit ConvergeTimeout is kept, and a bad value is an
// error naming the variable.

import (
	"strings"
	"testing"
	"time"

	"github.com/birdcage/birdcage/internal/env"
	"github.com/birdcage/birdcage/internal/machine"
)

func TestTimeoutScaleStretchesStartsConvergenceWait(t *testing.T) {
	tcg := machine.Profile{TimeoutScale: 2, Accel: "tcg"}
	for _, c := range []struct {
		env  string
		opts Options
		want time.Duration
	}{
		{"", Options{}, 60 * time.Second},
		{"3", Options{}, 180 * time.Second},
		{"2.5", Options{}, 150 * time.Second},
		{"3", Options{ConvergeTimeout: 8 * time.Minute}, 8 * time.Minute},
		{"3", Options{Machine: &tcg}, 120 * time.Second},
		{"", Options{Machine: &machine.Profile{}}, 60 * time.Second},
	} {
		cfg, err := env.Load(env.Map(map[string]string{env.TimeoutScale: c.env}))
		if err != nil {
			t.Fatalf("%s=%q: %v", env.TimeoutScale, c.env, err)
		}
		opts, err := WithEnv(cfg, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		m := resolveMachine(opts)
		if got := convergeTimeout(opts, m); got != c.want {
			t.Errorf("%s=%q, ConvergeTimeout %v, Machine %v: %v; want %v", env.TimeoutScale, c.env, c.opts.ConvergeTimeout, c.opts.Machine, got, c.want)
		}
	}
	for _, bad := range []string{"0.5", "x", "21"} {
		if _, err := env.Load(env.Map(map[string]string{env.TimeoutScale: bad})); err == nil || !strings.Contains(err.Error(), env.TimeoutScale) {
			t.Errorf("%s=%q: %v, want an error naming the variable", env.TimeoutScale, bad, err)
		}
	}
}
