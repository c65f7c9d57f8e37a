package harness

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// TimeoutScaleEnv stretches every waiting limit — the harness's own
// (convergence after Start) and the scenarios' Eventually limits — on a slow
// machine, e.g. 3 under QEMU without KVM. It changes no verdict: a claim
// that holds holds sooner; a claim that does not still fails, later.
const TimeoutScaleEnv = "BIRDCAGE_TIMEOUT_SCALE"

// TimeoutScale is $BIRDCAGE_TIMEOUT_SCALE (1 when unset); an error names
// the variable and the valid range.
func TimeoutScale() (float64, error) {
	v := os.Getenv(TimeoutScaleEnv)
	if v == "" {
		return 1, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 1 || f > 20 {
		return 0, fmt.Errorf("%s=%q: want a number from 1 to 20 (how many times longer the harness and scenarios may wait)", TimeoutScaleEnv, v)
	}
	return f, nil
}

// defaultConvergeTimeout is how long Start waits for convergence unless
// Options say otherwise: 60 s on a machine that runs at native speed.
const defaultConvergeTimeout = 60 * time.Second

// convergeTimeout is Options.ConvergeTimeout, or the default stretched by
// the machine's timeout scale.
func convergeTimeout(o Options) (time.Duration, error) {
	if o.ConvergeTimeout != 0 {
		return o.ConvergeTimeout, nil
	}
	s, err := TimeoutScale()
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(defaultConvergeTimeout) * s), nil
}
