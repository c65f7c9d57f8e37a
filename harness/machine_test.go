package harness

// The machine profile reaches the harness's own waits, not only the
// scenarios': Start's convergence wait is 60 s stretched by
// $BIRDCAGE_TIMEOUT_SCALE (or by Options.Machine, which wins over the
// environment), an explicit ConvergeTimeout is kept, and a bad value is an
// error naming the variable.

import (
	"strings"
	"testing"
	"time"
)

func TestTimeoutScaleStretchesStartsConvergenceWait(t *testing.T) {
	tcg := Machine{TimeoutScale: 2, Accel: "tcg"}
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
		{"", Options{Machine: &Machine{}}, 60 * time.Second},
	} {
		t.Setenv(TimeoutScaleEnv, c.env)
		m, err := resolveMachine(c.opts)
		if err != nil {
			t.Fatalf("%s=%q: %v", TimeoutScaleEnv, c.env, err)
		}
		if got := convergeTimeout(c.opts, m); got != c.want {
			t.Errorf("%s=%q, ConvergeTimeout %v, Machine %v: %v; want %v", TimeoutScaleEnv, c.env, c.opts.ConvergeTimeout, c.opts.Machine, got, c.want)
		}
	}
	for _, bad := range []string{"0.5", "x", "21"} {
		t.Setenv(TimeoutScaleEnv, bad)
		if _, err := resolveMachine(Options{}); err == nil || !strings.Contains(err.Error(), TimeoutScaleEnv) {
			t.Errorf("%s=%q: %v, want an error naming the variable", TimeoutScaleEnv, bad, err)
		}
	}
}
