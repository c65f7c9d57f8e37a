package harness

// BIRDCAGE_TIMEOUT_SCALE reaches the harness's own waits, not only the
// scenarios': Start's convergence wait is 60 s stretched by it, an explicit
// ConvergeTimeout is kept, and a bad value is an error naming the variable.

import (
	"strings"
	"testing"
	"time"
)

func TestTimeoutScaleStretchesStartsConvergenceWait(t *testing.T) {
	for _, c := range []struct {
		env  string
		opts Options
		want time.Duration
	}{
		{"", Options{}, 60 * time.Second},
		{"3", Options{}, 180 * time.Second},
		{"2.5", Options{}, 150 * time.Second},
		{"3", Options{ConvergeTimeout: 8 * time.Minute}, 8 * time.Minute},
	} {
		t.Setenv(TimeoutScaleEnv, c.env)
		got, err := convergeTimeout(c.opts)
		if err != nil || got != c.want {
			t.Errorf("%s=%q, ConvergeTimeout %v: %v, %v; want %v", TimeoutScaleEnv, c.env, c.opts.ConvergeTimeout, got, err, c.want)
		}
	}
	for _, bad := range []string{"0.5", "x", "21"} {
		t.Setenv(TimeoutScaleEnv, bad)
		if _, err := convergeTimeout(Options{}); err == nil || !strings.Contains(err.Error(), TimeoutScaleEnv) {
			t.Errorf("%s=%q: %v, want an error naming the variable", TimeoutScaleEnv, bad, err)
		}
	}
}
