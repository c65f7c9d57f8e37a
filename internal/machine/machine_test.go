package machine

import (
	"strings"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		scale, rate, accel string
		wait               time.Duration // of 30 s
		probes             int
		where              string
	}{
		{"", "", "", 30 * time.Second, 1000, "native"},
		{"3", "", "", 90 * time.Second, 1000, "native"},
		{"2", "200", "tcg", 60 * time.Second, 200, "vm"},
		{"2.5", "", "kvm", 75 * time.Second, 1000, "vm"},
	} {
		t.Setenv(TimeoutScaleEnv, c.scale)
		t.Setenv(ProbeRateEnv, c.rate)
		t.Setenv(AccelEnv, c.accel)
		p, err := FromEnv()
		if err != nil {
			t.Fatalf("scale %q rate %q: %v", c.scale, c.rate, err)
		}
		if got := p.Wait(30 * time.Second); got != c.wait {
			t.Errorf("scale %q: Wait(30s) = %v, want %v", c.scale, got, c.wait)
		}
		if p.Rate() != c.probes || p.ProbeRateSet != (c.rate != "") || p.Where() != c.where {
			t.Errorf("rate %q accel %q: %+v, want rate %d, where %s", c.rate, c.accel, p, c.probes, c.where)
		}
	}
}

func TestFromEnvRefusesBadValuesNamingTheVariable(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{TimeoutScaleEnv, "0.5"}, {TimeoutScaleEnv, "x"}, {TimeoutScaleEnv, "21"},
		{ProbeRateEnv, "0"}, {ProbeRateEnv, "fast"}, {ProbeRateEnv, "-5"},
	} {
		t.Setenv(TimeoutScaleEnv, "")
		t.Setenv(ProbeRateEnv, "")
		t.Setenv(c.name, c.value)
		if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.value) {
			t.Errorf("%s=%q: %v, want an error naming the variable and the value", c.name, c.value, err)
		}
	}
}

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
