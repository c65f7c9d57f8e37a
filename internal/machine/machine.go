// Package machine is what the machine a run is on asks of birdcage: how many
// times longer every wait may be, how many probes per second each flow can
// carry, and whether a hypervisor stands between the run and the hardware.
//
// A Profile is built once at a process's edge from its environment
// (internal/env: Config.Machine) and handed down: harness.Start keeps it on
// the cluster, the cluster hands it to every BIRD it starts and every wait it
// makes, and the scenarios take their Eventually limits from it. A wait is
// written as what it is on a machine at native speed (30 s for a route to
// appear); Wait stretches it. Nothing here changes a verdict: a claim that
// holds holds sooner, one that does not still fails, later.
package machine

import (
	"fmt"
	"time"
)

// DefaultProbeRate is the probe rate on a machine at native speed: 1 kHz
// per flow, so a 1 ms gap is one lost probe.
const DefaultProbeRate = 1000

// Profile is one machine's answer. The zero Profile is a machine at native
// speed with the default probe rate.
type Profile struct {
	// TimeoutScale is how many times longer waits may be (1 to 20; 0 reads
	// as 1).
	TimeoutScale float64
	// ProbeRate is probes per second per flow (0 reads as DefaultProbeRate).
	ProbeRate int
	// ProbeRateSet says the rate was chosen (internal/env.ProbeRate), not
	// defaulted: the scale scenarios run at 250/s unless one was chosen.
	ProbeRateSet bool
	// Accel is the VM's accelerator ("kvm", "tcg"); empty natively.
	Accel string
}

// Scale is TimeoutScale, 1 when unset.
func (p Profile) Scale() float64 {
	if p.TimeoutScale < 1 {
		return 1
	}
	return p.TimeoutScale
}

// Wait is d, a limit on a machine at native speed, on this machine.
func (p Profile) Wait(d time.Duration) time.Duration {
	return time.Duration(float64(d) * p.Scale())
}

// Rate is the probe rate per flow on this machine.
func (p Profile) Rate() int {
	if p.ProbeRate <= 0 {
		return DefaultProbeRate
	}
	return p.ProbeRate
}

// RateAtMost is the probe rate for a session that carries no more than max
// per flow (many flows, or many nodes, on a small machine).
func (p Profile) RateAtMost(max int) int { return min(max, p.Rate()) }

// Stalls says the machine is one known to stall every flow at once: a VM
// under software emulation (TCG), the accelerator really used.
func (p Profile) Stalls() bool { return p.Accel == "tcg" }

// Where is "native", or "vm" when a hypervisor runs the guest.
func (p Profile) Where() string {
	if p.Accel != "" {
		return "vm"
	}
	return "native"
}

// String is the profile in one line, as a run reports it.
func (p Profile) String() string {
	s := p.Where()
	if p.Accel != "" {
		s += " (" + p.Accel + ")"
	}
	s += fmt.Sprintf(", probes %d/s per flow", p.Rate())
	if p.Scale() > 1 {
		s += fmt.Sprintf(", waits ×%g", p.Scale())
	}
	return s
}
