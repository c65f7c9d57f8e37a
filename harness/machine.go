package harness

import (
	"time"

	"github.com/birdcage/birdcage/internal/machine"
)

// Machine is the machine profile a run is on (internal/machine): how many
// times longer every wait may be, the probe rate, the VM's accelerator.
// Start takes it in Options.Machine (nil: the zero profile) and keeps it
// on the cluster (Cluster.Machine); every wait the harness makes honours it,
// and the results record it.
type Machine = machine.Profile

// defaultConvergeTimeout is how long Start waits for convergence unless
// Options say otherwise: 60 s on a machine that runs at native speed.
const defaultConvergeTimeout = 60 * time.Second

// resolveMachine is Options.Machine, or a machine at native speed.
func resolveMachine(o Options) Machine {
	if o.Machine != nil {
		return *o.Machine
	}
	return Machine{}
}

// convergeTimeout is Options.ConvergeTimeout, or the default stretched by
// the machine's timeout scale.
func convergeTimeout(o Options, m Machine) time.Duration {
	if o.ConvergeTimeout != 0 {
		return o.ConvergeTimeout
	}
	return m.Wait(defaultConvergeTimeout)
}
