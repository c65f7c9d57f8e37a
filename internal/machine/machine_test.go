package machine

import (
	"testing"
	"time"
)

func TestZeroProfileIsANativeMachine(t *testing.T) {
	var p Profile
	if p.Wait(time.Second) != time.Second || p.Rate() != DefaultProbeRate || p.RateAtMost(200) != 200 || p.String() != "native, probes 1000/s per flow" {
		t.Errorf("zero profile: wait %v, rate %d, at most 200: %d, %q", p.Wait(time.Second), p.Rate(), p.RateAtMost(200), p.String())
	}
	vm := Profile{TimeoutScale: 2, ProbeRate: 200, ProbeRateSet: true, Accel: "tcg"}
	if vm.RateAtMost(500) != 200 || vm.String() != "vm (tcg), probes 200/s per flow, waits ×2" {
		t.Errorf("TCG profile: at most 500: %d, %q", vm.RateAtMost(500), vm.String())
	}
}
