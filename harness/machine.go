package harness

import (
	"time"

	"github.com/birdcage/birdcage/internal/machine"
)

// defaultConvergeTimeout is how long Start waits for convergence unless
// Options say otherwise: 60 s on a machine that runs at native speed.
const defaultConvergeTimeout = 60 * time.Second

// resolveMachine is Options.Machine, or a machine at native speed.
func resolveMachine(o Options) machine.Profile {
	if o.Machine != nil {
		return *o.Machine
	}
	return machine.Profile{}
}

// convergeTimeout is Options.ConvergeTimeout, or the default stretched by
// the machine's timeout scale.
func convergeTimeout(o Options, m machine.Profile) time.Duration {
	if o.ConvergeTimeout != 0 {
		return o.ConvergeTimeout
	}
	return m.Wait(defaultConvergeTimeout)
}
