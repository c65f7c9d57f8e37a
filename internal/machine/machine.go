// Package machine is what the machine a run is on asks of birdcage: how many
// times longer every wait may be, how many probes per second each flow can
// carry, and whether a hypervisor stands between the run and the hardware.
//
// A Profile is read once (FromEnv) and handed down: harness.Start keeps it on
// the cluster, the cluster hands it to every BIRD it starts and every wait it
// makes, and the scenarios take their Eventually limits from it. A wait is
// written as what it is on a machine at native speed (30 s for a route to
// appear); Wait stretches it. Nothing here changes a verdict: a claim that
// holds holds sooner, one that does not still fails, later.
package machine

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// The variables a profile is read from.
const (
	// TimeoutScaleEnv stretches every waiting limit, e.g. 2 under QEMU
	// without KVM (ci/vm/run sets it in the guest).
	TimeoutScaleEnv = "BIRDCAGE_TIMEOUT_SCALE"
	// ProbeRateEnv is the probe rate (per flow per second) for runners that
	// cannot carry 1 kHz on every flow, such as a VM under software
	// emulation.
	ProbeRateEnv = "BIRDCAGE_PROBE_RATE"
	// AccelEnv is set inside the VM by ci/vm/run to the accelerator in use
	// (kvm, tcg).
	AccelEnv = "BIRDCAGE_VM_ACCEL_USED"
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
	// ProbeRateSet says the rate was chosen ($BIRDCAGE_PROBE_RATE), not
	// defaulted: the scale scenarios run at 250/s unless one was chosen.
	ProbeRateSet bool
	// Accel is the VM's accelerator ("kvm", "tcg"); empty natively.
	Accel string
}

// FromEnv reads a profile from the environment; an error names the
// variable, the value and what is valid.
func FromEnv() (Profile, error) {
	var p Profile
	if v := os.Getenv(TimeoutScaleEnv); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 1 || f > 20 {
			return Profile{}, fmt.Errorf("%s=%q: want a number from 1 to 20 (how many times longer the harness and scenarios may wait)", TimeoutScaleEnv, v)
		}
		p.TimeoutScale = f
	}
	if v := os.Getenv(ProbeRateEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return Profile{}, fmt.Errorf("%s=%q: want a whole number of probes per second per flow from 1 to 100000", ProbeRateEnv, v)
		}
		p.ProbeRate, p.ProbeRateSet = n, true
	}
	p.Accel = os.Getenv(AccelEnv)
	return p, nil
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
