package harness

import (
	"time"

	"github.com/birdcage/birdcage/internal/machine"
)

// Machine is the machine profile a run is on (internal/machine): how many
// times longer every wait may be, the probe rate, the VM's accelerator.
// Start takes it in Options.Machine (nil reads MachineFromEnv) and keeps it
// on the cluster (Cluster.Machine); every wait the harness makes honours it,
// and the results record it.
type Machine = machine.Profile

// The variables a machine profile is read from.
const (
	TimeoutScaleEnv = machine.TimeoutScaleEnv
	ProbeRateEnv    = machine.ProbeRateEnv
)

// MachineFromEnv is the machine profile from $BIRDCAGE_TIMEOUT_SCALE,
// $BIRDCAGE_PROBE_RATE and $BIRDCAGE_VM_ACCEL_USED; an error names the
// variable and what is valid.
func MachineFromEnv() (Machine, error) { return machine.FromEnv() }

// defaultConvergeTimeout is how long Start waits for convergence unless
// Options say otherwise: 60 s on a machine that runs at native speed.
const defaultConvergeTimeout = 60 * time.Second

// resolveMachine is Options.Machine, or the environment's profile.
func resolveMachine(o Options) (Machine, error) { return machineOrEnv(o.Machine) }

// machineOrEnv is *m, or the environment's profile when m is nil.
func machineOrEnv(m *Machine) (Machine, error) {
	if m != nil {
		return *m, nil
	}
	return MachineFromEnv()
}

// convergeTimeout is Options.ConvergeTimeout, or the default stretched by
// the machine's timeout scale.
func convergeTimeout(o Options, m Machine) time.Duration {
	if o.ConvergeTimeout != 0 {
		return o.ConvergeTimeout
	}
	return m.Wait(defaultConvergeTimeout)
}
